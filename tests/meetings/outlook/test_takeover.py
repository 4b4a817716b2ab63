"""The takeover of a binding onto another mailbox (issue 17, the outside audit's first finding), end to end through
the routes, the worker and the Graph emulator.

Each mailbox's copy of one meeting has its own ImmutableId, so a takeover that kept the old mailbox's id made the
new source's GET answer 404 and the sync cancelled every meeting of the binding ("Cancelled in Outlook"). The copies
share Graph's `iCalUId` (the same in every calendar for a single event or a series master): a takeover that names
only the mailbox finds the new mailbox's copy by it, in that mailbox's candidate pool, of the same kind; without one
it is refused (409 `OUTLOOK_TAKEOVER_COPY_NOT_FOUND`, nothing changed), and so is a mailbox Tenet cannot read (409
`OUTLOOK_MAILBOX_NOT_READABLE`). The sync itself never cancels because an id is unknown in its mailbox."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import text

from tenet.iam.permissions import Role
from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

WEEKLY = {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]}
MONDAYS = 9  # 2026-03-02 .. 2026-04-27


async def _rows(db, sql, **params):
    async with db.read_only() as session:
        return [dict(r) for r in (await session.execute(text(sql), params)).mappings().all()]


async def _source(ma, manager, graph, job_runtime, address, *, denied=False):
    box = graph.add_mailbox(address)
    box.denied = denied
    response = await ma.call("POST", "/outlook/mailboxes", manager, json={"address": address})
    assert response.status_code == 201, response.text
    mailbox = response.json()
    if not denied:
        await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox["id"])
    return box, mailbox


async def _sync(job_runtime, binding):
    return await run_now(tasks.outlook_sync_binding, job_runtime, binding_id=binding["id"],
                         mailbox_id=binding["mailbox_id"])


async def _meetings(db, binding):
    return await _rows(db, """
        SELECT m.title, m.status, l.mailbox_id, l.graph_event_id
          FROM meeting_attendance.outlook_event_links l JOIN meeting_attendance.meetings m ON m.id = l.meeting_id
         WHERE l.binding_id = :b ORDER BY l.original_start""", b=binding["id"])


@pytest.fixture
async def bound(ma, manager, graph, job_runtime):
    """A weekly series organised in mailbox B, bound there and synced: nine ACTIVE meetings."""
    organizer, b = await _source(ma, manager, graph, job_runtime, "organizer@contoso.com")
    master = organizer.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00", pattern=WEEKLY,
                                     until=date(2026, 4, 27))
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=b["id"])
    response = await ma.call("POST", "/outlook/bindings", manager,
                             json={"graph_event_id": organizer.id_of(master), "mailbox_id": b["id"]})
    assert response.status_code == 201, response.text
    binding = response.json()
    assert (await _sync(job_runtime, binding))["created"] == MONDAYS
    return {"box": organizer, "mailbox": b, "master": master, "binding": binding}


async def test_a_takeover_naming_only_the_mailbox_finds_its_copy_by_ical_uid_and_keeps_the_meetings(
        ma, manager, users, tenet_on_graph, bound, db, job_runtime):
    """The audit's reproduction: bound in B, taken over with `{mailbox_id: A}` alone. A also holds a look-alike (same
    subject, kind and times, another meeting): the match is the iCalUId, not the look."""
    graph = tenet_on_graph
    assistant = graph.add_mailbox("assistant@contoso.com")
    copy = assistant.copy_event(bound["master"])
    assistant.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00", pattern=WEEKLY,
                            until=date(2026, 4, 27))
    a = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "assistant@contoso.com"})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=a["id"])
    [pooled] = await _rows(db, "SELECT ical_uid FROM meeting_attendance.outlook_candidates "
                               "WHERE mailbox_id = :m AND graph_event_id = :e", m=a["id"], e=assistant.id_of(copy))
    assert pooled["ical_uid"] == bound["master"].ical_uid
    admin = await users.make(roles=[Role.ADMINISTRATOR])
    ma.clock.advance(timedelta(hours=1))
    response = await ma.call("POST", f"/outlook/bindings/{bound['binding']['id']}/takeover", admin,
                             json={"mailbox_id": a["id"]})
    assert response.status_code == 200, response.text
    taken = response.json()
    assert taken["mailbox_id"] == a["id"] and taken["graph_event_id"] == assistant.id_of(copy)
    counts = await _sync(job_runtime, taken)
    assert counts["cancelled"] == 0 and counts["created"] == 0, counts
    meetings = await _meetings(db, taken)
    assert len(meetings) == MONDAYS and {m["status"] for m in meetings} == {"ACTIVE"}
    assert {str(m["mailbox_id"]) for m in meetings} == {a["id"]}
    # And they keep syncing from the new source.
    assistant.update_event(copy, subject="Weekly sync, from the assistant")
    assert (await _sync(job_runtime, taken))["updated"] == MONDAYS
    assert {m["title"] for m in await _meetings(db, taken)} == {"Weekly sync, from the assistant"}
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_takeover_onto_a_mailbox_without_a_copy_is_refused_and_changes_nothing(
        ma, manager, tenet_on_graph, bound, db, job_runtime):
    graph = tenet_on_graph
    assistant, a = await _source(ma, manager, graph, job_runtime, "assistant@contoso.com")
    look_alike = assistant.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00", pattern=WEEKLY,
                                         until=date(2026, 4, 27))
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=a["id"])
    path = f"/outlook/bindings/{bound['binding']['id']}"
    before = (await ma.call("GET", path, manager)).json()
    response = await ma.call("POST", path + "/takeover", manager, json={"mailbox_id": a["id"]})
    assert response.status_code == 409 and code(response) == "OUTLOOK_TAKEOVER_COPY_NOT_FOUND", response.text
    assert "graph_event_id" in response.json()["detail"]
    assert (await ma.call("GET", path, manager)).json() == before
    # A pool read before iCalUIds were kept (NULL) cannot match either: the same refusal, never a guess.
    async with db.unit_of_work() as session:
        await session.execute(text("UPDATE meeting_attendance.outlook_candidates SET ical_uid = NULL"))
    assistant.copy_event(bound["master"])
    refused = await ma.call("POST", path + "/takeover", manager, json={"mailbox_id": a["id"]})
    assert refused.status_code == 409 and code(refused) == "OUTLOOK_TAKEOVER_COPY_NOT_FOUND"
    # Naming the event is still possible, and it must be in the new mailbox's pool.
    elsewhere = await ma.call("POST", path + "/takeover", manager,
                              json={"mailbox_id": a["id"], "graph_event_id": bound["box"].id_of(bound["master"])})
    assert elsewhere.status_code == 404 and code(elsewhere) == "OUTLOOK_CANDIDATE_NOT_FOUND"
    assert (await ma.call("GET", path, manager)).json() == before
    named = await ma.call("POST", path + "/takeover", manager,
                          json={"mailbox_id": a["id"], "graph_event_id": assistant.id_of(look_alike)})
    assert named.status_code == 200 and named.json()["graph_event_id"] == assistant.id_of(look_alike)
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_takeover_onto_a_mailbox_tenet_cannot_read_is_refused(ma, manager, tenet_on_graph, bound, db,
                                                                      job_runtime):
    graph = tenet_on_graph
    _, denied = await _source(ma, manager, graph, job_runtime, "denied@contoso.com", denied=True)
    assert denied["state"] == "ACCESS_DENIED"
    path = f"/outlook/bindings/{bound['binding']['id']}"
    before = (await ma.call("GET", path, manager)).json()
    for body in ({"mailbox_id": denied["id"]},
                 {"mailbox_id": denied["id"], "graph_event_id": bound["box"].id_of(bound["master"])}):
        response = await ma.call("POST", path + "/takeover", manager, json=body)
        assert response.status_code == 409 and code(response) == "OUTLOOK_MAILBOX_NOT_READABLE", response.text
        assert response.json()["current_state"] == "ACCESS_DENIED"
    assert (await ma.call("GET", path, manager)).json() == before
    assert {m["status"] for m in await _meetings(db, bound["binding"])} == {"ACTIVE"}
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_sync_never_cancels_because_its_event_id_is_unknown_in_its_mailbox(
        ma, manager, tenet_on_graph, bound, db, job_runtime):
    """A binding left pointing at another mailbox's id (as the defect left some): the 404 of an id that mailbox's pool
    never held is not a deletion. Nothing is cancelled; the run counts it skipped."""
    graph = tenet_on_graph
    _, a = await _source(ma, manager, graph, job_runtime, "assistant@contoso.com")
    async with db.unit_of_work() as session:
        await session.execute(text("UPDATE meeting_attendance.outlook_bindings SET mailbox_id = :m WHERE id = :b"),
                              {"m": a["id"], "b": bound["binding"]["id"]})
    counts = await _sync(job_runtime, {**bound["binding"], "mailbox_id": a["id"]})
    assert counts["cancelled"] == 0 and counts["skipped"] >= 1, counts
    assert {m["status"] for m in await _meetings(db, bound["binding"])} == {"ACTIVE"}
    # A real deletion in the binding's own mailbox still cancels.
    async with db.unit_of_work() as session:
        await session.execute(text("UPDATE meeting_attendance.outlook_bindings SET mailbox_id = :m WHERE id = :b"),
                              {"m": bound["mailbox"]["id"], "b": bound["binding"]["id"]})
    bound["box"].delete_event(bound["master"])
    assert (await _sync(job_runtime, bound["binding"]))["cancelled"] == MONDAYS
    assert_read_only(graph)


async def test_after_a_takeover_an_unmatched_occurrence_is_confirmed_in_the_mailbox_its_id_belongs_to(
        ma, manager, tenet_on_graph, bound, db, job_runtime):
    """The new source's /instances lacks two occurrences whose links still hold the old source's ids: the one deleted
    in the old source too (its 404 there) is cancelled; the one the old source still has is left as it is: the new
    mailbox answering 404 for the old mailbox's id proves nothing."""
    graph = tenet_on_graph
    assistant = graph.add_mailbox("assistant@contoso.com")
    copy = assistant.copy_event(bound["master"])
    a = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "assistant@contoso.com"})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=a["id"])
    taken = (await ma.call("POST", f"/outlook/bindings/{bound['binding']['id']}/takeover", manager,
                           json={"mailbox_id": a["id"]})).json()
    first, second = datetime(2026, 3, 9, 16, tzinfo=UTC), datetime(2026, 3, 16, 16, tzinfo=UTC)  # 09:00 PDT
    for box, master in ((assistant, copy), (bound["box"], bound["master"])):
        box.delete_occurrence(master, first)  # deleted by its organizer: gone from every copy
    assistant.delete_occurrence(copy, second)  # gone from the new source's copy only
    counts = await _sync(job_runtime, taken)
    assert counts["cancelled"] == 1 and counts["skipped"] == 1, counts
    meetings = await _meetings(db, taken)
    assert [m["status"] for m in meetings].count("CANCELLED") == 1 and len(meetings) == MONDAYS
    assert_read_only(graph)
