"""Random sequences of meeting-attendance commands (INVARIANTS.md §3): after every step every MA detector must
find nothing (judged at the machine's frozen clock through `tenet.now`), and every refusal must be a
DomainError with a stable code — never an IntegrityError, a trigger error leaking out, or any other exception.

Each example runs inside one outer transaction on one connection (every unit of work is a SAVEPOINT, as in the
`db` fixture), rolled back at teardown.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from sqlalchemy import text

from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.meetings import attendances, checkin, retention, series, service
from tenet.meetings.codes import CheckInCodes
from tests.conftest import TEST_SECRET
from tests.support.statemachine import DatabaseMachine, run_machine

# Long by design (tens of command sequences against a real database, each checked by every detector): about
# 150 s on a slow 2-core machine, and a failure's shrinking takes longer; the suite's 300 s would cut a run short.
pytestmark = pytest.mark.timeout(900)

PEOPLE = 4
DEVICES = [f"device-{i:04d}" for i in range(3)]
GUESTS = [("Ann", "ann@example.com"), ("Bob", None), ("ANN", "Ann@Example.com")]
CODES = CheckInCodes(TEST_SECRET, 30)
POLICY = service.MeetingPolicy(default_timezone="America/Los_Angeles")
INDEX = st.integers(min_value=0, max_value=63)
OUTCOMES: Counter[str] = Counter()


class MeetingCommands(DatabaseMachine):
    outcomes = OUTCOMES
        # Near the spring-forward change of Los Angeles, so clock moves cross it.
    start = datetime(2026, 3, 7, 18, 0, tzinfo=UTC)

    def __init__(self) -> None:
        super().__init__()
        self.manager, self.people = self.run(self._make_people())
        self.meetings: list[str] = []
        self.series: list[Any] = []
        self.attendances: list[Any] = []

    async def _make_people(self) -> tuple[Any, list[Any]]:
        passwords = Passwords(time_cost=1, memory_kib=1024)
        async with self.db.unit_of_work() as session:
            manager = await iam_service.create_user(
                session, passwords=passwords, email="manager@example.com", password="a-long-password-1",
                display_name="Manager", now=self.clock.now(), actor=Actor.system(), roles=[Role.MEETING_MANAGER])
            people = [await iam_service.create_user(
                session, passwords=passwords, email=f"person{i}@example.com", password="a-long-password-1",
                display_name=f"Person {i}", now=self.clock.now(), actor=Actor.system(), roles=[Role.EMPLOYEE])
                for i in range(PEOPLE)]
        return manager, people

    # --- meetings -----------------------------------------------------------------------------------

    @rule(starts_in=st.integers(-120, 600), minutes=st.sampled_from([15, 60, 180]), grace=st.sampled_from([0, 5, 15]),
          opens=st.sampled_from([0, 30]), who=st.sets(st.integers(0, PEOPLE - 1), max_size=PEOPLE),
          rotating=st.booleans())
    def create_meeting(self, starts_in: int, minutes: int, grace: int, opens: int, who: set[int],
                       rotating: bool) -> None:
        start = self.clock.now() + timedelta(minutes=starts_in)
        made = self.command(lambda s: service.create_meeting(
            s, principal_id=self.manager.id, fields={"title": "M", "start_time": start,
                                                 "end_time": start + timedelta(minutes=minutes),
                                                 "late_grace_minutes": grace, "checkin_opens_minutes_before": opens,
                                                 "rotating_online_code": rotating},
            attendee_ids=[self.people[i].id for i in who], template_id=None, policy=POLICY, now=self.clock.now()))
        if made is not None:
            self.meetings.append(made[0].id)

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, delta=st.integers(-90, 90), grace=st.sampled_from([None, 0, 10]))
    def reschedule(self, which: int, delta: int, grace: int | None) -> None:
        meeting_id = self.pick(self.meetings, which)

        async def move(session):
            current = await service.lock_meeting(session, meeting_id)
            changes: dict[str, Any] = {"start_time": current.start_time + timedelta(minutes=delta),
                                       "end_time": current.end_time + timedelta(minutes=delta)}
            if grace is not None:
                changes["late_grace_minutes"] = grace
            return await service.update_meeting(session, meeting_id=meeting_id, principal_id=self.manager.id,
                                                changes=changes, expected_version=None, now=self.clock.now())

        self.command(move)

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, who=st.sets(st.integers(0, PEOPLE - 1), max_size=PEOPLE))
    def set_attendees(self, which: int, who: set[int]) -> None:
        self.command(lambda s: service.set_required_attendees(
            s, meeting_id=self.pick(self.meetings, which), principal_id=self.manager.id,
            user_ids=[self.people[i].id for i in who], expected_version=None, now=self.clock.now()))

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX)
    def cancel(self, which: int) -> None:
        self.command(lambda s: service.cancel_meeting(s, meeting_id=self.pick(self.meetings, which),
                                                      principal_id=self.manager.id, reason=None, now=self.clock.now()))

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX)
    def delete(self, which: int) -> None:
        self.command(lambda s: service.delete_meeting(s, meeting_id=self.pick(self.meetings, which),
                                                      principal_id=self.manager.id, now=self.clock.now()))

    @rule(minutes=st.sampled_from([1, 5, 6, 29, 30, 60, 60 * 24, 60 * 24 * 95]))
    def time_passes(self, minutes: int) -> None:
        self.clock.advance(timedelta(minutes=minutes))

    # --- check-in -----------------------------------------------------------------------------------

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, who=INDEX, device=st.sampled_from(DEVICES), mode=st.sampled_from(["online", "offline"]),
          with_code=st.booleans())
    def user_check_in(self, which: int, who: int, device: str, mode: str, with_code: bool) -> None:
        meeting_id = self.pick(self.meetings, which)
        signed = CODES.code(meeting_id, self.clock.now()) if mode == "online" else CODES.offline_code(meeting_id)
        code = signed if with_code else None
        done = self.command(lambda s: checkin.check_in_user(
            s, meeting_id=meeting_id, principal_id=self.pick(self.people, who).id, mode=mode, device_id=device,
            code=code, now=self.clock.now(), codes=CODES))
        if done is not None:
            self.attendances.append(done.attendance_id)

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, guest=st.sampled_from(GUESTS), device=st.sampled_from(DEVICES))
    def guest_check_in(self, which: int, guest: tuple[str, str | None], device: str) -> None:
        cleaned = checkin.Guest.clean(name=guest[0], email=guest[1], phone=None, organization=None)
        meeting_id = self.pick(self.meetings, which)
        done = self.command(lambda s: checkin.check_in_guest(
            s, meeting_id=meeting_id, guest=cleaned, mode="offline", device_id=device,
            code=CODES.offline_code(meeting_id), now=self.clock.now(), client_address="192.0.2.7", codes=CODES))
        if done is not None:
            self.attendances.append(done.attendance_id)

    @precondition(lambda self: self.attendances)
    @rule(which=INDEX, status=st.sampled_from(["PRESENT", "LATE", "EXCUSED", "ABSENT"]), note=st.booleans())
    def correct(self, which: int, status: str, note: bool) -> None:
        self.command(lambda s: attendances.correct_attendance(
            s, attendance_id=self.pick(self.attendances, which), status=status, note="reason" if note else None,
            expected_version=None, principal_id=self.manager.id, now=self.clock.now()))

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, who=INDEX, status=st.sampled_from(["PRESENT", "LATE", "EXCUSED"]))
    def record(self, which: int, who: int, status: str) -> None:
        made = self.command(lambda s: attendances.record_attendance(
            s, meeting_id=self.pick(self.meetings, which), user_id=self.pick(self.people, who).id, status=status,
            note="recorded", checked_in_at=None, principal_id=self.manager.id, now=self.clock.now()))
        if made is not None:
            self.attendances.append(made.id)

    @rule()
    def erase_guests(self) -> None:
        self.command(lambda s: retention.erase_guest_data(s, now=self.clock.now(), retention_days=90))

    # --- series -------------------------------------------------------------------------------------

    @rule(days=st.integers(0, 3), count=st.integers(1, 4), at=st.sampled_from([time(2, 30), time(9, 0)]),
          who=st.sets(st.integers(0, PEOPLE - 1), max_size=2))
    def create_series(self, days: int, count: int, at: time, who: set[int]) -> None:
        made = self.command(lambda s: series.create_series(
            s, principal_id=self.manager.id, fields={
                "title": "S", "timezone": "America/Los_Angeles",
                "start_date": (self.clock.now() + timedelta(days=days)).date(), "start_local_time": at,
                "duration_minutes": 30, "rrule": f"FREQ=DAILY;COUNT={count}",
                "required_attendee_ids": [self.people[i].id for i in who]},
            template_id=None, policy=POLICY, now=self.clock.now()))
        if made is not None:
            self.series.append(made[0].id)
            self.meetings.extend(made[1])

    @precondition(lambda self: self.series)
    @rule(which=INDEX, count=st.integers(1, 6))
    def change_count(self, which: int, count: int) -> None:
        made = self.command(lambda s: series.update_series(
            s, series_id=self.pick(self.series, which), principal_id=self.manager.id,
            changes={"rrule": f"FREQ=DAILY;COUNT={count}"}, apply_to_exceptions=False, expected_version=None,
            policy=POLICY, now=self.clock.now()))
        if made is not None:
            self.meetings.extend(made[1])

    @precondition(lambda self: self.series)
    @rule(which=INDEX, pick=INDEX, shift=st.sampled_from([-60, 30, 90]))
    def reschedule_series(self, which: int, pick: int, shift: int) -> None:
        series_id = self.pick(self.series, which)
        mine = self.run(self._meetings_of(series_id))
        if mine:
            self.command(lambda s: series.reschedule_series(
                s, series_id=series_id, from_meeting_id=self.pick(mine, pick), principal_id=self.manager.id,
                shift_minutes=shift, start_local_time=None, duration_minutes=None, include_exceptions=False,
                now=self.clock.now()))

    async def _meetings_of(self, series_id: Any) -> list[str]:
        async with self.db.read_only() as session:
            return list((await session.execute(text(
                "SELECT id FROM meeting_attendance.meetings WHERE series_id = :s ORDER BY series_occurrence_date"),
                {"s": series_id})).scalars())

    @precondition(lambda self: self.series)
    @rule(which=INDEX)
    def delete_series(self, which: int) -> None:
        self.command(lambda s: series.delete_series(s, series_id=self.pick(self.series, which),
                                                    principal_id=self.manager.id, now=self.clock.now()))

    @rule(who=INDEX)
    def delete_account(self, who: int) -> None:
        person = self.pick(self.people, who)
        self.command(lambda s: iam_service.delete_user(s, user_id=person.id, now=self.clock.now(),
                                                       actor=Actor.user(self.manager.id)))

    @invariant()
    def every_meeting_rule_holds(self) -> None:
        async def detect():
            return await self.detected("MA-", now=self.clock.now())

        violations = self.run(detect())
        assert not violations, [(v.invariant.id, v.sample, v.error) for v in violations]


@pytest.mark.invariant("MA-INV-03", "MA-INV-06", "MA-INV-07", "MA-INV-08", "MA-INV-09", "MA-INV-11", "MA-INV-13",
                       "MA-INV-16", "MA-INV-17", "MA-INV-19")
def test_random_command_sequences_keep_every_meeting_rule(database_url):
    run_machine(MeetingCommands, database_url, OUTCOMES, max_examples=10, steps=25)
    assert OUTCOMES["ok"] > 0 and OUTCOMES["DEVICE_ALREADY_USED"] + OUTCOMES["CHECK_IN_WINDOW_NOT_OPEN"] > 0, OUTCOMES
    assert len(OUTCOMES) >= 6, OUTCOMES
