"""Social demo data for `tenet demo` (idempotent by the group name "Demo team"): friends, a group with a pending
invitation, a weekly item shared with the group, an item offered to a person, todos and an automation."""

from __future__ import annotations

import uuid
from datetime import datetime, time, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.social import automations, friends, groups, inbox, items, todos

DEMO_GROUP = "Demo team"


async def load(session: AsyncSession, *, manager: uuid.UUID, leader: uuid.UUID, employee: uuid.UUID,
               agent: uuid.UUID, default_timezone: str, now: datetime) -> str:
    exists = await (await statements(session)).value(
        "SELECT 1 FROM social.groups WHERE name = %(n)s AND owner_id = %(o)s", {"n": DEMO_GROUP, "o": manager})
    if exists:
        return f"kept social group {DEMO_GROUP!r}"
    for other in (leader, employee):
        friendship, _ = await friends.request(session, principal_id=manager, target_id=other, cooldown=timedelta(0),
                                              inbox_limit=None, now=now)
        await friends.act(session, friendship_id=friendship.id, principal_id=other, action="accept", now=now)
    await friends.request(session, principal_id=employee, target_id=agent, cooldown=timedelta(0), inbox_limit=None,
                          now=now)
    await friends.request(session, principal_id=manager, target_id=agent, cooldown=timedelta(0), inbox_limit=None,
                          now=now)
    group = await groups.create_group(session, principal_id=manager, name=DEMO_GROUP,
                                      description="Everyone on the demo", visibility="private", creation_limit=None,
                                      now=now)
    for person, role in ((leader, "admin"), (employee, "member")):
        message = await groups.invite(session, group_id=group.id, principal_id=manager, user_id=person,
                                      inbox_limit=None, max_members=500, now=now)
        await inbox.answer(session, message_id=message.id, principal_id=person, accept=True, max_members=500, now=now)
        if role == "admin":
            await groups.change_member(session, group_id=group.id, principal_id=manager, user_id=person, role="admin",
                                       status=None, now=now)
    monday = (now + timedelta(days=(7 - now.weekday()) % 7 or 7)).replace(hour=18, minute=0, second=0, microsecond=0)
    sync = await items.create_item(session, principal_id=manager, title="Team sync", description="Weekly",
                                   start_at=monday, end_at=monday + timedelta(minutes=30), timezone=default_timezone,
                                   recurrence_rule=None, source_type="manual", status="active", now=now)
    await items.share(session, item_id=sync.id, principal_id=manager, subject_type="group", subject_id=group.id,
                      permission=None, notify_level="all", inbox_limit=None, now=now)
    review = await items.create_item(session, principal_id=manager, title="Quarterly review", description=None,
                                     start_at=monday + timedelta(days=3), end_at=monday + timedelta(days=3, hours=1),
                                     timezone=default_timezone, recurrence_rule=None, source_type="manual",
                                     status="active", now=now)
    await items.share(session, item_id=review.id, principal_id=manager, subject_type="user", subject_id=employee,
                      permission=["view"], notify_level="all", inbox_limit=None, now=now)
    await todos.extract(session, principal_id=employee, item_ids=[sync.id], window=None, priority="high", now=now)
    await todos.create_todo(session, principal_id=employee, title="Read the onboarding notes", description=None,
                            due_at=now + timedelta(days=2), priority="medium", source_ids=[], now=now)
    await automations.create_job(session, principal_id=manager, name="Morning digest", job_type="todo_digest",
                                 target_type="user", target_id=None, params={}, schedule_type="daily",
                                 schedule_time=time(8, 30), schedule_weekday=None, status="active", limit=20,
                                 default_timezone=default_timezone, now=now)
    return (f"created social group {DEMO_GROUP!r} (manager, leader as admin, employee), friendships, a shared "
            "'Team sync', an offer of 'Quarterly review' in the employee's inbox, todos and a daily digest")
