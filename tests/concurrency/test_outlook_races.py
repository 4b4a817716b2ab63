"""Outlook sync races on real parallel connections: two managers binding the same Outlook event at the same moment.
Both pass the friendly pre-check (neither sees the other's uncommitted row); the partial unique index decides, and
the loser gets the same stable code as a later request would (MA-INV-30). Takeover racing a release of the same
binding: the binding's row lock orders them, exactly one succeeds. A binding's sync of the old source racing a
takeover (Graph held mid-read): it stops and writes nothing after it (MA-INV-35)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import text

from tenet.kernel.errors import DomainError
from tenet.kernel.settings import section
from tenet.meetings import audit
from tenet.meetings.outlook import apply, bindings, sync
from tenet.meetings.outlook import graph as graph_client
from tenet.meetings.outlook.policy import DEFAULT_POLICY
from tenet.meetings.service import MeetingPolicy
from tenet.meetings.settings import MeetingSettings
from tests.meetings.outlook.conftest import graph_settings
from tests.meetings.test_bypass import _user
from tests.support.invariants import rules_hold

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


async def _pool(db) -> dict:
    user = await _user(db)
    mailbox, other = uuid.uuid4(), uuid.uuid4()
    async with db.unit_of_work() as session:
        for box, address in ((mailbox, "room@contoso.com"), (other, "assistant@contoso.com")):
            await session.execute(text(
                "INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, state, created_by_id, "
                "created_at, updated_at) VALUES (:id, :a, 'SHARED', 'OK', :u, :t, :t)"),
                {"id": box, "a": address, "u": user, "t": NOW})
            await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_ADDED,
                               resource=audit.Resource.OUTLOOK_MAILBOX, resource_id=box, now=NOW, actor=None)
            # Both mailboxes hold a copy of one meeting: the same iCalUId (a takeover naming only the mailbox
            # finds the new one's copy by it).
            await session.execute(text(
                "INSERT INTO meeting_attendance.outlook_candidates (mailbox_id, graph_event_id, type, subject, "
                "start_at, end_at, ical_uid, last_seen_at) "
                "VALUES (:m, 'AAMk-series', 'seriesMaster', 'Weekly', :t, :t, 'UID-weekly', :t)"),
                {"m": box, "t": NOW})
    return {"user": user, "mailbox": mailbox, "other": other}


async def _attempt(db, command, **kwargs):
    try:
        async with db.unit_of_work() as session:
            row = await command(session, now=NOW, **kwargs)
            return ("won", row.id)
    except DomainError as error:
        return ("lost", str(error.code))


@pytest.mark.invariant("MA-INV-30")
async def test_two_bindings_of_one_event_at_once_have_one_winner(committed_db):
    pool = await _pool(committed_db)
    outcomes = await asyncio.gather(*(
        _attempt(committed_db, bindings.create_binding, principal_id=pool["user"], mailbox_id=pool["mailbox"],
                 graph_event_id="AAMk-series", sync_from=None) for _ in range(2)))
    assert sorted(o[0] for o in outcomes) == ["lost", "won"]
    assert [o[1] for o in outcomes if o[0] == "lost"] == ["OUTLOOK_EVENT_ALREADY_BOUND"]
    await rules_hold(committed_db, "MA-")


async def test_a_takeover_racing_a_release_is_ordered_by_the_binding_lock(committed_db):
    pool = await _pool(committed_db)
    async with committed_db.unit_of_work() as session:
        made = await bindings.create_binding(session, principal_id=pool["user"], mailbox_id=pool["mailbox"],
                                             graph_event_id="AAMk-series", sync_from=None, now=NOW)
    outcomes = await asyncio.gather(
        _attempt(committed_db, bindings.take_over, principal_id=pool["user"], binding_id=made.id,
                 mailbox_id=pool["other"], graph_event_id=None, sync_from=None),
        _attempt(committed_db, bindings.release, principal_id=pool["user"], binding_id=made.id))
    results = sorted(o[0] for o in outcomes)
    # Either order is legal: a takeover then a release both win; a release first makes the takeover lose.
    assert results in (["won", "won"], ["lost", "won"])
    assert [o[1] for o in outcomes if o[0] == "lost"] in ([], ["OUTLOOK_BINDING_RELEASED"])
    async with committed_db.read_only() as session:
        status = (await session.execute(text("SELECT status FROM meeting_attendance.outlook_bindings"))).scalar_one()
    assert status == "RELEASED"
    await rules_hold(committed_db, "MA-")


@pytest.mark.invariant("MA-INV-30")
async def test_a_takeover_onto_an_event_bound_meanwhile_is_refused_with_the_stable_code(committed_db, monkeypatch):
    """A takeover naming the new mailbox's copy of the event, and a new binding of that copy, both pass the friendly
    pre-check; the binding commits first, so the takeover's UPDATE is the one the partial unique index refuses, and
    it answers the same 409 a later request would (it was an unmapped IntegrityError, a 500)."""
    pool = await _pool(committed_db)
    async with committed_db.unit_of_work() as session:
        made = await bindings.create_binding(session, principal_id=pool["user"], mailbox_id=pool["mailbox"],
                                             graph_event_id="AAMk-series", sync_from=None, now=NOW)
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_candidates (mailbox_id, graph_event_id, type, subject, "
            "start_at, end_at, last_seen_at) VALUES (:m, 'AAMk-copy', 'seriesMaster', 'Weekly', :t, :t, :t)"),
            {"m": pool["other"], "t": NOW})
    pre_check = bindings._already_bound

    async def after_a_pause(session, graph_event_id, *, other_than=None):
        await pre_check(session, graph_event_id, other_than=other_than)
        await asyncio.sleep(0.6 if other_than is not None else 0.2)  # the takeover writes last

    monkeypatch.setattr(bindings, "_already_bound", after_a_pause)
    takeover, binding = await asyncio.gather(
        _attempt(committed_db, bindings.take_over, principal_id=pool["user"], binding_id=made.id,
                 mailbox_id=pool["other"], graph_event_id="AAMk-copy", sync_from=None),
        _attempt(committed_db, bindings.create_binding, principal_id=pool["user"], mailbox_id=pool["other"],
                 graph_event_id="AAMk-copy", sync_from=None))
    assert binding[0] == "won"
    assert takeover == ("lost", "OUTLOOK_EVENT_ALREADY_BOUND")
    await rules_hold(committed_db, "MA-")


async def _mailbox_on(db, graph, user, address):
    """A mailbox row on the emulator (state OK) with its weekly series as a candidate."""
    box = graph.add_mailbox(address)
    master = box.create_series("Weekly", "2026-03-02T09:00", "2026-03-02T10:00",
                               pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                               until=date(2026, 4, 27))
    mailbox_id = uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, graph_user_id, state, created_by_id, "
            "created_at, updated_at) VALUES (:id, :a, 'SHARED', :g, 'OK', :u, :t, :t)"),
            {"id": mailbox_id, "a": address, "g": box.id, "u": user, "t": NOW})
        await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_ADDED,
                           resource=audit.Resource.OUTLOOK_MAILBOX, resource_id=mailbox_id, now=NOW, actor=None)
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_candidates (mailbox_id, graph_event_id, type, subject, "
            "start_at, end_at, last_seen_at) VALUES (:m, :e, 'seriesMaster', 'Weekly', :t, :t, :t)"),
            {"m": mailbox_id, "e": box.id_of(master), "t": NOW})
    return box, master, mailbox_id


async def _mirrored(db):
    """(title, mailbox) of the linked meetings, and the series' title."""
    async with db.read_only() as session:
        titles = (await session.execute(text(
            "SELECT DISTINCT m.title, l.mailbox_id FROM meeting_attendance.outlook_event_links l "
            "JOIN meeting_attendance.meetings m ON m.id = l.meeting_id"))).all()
        series_title = (await session.execute(text(
            "SELECT title FROM meeting_attendance.meeting_series"))).scalar_one()
    return [(t.title, t.mailbox_id) for t in titles], series_title


