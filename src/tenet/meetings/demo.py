"""`tenet demo` for meeting attendance: a past meeting with check-ins, a guest and an excuse, an upcoming
meeting with an agenda and an upload task, and a weekly series half held, so the reports have something to show.
Safe to run again."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.principal import Principal
from tenet.meetings import attendances, checkin, series, service
from tenet.meetings.agenda import service as agenda
from tenet.meetings.codes import CheckInCodes
from tenet.meetings.models import Meeting
from tenet.meetings.permissions import MEETING_MANAGER

TITLE = "Demo: all-hands"


async def load_demo(session: AsyncSession, *, manager_id: uuid.UUID, leader_id: uuid.UUID,
                    employee_id: uuid.UUID, policy: service.MeetingPolicy, now: datetime) -> str:
    if (await session.scalars(select(Meeting.id).where(Meeting.title == TITLE).limit(1))).first() is not None:
        return f"kept meeting demo data ({TITLE!r})"
    # The demo's own key: these check-ins are written here, never scanned, so no code of it is ever shown.
    codes = CheckInCodes("demo-key-never-used-for-rotating-codes-0123", 30)
    past_start = (now - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    created_at = past_start - timedelta(days=1)
    attendees = [leader_id, employee_id]
    past, _ = await service.create_meeting(
        session, principal_id=manager_id, fields={"title": TITLE, "location": "Room 1", "city": "Seattle",
                                              "start_time": past_start, "end_time": past_start + timedelta(hours=1)},
        attendee_ids=attendees, template_id=None, policy=policy, now=created_at)
    await checkin.check_in_user(session, meeting_id=past.id, principal_id=employee_id, mode="offline",
                                device_id="demo-device-employee", code=codes.offline_code(past.id), now=past_start,
                                codes=codes)
    await checkin.check_in_guest(session, meeting_id=past.id, guest=checkin.Guest.clean(
        name="Grace Guest", email="grace@guest.example", phone=None, organization="Partner Inc."), mode="offline",
        device_id="demo-device-guest", code=codes.offline_code(past.id), now=past_start + timedelta(minutes=7),
        client_address=None, codes=codes)
    await attendances.record_attendance(session, meeting_id=past.id, user_id=leader_id, status="EXCUSED",
                                        note="Customer visit", checked_in_at=None, principal_id=manager_id,
                                        now=past_start + timedelta(hours=2))
    upcoming_start = (now + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    planning, _ = await service.create_meeting(
        session, principal_id=manager_id, fields={"title": "Demo: planning", "online_link": "https://meet.example/plan",
                                              "start_time": upcoming_start,
                                              "end_time": upcoming_start + timedelta(minutes=45)},
        attendee_ids=attendees, template_id=None, policy=policy, now=now)
    # Its agenda: two sections, three items, the employee asked for the slides of the first (issue 11).
    manager = Principal(kind="user", id=manager_id, roles=frozenset({MEETING_MANAGER}))
    updates = await agenda.create_section(session, meeting_id=planning.id, title="Updates", principal=manager, now=now)
    slides = await agenda.create_item(session, section_id=updates.id, principal=manager, now=now, fields={
        "title": "Quarter in numbers", "code": "1.1", "time_minutes": 10, "presenter_user_id": employee_id,
        "category_tag": "REPORT"})
    await agenda.create_item(session, section_id=updates.id, principal=manager, now=now, fields={
        "title": "Hiring", "code": "1.2", "time_minutes": 5, "category_tag": "INFORMATION"})
    decisions = await agenda.create_section(session, meeting_id=planning.id, title="Decisions", principal=manager,
                                            now=now)
    await agenda.create_item(session, section_id=decisions.id, principal=manager, now=now,
                             fields={"title": "Next offsite", "code": "2.1", "category_tag": "DECISION"})
    await agenda.assign_tasks(session, item_id=slides.id, assignee_ids=[employee_id], due_at=upcoming_start,
                              principal=manager, now=now)
    first_day = (now - timedelta(weeks=3)).astimezone(UTC).date()
    weekly, meeting_ids, _ = await series.create_series(
        session, principal_id=manager_id,
        fields={"title": "Demo: weekly team", "timezone": "UTC", "start_date": first_day,
                "start_local_time": time(9, 0), "duration_minutes": 30, "rrule": "FREQ=WEEKLY;COUNT=6",
                "organizer_id": leader_id, "required_attendee_ids": attendees},
        template_id=None, policy=policy, now=now - timedelta(weeks=4))
    occurrences = (await session.scalars(select(Meeting).where(Meeting.series_id == weekly.id).order_by(
        Meeting.start_time))).all()
    for index, occurrence in enumerate(o for o in occurrences if o.start_time < now):
        late = timedelta(minutes=8) if index % 2 else timedelta(0)
        await checkin.check_in_user(session, meeting_id=occurrence.id, principal_id=employee_id, mode="online",
                                    device_id="demo-device-employee", code=None, now=occurrence.start_time + late,
                                    codes=codes)
    return (f"created meetings {TITLE!r} (held: 1 present, 1 excused, 1 guest), 'Demo: planning' (tomorrow, with an "
            "agenda and an upload task for the demo employee) and "
            f"the series 'Demo: weekly team' ({len(meeting_ids)} occurrences, led by the demo leader)")
