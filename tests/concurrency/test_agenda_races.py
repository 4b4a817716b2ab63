"""Agenda races on real parallel connections (issue 11 "Tests"): two assignees uploading at once, one assignee
uploading twice at once (the second falls through and is accepted unflipped), delete-item racing an upload in both
orders (and the control without the parent trigger), two reorders and a delete at once, cancel racing the auto-flip.
Every MA rule holds afterwards."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.iam.permissions import Role
from tenet.iam.principal import Principal
from tenet.meetings import service as meetings_service
from tenet.meetings.agenda import attachments, service
from tenet.meetings.permissions import POINTS
from tests.support.invariants import rules_hold
from tests.support.outcomes import outcome
from tests.support.rows import scalar
from tests.support.users import UserFactory

START = datetime(2026, 3, 2, 17, 0, tzinfo=UTC)
NOW = START - timedelta(days=1)
HOLD = 0.4  # seconds the first transaction holds its locks before committing


def _answered(result):
    """What a command that answers something (an upload's attachment) came to; "ok" for None."""
    return "ok" if result is None else result


def principal(user_id: uuid.UUID, role: str) -> Principal:
    return Principal(kind="user", id=user_id, roles=frozenset({role}),
                     permissions=frozenset(p.name for p in POINTS if role in p.granted_to))


async def _agenda(db: Database, people: UserFactory, attendees: int = 2):
    manager = await people.make(roles=[Role.MEETING_MANAGER])
    others = [await people.make() for _ in range(attendees)]
    boss = principal(manager.id, "MeetingManager")
    async with db.unit_of_work() as session:
        meeting, _ = await meetings_service.create_meeting(
            session, principal_id=manager.id, fields={"title": "Race", "start_time": START,
                                                  "end_time": START + timedelta(hours=1)},
            attendee_ids=[o.id for o in others], template_id=None, policy=meetings_service.MeetingPolicy(), now=NOW)
        section = await service.create_section(session, meeting_id=meeting.id, title="S", principal=boss, now=NOW)
        item = await service.create_item(session, section_id=section.id, fields={"title": "I"}, principal=boss,
                                         now=NOW)
    return boss, [principal(o.id, "Employee") for o in others], meeting.id, section.id, item.id


def stored() -> attachments.StoredFile:
    attachment_id = uuid.uuid4()
    return attachments.StoredFile(attachment_id=attachment_id, key=f"agenda-item/2026/03/{attachment_id}",
                                  filename="slides.pdf", mime_type="application/pdf", size=10, sha256="0" * 64)


async def _assign(db: Database, boss: Principal, item_id, *who: Principal) -> list[uuid.UUID]:
    async with db.unit_of_work() as session:
        tasks = await service.assign_tasks(session, item_id=item_id, assignee_ids=[w.id for w in who], due_at=None,
                                           principal=boss, now=NOW)
    return [t.id for t in tasks]


@pytest.mark.invariant("MA-INV-25")
async def test_two_assignees_uploading_at_once_flip_their_own_tasks(committed_db, people):
    boss, (alice, bob), _, _, item_id = await _agenda(committed_db, people)
    tasks = await _assign(committed_db, boss, item_id, alice, bob)
    barrier = asyncio.Barrier(2)

    async def upload(who: Principal):
        async with committed_db.unit_of_work() as session:
            await barrier.wait()
            _, flipped = await attachments.record_item_attachment(session, item_id=item_id, stored=stored(),
                                                                  principal=who, now=NOW)
            return flipped

    flipped = await asyncio.gather(upload(alice), upload(bob))
    assert set(flipped) == set(tasks)
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_upload_tasks "
                                      "WHERE status = 'UPLOADED'") == 2
    await rules_hold(committed_db, "MA-", now=NOW)


@pytest.mark.invariant("MA-INV-25")
async def test_one_assignee_uploading_twice_at_once_flips_once_and_the_other_falls_through(committed_db, people):
    boss, (alice, _), _, _, item_id = await _agenda(committed_db, people)
    [task] = await _assign(committed_db, boss, item_id, alice)
    flipped_first = asyncio.Event()

    async def first():
        async with committed_db.unit_of_work() as session:
            _, flipped = await attachments.record_item_attachment(session, item_id=item_id, stored=stored(),
                                                                  principal=alice, now=NOW, candidate=task)
            flipped_first.set()
            await asyncio.sleep(HOLD)
            return flipped

    async def second():
        # Both read the same PENDING task before either wrote (the route's pre-check gives it as the candidate).
        await asyncio.wait_for(flipped_first.wait(), timeout=10)
        async with committed_db.unit_of_work() as session:
            _, flipped = await attachments.record_item_attachment(session, item_id=item_id, stored=stored(),
                                                                  principal=alice, now=NOW + timedelta(seconds=1),
                                                                  candidate=task)
            return flipped

    results = await asyncio.gather(first(), second())
    assert results == [task, None]
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments "
                                      "WHERE deleted_at IS NULL") == 2
    await rules_hold(committed_db, "MA-", now=NOW + timedelta(seconds=1))