@pytest.mark.invariant("MA-INV-35")
async def test_a_sync_of_the_old_source_racing_a_takeover_stops_and_writes_nothing_after_it(
        committed_db, graph, tmp_path):
    """The binding's sync reads Graph (held at /instances) while a takeover commits on another connection: its next
    unit of work reads the binding FOR SHARE, sees the new source and stops, counted `superseded`; no meeting of
    the old source's reading is written after the takeover."""
    user = await _user(committed_db)
    box, master, old = await _mailbox_on(committed_db, graph, user, "room@contoso.com")
    other_box, other_master, new = await _mailbox_on(committed_db, graph, user, "assistant@contoso.com")
    async with committed_db.unit_of_work() as session:
        made = await bindings.create_binding(session, principal_id=user, mailbox_id=old,
                                             graph_event_id=box.id_of(master), sync_from=None, now=NOW)
    outlook = section(graph_settings(graph, tmp_path), MeetingSettings)
    async with graph_client.client_for(outlook, max_concurrent=4, max_attempts=2, retry_base_seconds=1) as client:
        binder = apply.BindingSync(committed_db, client, rules=DEFAULT_POLICY, default_zone="America/Los_Angeles",
                                   meeting_policy=MeetingPolicy(), span=sync.window(NOW, DEFAULT_POLICY))
        first = apply.new_counts()
        await binder.run(made.id, now=NOW, counts=first)
        assert first["created"] == 9
        box.update_event(master, subject="Weekly, renamed by the old source")
        held = graph.hold(route="instances", mailbox=box)
        counts = apply.new_counts()
        racing = asyncio.create_task(binder.run(made.id, now=NOW, counts=counts))
        await graph.wait_in_flight(box, 1)
        async with committed_db.unit_of_work() as session:
            await bindings.take_over(session, principal_id=user, binding_id=made.id, mailbox_id=new,
                                     graph_event_id=other_box.id_of(other_master), sync_from=None, now=NOW)
        held.release()
        await racing
        assert counts["superseded"] >= 1 and counts["updated"] == 0 and counts["created"] == 0, counts
        assert await _mirrored(committed_db) == ([("Weekly", old)], "Weekly")  # nothing written after the takeover
        # The new source's sync then writes: the same meetings (matched by original start), its ids and mailbox.
        after = apply.new_counts()
        await binder.run(made.id, now=NOW, counts=after)
    assert after["created"] == 0 and after["superseded"] == 0 and after["cancelled"] == 0, after
    assert await _mirrored(committed_db) == ([("Weekly", new)], "Weekly")
    assert graph.writes_to_events() == [] and graph.requests_without_immutable_id() == []
    await rules_hold(committed_db, "MA-")
