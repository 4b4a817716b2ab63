"""Meeting-attendance races on real parallel connections (issue 10 "Tests"): the same user scanning twice at
once, two guests on one device at once, check-in vs cancel, and the guest rate limit under a burst. Exactly one
winner, a stable code for the losers, every MA rule holding afterwards.

The probe-to-write gap of a check-in is widened (`checkin._probed`) so that every contender has read "no
attendance yet" before anyone writes: what keeps the rules is then the database (unique indexes, the insert
trigger and its advisory lock), which the control experiment shows by removing the lock.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import text

from tenet.app import create_app
from tenet.db.database import Database
from tenet.iam.permissions import Role
from tenet.kernel.settings import Rate
from tenet.meetings import checkin, service
from tenet.meetings.codes import CheckInCodes
from tests.conftest import TEST_SECRET, test_settings
from tests.support.invariants import rules_hold
from tests.support.outcomes import outcome
from tests.support.rows import scalar
from tests.support.users import UserFactory

START = datetime(2026, 3, 2, 17, 0, tzinfo=UTC)
CODES = CheckInCodes(TEST_SECRET, 30)


def _checked_in(result) -> str:
    """What a check-in came to: a new attendance, the one already there ("already"), or "ok" when it answers None."""
    if result is None:
        return "ok"
    return "already" if result.already_checked_in else "new"


async def _meeting(db: Database, manager_id: uuid.UUID, attendees: list[uuid.UUID] = ()) -> str:
    async with db.unit_of_work() as session:
        meeting, _ = await service.create_meeting(
            session, principal_id=manager_id, fields={"title": "Race", "start_time": START,
                                                  "end_time": START + timedelta(hours=1)},
            attendee_ids=attendees, template_id=None, policy=service.MeetingPolicy(), now=START - timedelta(days=1))
    return meeting.id


def _barrier(monkeypatch, parties: int) -> None:
    """Every contender waits after its probe until all have probed."""
    barrier = asyncio.Barrier(parties)

    async def probed(request) -> None:
        await asyncio.wait_for(barrier.wait(), timeout=10)

    monkeypatch.setattr(checkin, "_probed", probed)


@pytest.mark.invariant("MA-INV-06")
@pytest.mark.parametrize("scans", [2, 8])
async def test_the_same_user_scanning_at_once_makes_one_attendance(committed_db, people, monkeypatch, scans):
    manager, user = await people.make(roles=[Role.MEETING_MANAGER]), await people.make()
    meeting_id = await _meeting(committed_db, manager.id, [user.id])
    _barrier(monkeypatch, scans)

    async def scan(device: str):
        async with committed_db.unit_of_work() as session:
            return await checkin.check_in_user(session, meeting_id=meeting_id, principal_id=user.id, mode="offline",
                                               device_id=device, code=CODES.offline_code(meeting_id),
                                               now=START, codes=CODES)

    outcomes = await asyncio.gather(*(outcome(scan(f"device-{i:04d}"), _checked_in) for i in range(scans)))
    assert sorted(outcomes) == ["already"] * (scans - 1) + ["new"]
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.attendances WHERE meeting_id = :m",
                        m=meeting_id) == 1
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.checkin_scans WHERE meeting_id = :m",
                        m=meeting_id) == scans
    await rules_hold(committed_db, "MA-", now=START)


@pytest.mark.invariant("MA-INV-07", "MA-INV-13")
async def test_two_guests_on_one_device_at_once(committed_db, people, monkeypatch):
    manager = await people.make(roles=[Role.MEETING_MANAGER])
    meeting_id = await _meeting(committed_db, manager.id)
    _barrier(monkeypatch, 2)

    async def guest(name: str):
        async with committed_db.unit_of_work() as session:
            return await checkin.check_in_guest(
                session, meeting_id=meeting_id, guest=checkin.Guest.clean(name=name, email=f"{name}@example.com",
                                                                          phone=None, organization=None),
                mode="offline", device_id="one-browser", code=CODES.offline_code(meeting_id),
                now=START, client_address="192.0.2.1",
                codes=CODES)

    outcomes = await asyncio.gather(outcome(guest("ann"), _checked_in), outcome(guest("bob"), _checked_in))
    assert sorted(outcomes) == ["DEVICE_ALREADY_USED", "new"]
    # The loser's guest row was written with its attendance and rolled back with it: no personal data kept.
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.guests") == 1
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.checkin_scans "
                                      "WHERE outcome = 'REFUSED' AND reason = 'DEVICE_ALREADY_USED'") == 1
    await rules_hold(committed_db, "MA-", now=START)


@pytest.mark.invariant("MA-INV-06")
async def test_the_same_guest_from_two_devices_at_once_is_one_guest(committed_db, people, monkeypatch):
    manager = await people.make(roles=[Role.MEETING_MANAGER])
    meeting_id = await _meeting(committed_db, manager.id)
    _barrier(monkeypatch, 2)

    async def guest(device: str):
        async with committed_db.unit_of_work() as session:
            return await checkin.check_in_guest(
                session, meeting_id=meeting_id, guest=checkin.Guest.clean(name="Ann", email="ann@example.com",
                                                                          phone=None, organization=None),
                mode="offline", device_id=device, code=CODES.offline_code(meeting_id),
                now=START, client_address=None, codes=CODES)

    outcomes = await asyncio.gather(outcome(guest("laptop-0001"), _checked_in),
                                    outcome(guest("phone-00001"), _checked_in))
    assert sorted(outcomes) == ["already", "new"]
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.guests") == 1
    await rules_hold(committed_db, "MA-", now=START)


HOLD = 0.5  # seconds the cancel holds its lock before committing


async def _check_in_during_cancel(db: Database, meeting_id: str, manager_id, user_id) -> tuple[str, str]:
    """The cancel updates the meeting (taking its exclusive advisory lock through the trigger) and holds it; the
    check-in probes (sees ACTIVE: the cancel has not committed) and inserts while the cancel is in flight."""
    cancelled = asyncio.Event()

    async def cancel() -> None:
        async with db.unit_of_work() as session:
            await service.cancel_meeting(session, meeting_id=meeting_id, principal_id=manager_id, reason=None,
                                         now=START)
            cancelled.set()
            await asyncio.sleep(HOLD)

    async def scan():
        await asyncio.wait_for(cancelled.wait(), timeout=10)
        async with db.unit_of_work() as session:
            return await checkin.check_in_user(session, meeting_id=meeting_id, principal_id=user_id, mode="offline",
                                               device_id="device-0001", code=CODES.offline_code(meeting_id),
                                               now=START + timedelta(seconds=1), codes=CODES)

    results = await asyncio.gather(outcome(cancel(), _checked_in), outcome(scan(), _checked_in))
    return results[0], results[1]


@pytest.mark.invariant("MA-INV-08")
async def test_a_check_in_racing_a_cancel_never_lands_on_the_cancelled_meeting(committed_db, people):
    manager, user = await people.make(roles=[Role.MEETING_MANAGER]), await people.make()
    meeting_id = await _meeting(committed_db, manager.id, [user.id])
    cancel, scan = await _check_in_during_cancel(committed_db, meeting_id, manager.id, user.id)
    assert (cancel, scan) == ("ok", "MEETING_CANCELLED")
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.attendances") == 0
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.checkin_scans "
                                      "WHERE outcome = 'REFUSED' AND reason = 'MEETING_CANCELLED'") == 1
    await rules_hold(committed_db, "MA-", now=START)


NO_LOCK_TRIGGER = """
    CREATE OR REPLACE FUNCTION meeting_attendance.lock_meeting_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RETURN NEW; END $$"""


@pytest.mark.invariant("MA-INV-08")
async def test_without_the_advisory_lock_the_same_race_breaks_the_rule(committed_db, people, engine):
    """The control experiment: with the schedule trigger's exclusive lock removed, the check-in reads the meeting
    as ACTIVE and commits an attendance on a meeting cancelled before it — the detector reports it."""
    manager, user = await people.make(roles=[Role.MEETING_MANAGER]), await people.make()
    meeting_id = await _meeting(committed_db, manager.id, [user.id])
    async with engine.begin() as connection:
        original = (await connection.execute(text(
            "SELECT pg_get_functiondef('meeting_attendance.lock_meeting_schedule()'::regprocedure)"))).scalar_one()
        await connection.execute(text(NO_LOCK_TRIGGER))
    try:
        _, scan = await _check_in_during_cancel(committed_db, meeting_id, manager.id, user.id)
    finally:
        async with engine.begin() as connection:
            await connection.execute(text(original))
    assert scan == "new"
    with pytest.raises(AssertionError, match="MA-INV-08"):
        await rules_hold(committed_db, "MA-", now=START)


@pytest.mark.invariant("MA-INV-07")
async def test_two_users_on_one_device_at_once(committed_db, people, monkeypatch):
    manager = await people.make(roles=[Role.MEETING_MANAGER])
    users = [await people.make() for _ in range(2)]
    meeting_id = await _meeting(committed_db, manager.id, [u.id for u in users])
    _barrier(monkeypatch, 2)

    async def scan(user):
        async with committed_db.unit_of_work() as session:
            return await checkin.check_in_user(session, meeting_id=meeting_id, principal_id=user.id, mode="offline",
                                               device_id="shared-phone", code=CODES.offline_code(meeting_id),
                                               now=START, codes=CODES)

    outcomes = await asyncio.gather(*(outcome(scan(u), _checked_in) for u in users))
    assert sorted(outcomes) == ["DEVICE_ALREADY_USED", "new"]
    await rules_hold(committed_db, "MA-", now=START)


async def test_the_guest_rate_limit_holds_under_a_burst(committed_db, people, clock, tmp_path):
    """Twelve guests from one address at once against a limit of 5 per minute: exactly five get through."""
    app = create_app(test_settings(data_dir=tmp_path, guest_checkin_limit="5/minute"), database=committed_db,
                     clock=clock, run_background_tasks=False)
    manager = await UserFactory(app, committed_db, clock).make(roles=[Role.MEETING_MANAGER])
    meeting_id = await _meeting(committed_db, manager.id)
    clock.set(START)
    transport = httpx.ASGITransport(app=app, client=("198.51.100.9", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        responses = await asyncio.gather(*(client.post(
            f"/api/v1/meeting-attendance/public/meetings/{meeting_id}/check-in",
            json={"name": f"Guest {i}", "mode": "offline", "device_id": f"device-{i:04d}",
                  "code": CODES.offline_code(meeting_id)}) for i in range(12)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 5 + [429] * 7
    assert {r.json()["code"] for r in responses if r.status_code == 429} == {"GUEST_CHECKIN_LIMIT_REACHED"}
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.guests") == 5
    assert Rate.parse("5/minute").limit == 5


@pytest.mark.invariant("MA-INV-19", "MA-INV-04")
async def test_adding_an_attendee_while_the_account_is_deleted(committed_db, people):
    """Identity's deletion holds the account FOR UPDATE while its handler cleans future lists; adding the account
    share-locks it first. Either the addition waits and is refused (ACCOUNT_NOT_ACTIVE), or it commits first and
    the handler removes the row: never a deleted account on a future list."""
    from tenet.iam import service as iam_service
    from tenet.kernel.audit import Actor

    manager, person = await people.make(roles=[Role.MEETING_MANAGER]), await people.make()
    meeting_id = await _meeting(committed_db, manager.id)
    deleting = asyncio.Event()

    async def delete_account() -> None:
        async with committed_db.unit_of_work() as session:
            await iam_service.lock_account(session, person.id)
            deleting.set()
            await asyncio.sleep(0.3)
            await iam_service.delete_user(session, user_id=person.id, now=START - timedelta(days=1),
                                          actor=Actor.user(manager.id))

    async def add() -> None:
        await asyncio.wait_for(deleting.wait(), timeout=10)
        async with committed_db.unit_of_work() as session:
            await service.set_required_attendees(session, meeting_id=meeting_id, principal_id=manager.id,
                                                 user_ids=[person.id], expected_version=None,
                                                 now=START - timedelta(days=1))

    outcomes = await asyncio.gather(outcome(delete_account(), _checked_in), outcome(add(), _checked_in))
    assert outcomes == ["ok", "ACCOUNT_NOT_ACTIVE"]
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.meeting_required_attendees") == 0
    await rules_hold(committed_db, "MA-", now=START - timedelta(days=1))


async def test_two_retention_runs_at_once_erase_each_guest_once(committed_db, people):
    from tenet.meetings import retention

    manager = await people.make(roles=[Role.MEETING_MANAGER])
    meeting_id = await _meeting(committed_db, manager.id)
    for i in range(30):
        async with committed_db.unit_of_work() as session:
            await checkin.check_in_guest(
                session, meeting_id=meeting_id, guest=checkin.Guest.clean(name=f"G{i}", email=None, phone=None,
                                                                          organization=None),
                mode="offline", device_id=f"device-{i:04d}", code=CODES.offline_code(meeting_id),
                now=START, client_address=None, codes=CODES)
    later = START + timedelta(days=200)

    async def run() -> int:
        async with committed_db.unit_of_work() as session:
            return await retention.erase_guest_data(session, now=later, retention_days=90, limit=20)

    counts = await asyncio.gather(run(), run())
    assert sorted(counts) == [10, 20]  # SKIP LOCKED: disjoint batches, no waiting
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.guests WHERE erased_at IS NULL") == 0
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.audit_logs "
                                      "WHERE action = 'GUEST_DATA_ERASED'") == 2
