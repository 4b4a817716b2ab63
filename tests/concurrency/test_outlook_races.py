"""Outlook sync races on real parallel connections: two managers binding the same Outlook event at the same moment.
Both pass the friendly pre-check (neither sees the other's uncommitted row); the partial unique index decides, and
the loser gets the same stable code as a later request would (MA-INV-30). Takeover racing a release of the same
binding: the binding's row lock orders them, exactly one succeeds."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from tenet.kernel.errors import DomainError
from tenet.meetings import audit
from tenet.meetings.outlook import bindings
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
            await session.execute(text(
                "INSERT INTO meeting_attendance.outlook_candidates (mailbox_id, graph_event_id, type, subject, "
                "start_at, end_at, last_seen_at) VALUES (:m, 'AAMk-series', 'seriesMaster', 'Weekly', :t, :t, :t)"),
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
