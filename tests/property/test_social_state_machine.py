"""Random sequences of social commands (INVARIANTS.md §3): friendships, groups, items and subscriptions, inbox
answers, todos and automations by random people. After every step every SOC detector must find nothing, every
refusal must be a DomainError with a stable code (never an IntegrityError or anything else), and each person's
permission on each item, as the read path answers it, must equal an oracle of spec 000 §D computed from the
rows (owner; else own active or paused subscription; else group subscriptions within role defaults; else none).

The machine owns an event loop and an engine on it; each example runs inside one outer transaction on one
connection (every unit of work a SAVEPOINT), rolled back at teardown.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from sqlalchemy import text

from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.social import automations, friends, groups, inbox, items, queries, todos
from tests.support.statemachine import DatabaseMachine, run_machine

# Long by design (tens of command sequences against a real database, each checked by every detector): about
# 150 s on a slow 2-core machine, and a failure's shrinking takes longer; the suite's 300 s would cut a run short.
pytestmark = pytest.mark.timeout(900)

PEOPLE = 5
LA = "America/Los_Angeles"
MEMBERS = "SELECT user_id FROM social.group_members WHERE group_id = :k AND status <> 'removed' ORDER BY id"
INVOLVED = """SELECT owner_id FROM social.schedule_items WHERE id = :k
              UNION ALL SELECT subscriber_id FROM social.schedule_subscriptions WHERE item_id = :k
                          AND subject_type = 'user'
              UNION ALL SELECT m.user_id FROM social.schedule_subscriptions s JOIN social.group_members m
                          ON m.group_id = s.subscriber_id WHERE s.item_id = :k AND m.status <> 'removed'"""
INDEX = st.integers(min_value=0, max_value=63)
OUTCOMES: Counter[str] = Counter()
ROLE_BITS = {"creator": 7, "admin": 3, "member": 1}


class SocialCommands(DatabaseMachine):
    outcomes = OUTCOMES

    def __init__(self) -> None:
        super().__init__()
        self.people = self.run(self._make_people())
        self.friendships: list[Any] = []
        self.groups: list[Any] = []
        self.items: list[Any] = []
        self.subscriptions: list[tuple[Any, Any]] = []
        self.todos: list[Any] = []
        self.jobs: list[Any] = []

    async def _make_people(self) -> list[Any]:
        passwords = Passwords(time_cost=1, memory_kib=1024)
        made = []
        async with self.db.unit_of_work() as session:
            for index in range(PEOPLE):
                made.append(await iam_service.create_user(
                    session, passwords=passwords, email=f"social{index}@example.com", password="a-long-password-1",
                    display_name=f"P{index}", now=self.clock.now(), actor=Actor.system(), roles=[Role.EMPLOYEE]))
        return made

    def person(self, index: int) -> Any:
        return self.people[index % PEOPLE]

    def insider(self, sql: str, key: Any, who: int) -> Any:
        """Mostly someone involved (a current member, the owner or a subscriber), so commands get past the 404s;
        one time in four anyone."""
        if who % 4 == 0:
            return self.person(who)
        ids = self.run(self._ids(sql, key))
        if not ids:
            return self.person(who)
        by_id = {p.id: p for p in self.people}
        return by_id.get(self.pick(ids, who), self.person(who))

    async def _ids(self, sql: str, key: Any) -> list[Any]:
        async with self.db.read_only() as session:
            return list((await session.execute(text(sql), {"k": key})).scalars())

    @property
    def now(self) -> datetime:
        return self.clock.now()

    # --- friendships ---------------------------------------------------------------------------------

    @rule(a=INDEX, b=INDEX)
    def request_friendship(self, a: int, b: int) -> None:
        made = self.command(lambda s: friends.request(s, principal_id=self.person(a).id, target_id=self.person(b).id,
                                                      cooldown=timedelta(days=1), inbox_limit=None, now=self.now))
        if made is not None and made[0].id not in self.friendships:
            self.friendships.append(made[0].id)

    @precondition(lambda self: self.friendships)
    @rule(who=INDEX, which=INDEX, action=st.sampled_from(["accept", "decline", "cancel", "block", "unblock",
                                                         "unfriend"]))
    def act_on_friendship(self, who: int, which: int, action: str) -> None:
        friendship_id = self.pick(self.friendships, which)
        self.command(lambda s: friends.act(s, friendship_id=friendship_id, principal_id=self.person(who).id,
                                           action=action, now=self.now))

    # --- groups ------------------------------------------------------------------------------------------

    @rule(who=INDEX, public=st.booleans())
    def create_group(self, who: int, public: bool) -> None:
        group = self.command(lambda s: groups.create_group(
            s, principal_id=self.person(who).id, name=f"G{len(self.groups)}", description=None,
            visibility="public" if public else "private", creation_limit=None, now=self.now))
        if group is not None:
            self.groups.append(group.id)

    @precondition(lambda self: self.groups)
    @rule(who=INDEX, whom=INDEX, which=INDEX)
    def invite(self, who: int, whom: int, which: int) -> None:
        group_id = self.pick(self.groups, which)
        actor = self.insider(MEMBERS, group_id, who)
        self.command(lambda s: groups.invite(s, group_id=group_id, principal_id=actor.id,
                                             user_id=self.person(whom).id, inbox_limit=None, max_members=4,
                                             now=self.now))

    @precondition(lambda self: self.groups)
    @rule(who=INDEX, which=INDEX)
    def join(self, who: int, which: int) -> None:
        group_id = self.pick(self.groups, which)
        self.command(lambda s: groups.join(s, group_id=group_id, principal_id=self.person(who).id, max_members=4,
                                           now=self.now))

    @precondition(lambda self: self.groups)
    @rule(who=INDEX, whom=INDEX, which=INDEX, role=st.sampled_from([None, "creator", "admin", "member"]),
          status=st.sampled_from([None, "muted", "active"]))
    def change_member(self, who: int, whom: int, which: int, role: str | None, status: str | None) -> None:
        group_id = self.pick(self.groups, which)
        actor, target = self.insider(MEMBERS, group_id, who), self.insider(MEMBERS, group_id, whom)
        self.command(lambda s: groups.change_member(s, group_id=group_id, principal_id=actor.id,
                                                    user_id=target.id, role=role, status=status,
                                                    now=self.now))

    @precondition(lambda self: self.groups)
    @rule(who=INDEX, whom=INDEX, which=INDEX)
    def remove_member(self, who: int, whom: int, which: int) -> None:
        group_id = self.pick(self.groups, which)
        actor, target = self.insider(MEMBERS, group_id, who), self.insider(MEMBERS, group_id, whom)
        self.command(lambda s: groups.remove_member(s, group_id=group_id, principal_id=actor.id,
                                                    user_id=target.id, now=self.now))

    @precondition(lambda self: self.groups)
    @rule(who=INDEX, which=INDEX, unarchive=st.booleans())
    def archive(self, who: int, which: int, unarchive: bool) -> None:
        group_id = self.pick(self.groups, which)
        actor = self.insider(MEMBERS, group_id, who)
        self.command(lambda s: groups.archive_group(s, group_id=group_id, principal_id=actor.id,
                                                    now=self.now, unarchive=unarchive))

    # --- items and subscriptions ---------------------------------------------------------------------------

    @rule(who=INDEX, weekly=st.booleans())
    def create_item(self, who: int, weekly: bool) -> None:
        start = self.now + timedelta(hours=3)
        item = self.command(lambda s: items.create_item(
            s, principal_id=self.person(who).id, title="Meet", description=None, start_at=start,
            end_at=start + timedelta(hours=1), timezone=LA, recurrence_rule="FREQ=WEEKLY" if weekly else None,
            source_type="manual", status="active", now=self.now))
        if item is not None:
            self.items.append(item.id)

    @precondition(lambda self: self.items)
    @rule(who=INDEX, whom=INDEX, which=INDEX, to_group=st.booleans(),
          permission=st.sampled_from([None, ["view"], ["view", "invite"], ["view", "edit"],
                                      ["view", "invite", "edit"]]))
    def share(self, who: int, whom: int, which: int, to_group: bool, permission: list[str] | None) -> None:
        item_id = self.pick(self.items, which)
        if to_group and not self.groups:
            return
        subject = self.pick(self.groups, whom) if to_group else self.person(whom).id
        actor = self.insider(INVOLVED, item_id, who)
        made = self.command(lambda s: items.share(
            s, item_id=item_id, principal_id=actor.id, subject_type="group" if to_group else "user",
            subject_id=subject, permission=permission, notify_level="all", inbox_limit=None, now=self.now))
        if made is not None:
            self.subscriptions.append((item_id, made.id))

    @precondition(lambda self: self.subscriptions)
    @rule(who=INDEX, which=INDEX, permission=st.sampled_from([None, ["view"], ["view", "edit"]]),
          status=st.sampled_from([None, "paused", "active"]), delete=st.booleans())
    def change_subscription(self, who: int, which: int, permission: list[str] | None, status: str | None,
                            delete: bool) -> None:
        item_id, subscription_id = self.pick(self.subscriptions, which)
        actor = self.insider(INVOLVED, item_id, who).id
        if delete:
            self.command(lambda s: items.delete_subscription(s, item_id=item_id, subscription_id=subscription_id,
                                                             principal_id=actor, now=self.now))
        else:
            self.command(lambda s: items.update_subscription(s, item_id=item_id, subscription_id=subscription_id,
                                                             principal_id=actor, permission=permission,
                                                             notify_level=None, status=status, now=self.now))

    @precondition(lambda self: self.items)
    @rule(who=INDEX, which=INDEX, status=st.sampled_from(["active", "canceled"]))
    def edit_item(self, who: int, which: int, status: str) -> None:
        item_id = self.pick(self.items, which)
        actor = self.insider(INVOLVED, item_id, who)
        self.command(lambda s: items.update_item(s, item_id=item_id, principal_id=actor.id,
                                                 changes={"title": "Edited", "status": status},
                                                 expected_version=None, if_match=False, now=self.now))

    @precondition(lambda self: self.items)
    @rule(who=INDEX, which=INDEX)
    def delete_item(self, who: int, which: int) -> None:
        item_id = self.pick(self.items, which)
        actor = self.insider(INVOLVED, item_id, who)
        self.command(lambda s: items.delete_item(s, item_id=item_id, principal_id=actor.id, now=self.now))

    # --- inbox and todos ------------------------------------------------------------------------------

    @rule(who=INDEX, which=INDEX, action=st.sampled_from(["accept", "reject", "read", "dismiss"]))
    def answer_message(self, who: int, which: int, action: str) -> None:
        person = self.person(who)
        ids = self.run(self._messages(person.id))
        if not ids:
            return
        message_id = self.pick(ids, which)
        if action in ("accept", "reject"):
            self.command(lambda s: inbox.answer(s, message_id=message_id, principal_id=person.id,
                                                accept=action == "accept", max_members=4, now=self.now))
        elif action == "read":
            self.command(lambda s: inbox.read(s, message_id=message_id, principal_id=person.id, now=self.now))
        else:
            self.command(lambda s: inbox.dismiss(s, message_id=message_id, principal_id=person.id, now=self.now))

    async def _messages(self, user_id: Any) -> list[Any]:
        async with self.db.read_only() as session:
            return list((await session.execute(text(
                "SELECT id FROM social.inbox_messages WHERE recipient_id = :u ORDER BY created_at, id"),
                {"u": user_id})).scalars())

    @precondition(lambda self: self.items)
    @rule(who=INDEX, which=INDEX)
    def extract_twice(self, who: int, which: int) -> None:
        item_id = self.pick(self.items, which)
        person = self.insider(INVOLVED, item_id, who).id
        first = self.command(lambda s: todos.extract(s, principal_id=person, item_ids=[item_id], window=None,
                                                     priority="medium", now=self.now))
        second = self.command(lambda s: todos.extract(s, principal_id=person, item_ids=[item_id], window=None,
                                                      priority="medium", now=self.now))
        if first is not None:
            assert second is not None and second[1] == [], "a repeated extraction created todos"
            self.todos.extend(first[1])

    @precondition(lambda self: self.todos)
    @rule(which=INDEX, status=st.sampled_from(["done", "pending", "canceled", "archived"]))
    def change_todo(self, which: int, status: str) -> None:
        todo_id = self.pick(self.todos, which)
        owner = self.run(self._owner_of(todo_id))
        if owner is not None:
            self.command(lambda s: todos.update_todo(s, todo_id=todo_id, principal_id=owner, changes={"status": status},
                                                     expected_version=None, now=self.now))

    async def _owner_of(self, todo_id: Any) -> Any:
        async with self.db.read_only() as session:
            return (await session.execute(text("SELECT owner_id FROM social.todos WHERE id = :t"),
                                          {"t": todo_id})).scalar()

    # --- automations and time --------------------------------------------------------------------------

    @rule(who=INDEX, kind=st.sampled_from(["todo_digest", "schedule_reminder", "todo_from_schedule"]))
    def create_job(self, who: int, kind: str) -> None:
        from datetime import time

        job = self.command(lambda s: automations.create_job(
            s, principal_id=self.person(who).id, name="J", job_type=kind, target_type="user", target_id=None,
            params={}, schedule_type="daily", schedule_time=time(10), schedule_weekday=None, status="active",
            limit=3, default_timezone=LA, now=self.now))
        if job is not None:
            self.jobs.append(job.id)

    @rule(hours=st.sampled_from([1, 6, 25]))
    def time_passes_and_the_worker_runs(self, hours: int) -> None:
        self.clock.advance(timedelta(hours=hours))
        self.run(automations.schedule(self.db, now=self.now, default_timezone=LA, max_attempts=3,
                                      retry_base_seconds=60))
        self.run(automations.drain(self.db, clock=self.clock, default_timezone=LA, lease_seconds=120,
                                   retry_base_seconds=60))

    @rule(who=INDEX)
    def delete_an_account(self, who: int) -> None:
        # Rare and last: deleting leaves fewer people to act; once per example at most.
        if getattr(self, "_deleted", False) or who % 23:
            return
        self._deleted = True
        self.command(lambda s: iam_service.delete_user(s, user_id=self.person(who).id, now=self.now,
                                                       actor=Actor.system()))

    # --- after every step -----------------------------------------------------------------------------

    @invariant()
    def every_social_rule_holds(self) -> None:
        violations = self.run(self.detected("SOC-"))
        assert not violations, [(v.invariant.id, v.sample) for v in violations]

    @invariant()
    def permissions_match_the_oracle(self) -> None:
        if self.items:
            self.run(self._compare_permissions())

    async def _compare_permissions(self) -> None:
        async with self.db.read_only() as session:
            rows = (await session.execute(text("SELECT id, owner_id FROM social.schedule_items"))).all()
            subs = (await session.execute(text(
                "SELECT item_id, subject_type, subscriber_id, permission, status FROM social.schedule_subscriptions")
            )).all()
            members = (await session.execute(text(
                "SELECT m.group_id, m.user_id, m.role FROM social.group_members m JOIN social.groups g "
                "ON g.id = m.group_id WHERE m.status <> 'removed' AND g.status = 'active'"))).all()
        for item_id, owner_id in rows:
            for person in self.people:
                expected = _oracle(item_id, owner_id, person.id, subs, members)
                row = await self.db.reads.one(queries.ITEM_SQL, {"me": person.id, "id": item_id})
                got = int(row["my_bits"]) if row else 0
                assert got == expected, (item_id, person.id, got, expected)


def _oracle(item_id, owner_id, user_id, subs, members) -> int:
    """Spec 000 §D, from the rows."""
    if owner_id == user_id:
        return 7
    for s_item, kind, subject, permission, status in subs:
        if s_item == item_id and kind == "user" and subject == user_id and status in ("active", "paused"):
            return items.bits_of(permission)
    bits = 0
    for s_item, kind, subject, permission, status in subs:
        if s_item == item_id and kind == "group" and status in ("active", "paused"):
            for group_id, member, role in members:
                if group_id == subject and member == user_id:
                    bits |= items.bits_of(permission) & ROLE_BITS[role]
    return bits if bits & 1 else 0


@pytest.mark.invariant(*(f"SOC-INV-{n:02d}" for n in range(4, 23)))
def test_random_command_sequences_keep_every_social_rule(database_url):
    run_machine(SocialCommands, database_url, OUTCOMES, max_examples=12, steps=30)
    assert OUTCOMES["ok"] > 0 and len(OUTCOMES) >= 10, OUTCOMES