async def _delete_item_vs_upload(db: Database, people, *, delete_first: bool) -> tuple[str, str]:
    boss, (alice, _), _, _, item_id = await _agenda(db, people)
    await _assign(db, boss, item_id, alice)
    started = asyncio.Event()

    async def delete():
        if not delete_first:
            await asyncio.wait_for(started.wait(), timeout=10)
        async with db.unit_of_work() as session:
            await service.delete_item(session, item_id=item_id, principal=boss, now=NOW)
            if delete_first:
                started.set()
                await asyncio.sleep(HOLD)

    async def upload():
        if delete_first:
            await asyncio.wait_for(started.wait(), timeout=10)
        async with db.unit_of_work() as session:
            # Its check reads the item as live (the deletion has not committed); the insert trigger decides.
            await attachments.record_item_attachment(session, item_id=item_id, stored=stored(), principal=alice,
                                                     now=NOW)
            if not delete_first:
                started.set()
                await asyncio.sleep(HOLD)

    outcomes = await asyncio.gather(outcome(delete(), _answered), outcome(upload(), _answered))
    return outcomes[0], outcomes[1]


@pytest.mark.invariant("MA-INV-22")
@pytest.mark.parametrize("delete_first", [True, False])
async def test_delete_item_racing_an_upload_leaves_no_live_attachment_under_it(committed_db, people, delete_first):
    deleted, uploaded = await _delete_item_vs_upload(committed_db, people, delete_first=delete_first)
    assert deleted == "ok"
    assert uploaded == ("AGENDA_ITEM_NOT_FOUND" if delete_first else "ok")
    assert await scalar(committed_db, "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments "
                                      "WHERE deleted_at IS NULL") == 0
    await rules_hold(committed_db, "MA-", now=NOW)


NO_PARENT_CHECK = """
    CREATE OR REPLACE FUNCTION meeting_attendance.meeting_agenda_item_attachments_parent_live() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"""


@pytest.mark.invariant("MA-INV-22")
async def test_without_the_parent_trigger_the_same_race_breaks_the_rule(committed_db, people, engine):
    """The control: with the trigger's FOR SHARE read of the item removed, the upload commits under the item
    deleted before it, and the detector reports it."""
    async with engine.begin() as connection:
        original = (await connection.execute(text(
            "SELECT pg_get_functiondef('meeting_attendance.meeting_agenda_item_attachments_parent_live()'"
            "::regprocedure)"))).scalar_one()
        await connection.execute(text(NO_PARENT_CHECK))
    try:
        _, uploaded = await _delete_item_vs_upload(committed_db, people, delete_first=True)
    finally:
        async with engine.begin() as connection:
            await connection.execute(text(original))
    assert uploaded == "ok"
    with pytest.raises(AssertionError, match="MA-INV-22"):
        await rules_hold(committed_db, "MA-", now=NOW)


@pytest.mark.invariant("MA-INV-21")
async def test_two_reorders_and_a_delete_at_once_keep_a_dense_order(committed_db, people):
    boss, _, meeting_id, first, _ = await _agenda(committed_db, people, attendees=0)
    async with committed_db.unit_of_work() as session:
        ids = [first] + [(await service.create_section(session, meeting_id=meeting_id, title=t, principal=boss,
                                                       now=NOW)).id for t in "BCD"]
    barrier = asyncio.Barrier(3)

    async def reorder(order):
        await barrier.wait()
        async with committed_db.unit_of_work() as session:
            await service.reorder_sections(session, meeting_id=meeting_id, ids=order, principal=boss, now=NOW)

    async def delete():
        await barrier.wait()
        async with committed_db.unit_of_work() as session:
            await service.delete_section(session, section_id=ids[1], principal=boss, now=NOW)

    outcomes = await asyncio.gather(outcome(reorder(list(reversed(ids))), _answered),
                                    outcome(reorder(ids[1:] + ids[:1]), _answered), outcome(delete(), _answered))
    assert outcomes[2] == "ok"
    assert set(outcomes[:2]) <= {"ok", "AGENDA_ORDER_MISMATCH"}
    rows = await scalar(committed_db, "SELECT string_agg(sort_order::text, ',' ORDER BY sort_order) FROM "
                                      "meeting_attendance.meeting_agenda_sections WHERE deleted_at IS NULL")
    assert rows == "0,1,2"
    await rules_hold(committed_db, "MA-", now=NOW)


@pytest.mark.invariant("MA-INV-24", "MA-INV-25")
async def test_cancel_racing_the_auto_flip_ends_in_exactly_one_terminal_state(committed_db, people):
    boss, (alice, _), _, _, item_id = await _agenda(committed_db, people)
    [task] = await _assign(committed_db, boss, item_id, alice)
    barrier = asyncio.Barrier(2)

    async def cancel():
        async with committed_db.unit_of_work() as session:
            await barrier.wait()
            await service.cancel_task(session, task_id=task, principal=boss, now=NOW)

    async def upload():
        async with committed_db.unit_of_work() as session:
            await barrier.wait()
            _, flipped = await attachments.record_item_attachment(session, item_id=item_id, stored=stored(),
                                                                  principal=alice, now=NOW, candidate=task)
            return "flipped" if flipped else "unflipped"

    outcomes = await asyncio.gather(outcome(cancel(), _answered), outcome(upload(), _answered))
    status = await scalar(committed_db, "SELECT status FROM meeting_attendance.meeting_agenda_item_upload_tasks")
    assert (outcomes, status) in ((["ok", "unflipped"], "CANCELLED"), (["UPLOAD_TASK_NOT_PENDING", "flipped"],
                                                                       "UPLOADED"))
    await rules_hold(committed_db, "MA-", now=NOW)
