"""Bound events becoming meetings (issue 17, spec layers 2-4), end to end: routes bind candidates, the worker's job
functions (outlook_sync_binding, delta rounds, notifications, reconciliation) read the Graph emulator and write
meetings through the meetings services. A series is mirrored from Graph's /instances (one meeting per occurrence,
keyed by original start: MA-INV-34), a weekly 09:00 Los Angeles series stays 09:00 local across the March change,
exclusions (MA-INV-33) and sync_from (MA-INV-32) are respected, a silent deletion is found by comparing /instances,
an `@removed` is confirmed by a GET before anything is cancelled. Every test ends with the emulator's log: no write
to a mailbox (MA-INV-38) and ImmutableId on every request."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import reconcile, tasks
from tenet.meetings.outlook.policy import DEFAULT_POLICY
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

LA = ZoneInfo("America/Los_Angeles")
WEEKLY = {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]}
MONDAYS = 14  # 2026-03-02 .. 2026-06-01


async def _rows(db, sql, **params):
    async with db.read_only() as session:
        return [dict(r) for r in (await session.execute(text(sql), params)).mappings().all()]


async def _world(ma, manager, graph, job_runtime, *, attendees=()):
    box = graph.add_mailbox("room@contoso.com")
    people = [{"address": a} for a in attendees]
    single = box.create_event("Board", "2026-01-12T09:00", "2026-01-12T10:00", location="Room 1",
                              body="Quarterly <b>board</b> review", attendees=people)
    gone = box.create_event("Retro", "2026-01-14T09:00", "2026-01-14T10:00")
    series = box.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00", pattern=WEEKLY,
                               until=date(2026, 6, 1), attendees=people)
    mailbox = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox["id"])
    return {"box": box, "mailbox": mailbox, "single": single, "gone": gone, "series": series,
            "ids": {"single": box.id_of(single), "gone": box.id_of(gone), "series": box.id_of(series)}}


@pytest.fixture
async def world(ma, manager, graph, job_runtime):
    return await _world(ma, manager, graph, job_runtime)


async def _bind(ma, manager, world, event="series", **extra):
    response = await ma.call("POST", "/outlook/bindings", manager, json={
        "graph_event_id": world["ids"][event], "mailbox_id": world["mailbox"]["id"], **extra})
    assert response.status_code == 201, response.text
    return response.json()


async def _sync(job_runtime, binding):
    return await run_now(tasks.outlook_sync_binding, job_runtime, binding_id=binding["id"],
                         mailbox_id=binding["mailbox_id"])


async def _meetings(db, binding):
    return await _rows(db, """
        SELECT m.id, m.title, m.description, m.location, m.start_time, m.end_time, m.timezone, m.status,
               m.series_id, m.series_occurrence_date, m.is_exception, m.cancel_reason, l.original_start, l.mailbox_id
          FROM meeting_attendance.outlook_event_links l JOIN meeting_attendance.meetings m ON m.id = l.meeting_id
         WHERE l.binding_id = :b ORDER BY l.original_start""", b=binding["id"])


async def _binding(ma, manager, binding):
    return (await ma.call("GET", f"/outlook/bindings/{binding['id']}", manager)).json()


@pytest.mark.invariant("MA-INV-34")
async def test_a_bound_series_becomes_a_series_of_meetings_and_follows_its_master(
        ma, manager, tenet_on_graph, db, job_runtime):
    graph = tenet_on_graph
    world = await _world(ma, manager, graph, job_runtime)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    binding = await _bind(ma, manager, world)
    queued = await _rows(db, "SELECT args FROM procrastinate_jobs WHERE task_name = 'meetings:outlook_sync_binding'")
    assert [q["args"] for q in queued] == [{"binding_id": binding["id"], "mailbox_id": binding["mailbox_id"]}]
    result = await _sync(job_runtime, binding)
    assert result["created"] == MONDAYS and result["updated"] == 0, result
    after = await _binding(ma, manager, binding)
    assert after["status"] == "ACTIVE" and after["series_id"] and after["linked_meetings"] == MONDAYS
    [series] = await _rows(db, "SELECT * FROM meeting_attendance.meeting_series WHERE id = :s", s=after["series_id"])
    assert series["rrule"] == "FREQ=WEEKLY;BYDAY=MO;UNTIL=20260601" and series["timezone"] == "America/Los_Angeles"
    first = await _meetings(db, binding)
    assert len({m["series_occurrence_date"] for m in first}) == MONDAYS
    assert {m["title"] for m in first} == {"Weekly sync"}
    # Twice: nothing changes (the sync compares, it does not rewrite).
    assert (await _sync(job_runtime, binding))["updated"] == 0

    # The master moves to 10:00 and is renamed: Graph tells only the master's update (a notification).
    box = world["box"]
    box.update_event(world["series"], subject="Weekly sync (moved)", start="2026-03-02T10:00",
                     end="2026-03-02T11:00")
    async with db.unit_of_work() as session:  # the worker ran the first sync's job (run_now above)
        await session.execute(text("UPDATE procrastinate_jobs SET status = 'succeeded' "
                                   "WHERE task_name = 'meetings:outlook_sync_binding'"))
    await graph.deliver_notifications(duplicate=True)
    processed = await run_now(tasks.outlook_process_notifications, job_runtime)
    assert processed["binding_syncs_queued"] == 1  # the master's notification names the bound event
    result = await _sync(job_runtime, binding)
    assert result["updated"] == MONDAYS and result["created"] == 0 and result["cancelled"] == 0, result
    moved = await _meetings(db, binding)
    assert [m["id"] for m in moved] == [m["id"] for m in first]  # the same meetings, re-keyed by their day
    assert {m["title"] for m in moved} == {"Weekly sync (moved)"}
    assert {m["start_time"].astimezone(LA).time() for m in moved} == {time(10, 0)}
    assert not any(m["is_exception"] for m in moved)
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_weekly_0900_los_angeles_series_stays_0900_local_across_the_march_change(
        ma, manager, graph, world, db, job_runtime):
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    meetings = await _meetings(db, binding)
    assert {m["start_time"].astimezone(LA).time() for m in meetings} == {time(9, 0)}
    assert {m["timezone"] for m in meetings} == {"America/Los_Angeles"}
    by_day = {m["series_occurrence_date"]: m["start_time"] for m in meetings}
    # 2026-03-08 is the change: 09:00 PST is 17:00 UTC, 09:00 PDT is 16:00 UTC.
    assert by_day[date(2026, 3, 2)] == datetime(2026, 3, 2, 17, 0, tzinfo=UTC)
    assert by_day[date(2026, 3, 9)] == datetime(2026, 3, 9, 16, 0, tzinfo=UTC)
    assert_read_only(graph)


async def test_an_occurrence_deleted_silently_is_found_by_instances_and_cancelled(
        ma, manager, graph, world, db, job_runtime):
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    deleted = datetime(2026, 3, 16, 16, 0, tzinfo=UTC)
    world["box"].delete_occurrence(world["series"], deleted)
    # The delta round never mentions it: the meeting stays until the binding's sync compares /instances.
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=world["mailbox"]["id"])
    still = {m["original_start"]: m for m in await _meetings(db, binding)}
    assert still[deleted]["status"] == "ACTIVE"
    result = await _sync(job_runtime, binding)
    assert result["cancelled"] == 1 and result["created"] == 0, result
    now = {m["original_start"]: m for m in await _meetings(db, binding)}
    assert now[deleted]["status"] == "CANCELLED" and now[deleted]["cancel_reason"] == "Cancelled in Outlook"
    assert [m["status"] for k, m in now.items() if k != deleted] == ["ACTIVE"] * (MONDAYS - 1)
    audit = await _rows(db, "SELECT actor_type FROM meeting_attendance.audit_logs "
                            "WHERE action = 'MEETING_CANCELLED' AND resource_id = :m", m=now[deleted]["id"])
    assert [a["actor_type"] for a in audit] == ["system"]  # the sync writes as the system actor
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_removed_is_confirmed_by_a_get_an_event_that_left_the_window_is_not_cancelled(
        ma, manager, graph, world, db, job_runtime):
    single = await _bind(ma, manager, world, "single")
    gone = await _bind(ma, manager, world, "gone")
    for binding in (single, gone):
        assert (await _sync(job_runtime, binding))["created"] == 1
    [meeting] = await _meetings(db, single)
    assert meeting["title"] == "Board" and meeting["location"] == "Room 1"
    assert meeting["description"] == "Quarterly board review" and meeting["timezone"] == "America/Los_Angeles"
    box = world["box"]
    box.update_event(world["single"], start="2027-03-01T09:00", end="2027-03-01T10:00")  # out of the window
    box.delete_event(world["gone"])
    result = await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=world["mailbox"]["id"])
    assert result["left_window"] == 1 and result["removed"] == 1 and result["cancelled"] == 1, result
    [left] = await _meetings(db, single)
    assert left["status"] == "ACTIVE" and left["id"] == meeting["id"]
    [cancelled] = await _meetings(db, gone)
    assert cancelled["status"] == "CANCELLED"
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-33")
async def test_an_excluded_occurrence_is_never_written_even_as_an_exception_until_resumed(
        ma, manager, graph, world, db, job_runtime):
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    excluded = datetime(2026, 3, 23, 16, 0, tzinfo=UTC)
    body = {"original_start": "2026-03-23T16:00:00Z"}
    path = f"/outlook/bindings/{binding['id']}/exclusions"
    assert (await ma.call("POST", path, manager, json=body)).status_code == 201
    world["box"].edit_occurrence(world["series"], excluded, subject="Special edition")
    result = await _sync(job_runtime, binding)
    assert result["excluded"] == 1 and result["updated"] == 0, result
    rows = {m["original_start"]: m for m in await _meetings(db, binding)}
    assert rows[excluded]["title"] == "Weekly sync"
    assert (await ma.call("DELETE", path, manager, json=body)).status_code == 204
    queued = await _rows(db, "SELECT count(*) AS n FROM procrastinate_jobs "
                             "WHERE task_name = 'meetings:outlook_sync_binding' AND status = 'todo'")
    assert queued[0]["n"] == 1  # removing the exclusion queued the binding's sync
    result = await _sync(job_runtime, binding)
    assert result["updated"] == 1 and result["excluded"] == 0, result
    rows = {m["original_start"]: m for m in await _meetings(db, binding)}
    assert rows[excluded]["title"] == "Special edition"
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-32")
async def test_occurrences_before_sync_from_are_never_created(ma, manager, graph, world, db, job_runtime):
    binding = await _bind(ma, manager, world, sync_from="2026-04-01T00:00:00Z")
    result = await _sync(job_runtime, binding)
    assert result["created"] == 9 and result["skipped"] == MONDAYS - 9, result
    meetings = await _meetings(db, binding)
    assert min(m["original_start"] for m in meetings) == datetime(2026, 4, 6, 16, 0, tzinfo=UTC)
    world["box"].edit_occurrence(world["series"], datetime(2026, 3, 30, 16, 0, tzinfo=UTC), subject="Early")
    result = await _sync(job_runtime, binding)
    assert result["created"] == 0 and result["skipped"] == MONDAYS - 9, result
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_outlook_owns_its_fields_attendees_stay_editable_and_a_release_frees_the_meeting(
        ma, manager, users, graph, db, job_runtime):
    alice = await users.make(email="alice@contoso.com")
    bob = await users.make(email="bob@example.com")
    world = await _world(ma, manager, graph, job_runtime, attendees=("Alice@Contoso.com", "nobody@contoso.com"))
    binding = await _bind(ma, manager, world, "single")
    await _sync(job_runtime, binding)
    [meeting] = await _meetings(db, binding)
    path = f"/meetings/{meeting['id']}"
    attendees = (await ma.call("GET", path + "/required-attendees", manager))
    listed = await _rows(db, "SELECT user_id FROM meeting_attendance.meeting_required_attendees "
                             "WHERE meeting_id = :m", m=meeting["id"])
    assert [r["user_id"] for r in listed] == [alice.id], attendees.text
    for change in ({"title": "Mine now"}, {"location": "Elsewhere"}, {"start_time": "2026-01-12T18:00:00Z"}):
        refused = await ma.call("PATCH", path, manager, json=change)
        assert refused.status_code == 409 and code(refused) == "OUTLOOK_MANAGED", refused.text
        assert refused.json()["binding_id"] == binding["id"]
    refused = await ma.call("POST", path + "/cancel", manager, json={})
    assert refused.status_code == 409 and code(refused) == "OUTLOOK_MANAGED"
    accepted = await ma.call("PATCH", path, manager, json={"late_grace_minutes": 10})
    assert accepted.status_code == 200, accepted.text
    kept = await ma.call("PUT", path + "/required-attendees", manager, json={"user_ids": [str(alice.id), str(bob.id)]})
    assert kept.status_code == 200, kept.text
    # Alice leaves the Outlook invitation: the sync removes her (it added her), never Bob (a manager did).
    world["box"].update_event(world["single"], attendees=[{"address": "nobody@contoso.com"}])
    assert (await _sync(job_runtime, binding))["updated"] == 1
    listed = await _rows(db, "SELECT user_id FROM meeting_attendance.meeting_required_attendees "
                             "WHERE meeting_id = :m", m=meeting["id"])
    assert [r["user_id"] for r in listed] == [bob.id]
    assert (await ma.call("POST", f"/outlook/bindings/{binding['id']}/release", manager)).status_code == 200
    freed = await ma.call("PATCH", path, manager, json={"title": "Mine now"})
    assert freed.status_code == 200 and freed.json()["title"] == "Mine now"
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_managed_series_refuses_edits_of_what_outlook_owns(ma, manager, graph, world, db, job_runtime):
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    series_id = (await _binding(ma, manager, binding))["series_id"]
    refused = await ma.call("PATCH", f"/series/{series_id}", manager, json={"title": "Renamed in Tenet"})
    assert refused.status_code == 409 and code(refused) == "OUTLOOK_MANAGED", refused.text
    accepted = await ma.call("PATCH", f"/series/{series_id}", manager, json={"late_grace_minutes": 7})
    assert accepted.status_code == 200, accepted.text
    assert_read_only(graph)


async def test_missed_notifications_then_reconciliation_repairs_the_drift(ma, manager, tenet_on_graph, db,
                                                                         job_runtime):
    graph = tenet_on_graph
    world = await _world(ma, manager, graph, job_runtime)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    world["box"].update_event(world["series"], subject="Weekly sync, renamed")
    [sub] = graph.subscriptions(world["box"])
    await graph.send_lifecycle((sub, "missed"))  # the master's notification is lost
    await run_now(tasks.outlook_process_notifications, job_runtime)
    assert {m["title"] for m in await _meetings(db, binding)} == {"Weekly sync"}
    policy = (await ma.call("GET", "/outlook/settings", manager)).json()
    fields = {k: policy[k] for k in ("subscription_lifetime_minutes", "renewal_margin_minutes", "window_days_back",
                                     "window_days_ahead", "batch_size", "max_concurrent_requests",
                                     "retry_max_attempts", "retry_base_seconds")}
    assert (await ma.call("PUT", "/outlook/settings", manager,
                          json={**fields, "reconcile_cron": "* * * * *"})).status_code == 200
    scheduled = await run_now(tasks.outlook_schedule, job_runtime, timestamp=0)
    assert scheduled == {"due": True, "reconciliations_queued": 1}
    result = await run_now(tasks.outlook_reconcile, job_runtime, mailbox_id=world["mailbox"]["id"])
    assert result["kind"] == "RECONCILE" and result["updated"] == MONDAYS and result["bindings"] == 1, result
    assert {m["title"] for m in await _meetings(db, binding)} == {"Weekly sync, renamed"}
    status = (await ma.call("GET", "/outlook/sync-status", manager)).json()["items"][0]
    [run] = status["reconciliations"]
    assert run["status"] == "DONE" and run["counts"]["updated"] == MONDAYS and run["counts"]["cancelled"] == 0
    again = await run_now(tasks.outlook_reconcile, job_runtime, mailbox_id=world["mailbox"]["id"])
    assert again["updated"] == 0  # no drift left
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_exceptions_move_their_meeting_a_cancelled_occurrence_cancels_it_a_deleted_series_cancels_all(
        ma, manager, graph, world, db, job_runtime):
    graph.settings.original_start_requires_select = True  # as Graph sometimes does: the sync selects it
    binding = await _bind(ma, manager, world)
    await _sync(job_runtime, binding)
    moved, called_off = datetime(2026, 4, 6, 16, 0, tzinfo=UTC), datetime(2026, 4, 13, 16, 0, tzinfo=UTC)
    box = world["box"]
    box.edit_occurrence(world["series"], moved, start="2026-04-07T14:00", end="2026-04-07T15:30",
                        location="Annex")
    box.edit_occurrence(world["series"], called_off, is_cancelled=True)
    result = await _sync(job_runtime, binding)
    assert result["updated"] == 1 and result["cancelled"] == 1 and result["created"] == 0, result
    rows = {m["original_start"]: m for m in await _meetings(db, binding)}
    assert rows[moved]["start_time"] == datetime(2026, 4, 7, 21, 0, tzinfo=UTC)  # 14:00 PDT
    assert rows[moved]["end_time"] == datetime(2026, 4, 7, 22, 30, tzinfo=UTC)
    assert rows[moved]["location"] == "Annex" and rows[moved]["series_occurrence_date"] == date(2026, 4, 6)
    assert rows[called_off]["status"] == "CANCELLED"
    box.delete_event(world["series"])
    result = await _sync(job_runtime, binding)
    assert result["cancelled"] == MONDAYS - 1, result
    assert {m["status"] for m in await _meetings(db, binding)} == {"CANCELLED"}
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_delta_round_applies_a_changed_occurrence_and_a_changed_single_event(
        ma, manager, graph, world, db, job_runtime):
    series, single = await _bind(ma, manager, world), await _bind(ma, manager, world, "single")
    for binding in (series, single):
        await _sync(job_runtime, binding)
    edited = datetime(2026, 5, 4, 16, 0, tzinfo=UTC)
    world["box"].edit_occurrence(world["series"], edited, subject="Offsite")
    world["box"].update_event(world["single"], subject="Board (moved)", start="2026-01-13T11:00",
                              end="2026-01-13T12:00")
    result = await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=world["mailbox"]["id"])
    assert result["updated"] == 2 and result["created"] == 0 and result["cancelled"] == 0, result
    rows = {m["original_start"]: m for m in await _meetings(db, series)}
    assert rows[edited]["title"] == "Offsite"
    assert {m["title"] for k, m in rows.items() if k != edited} == {"Weekly sync"}
    [moved] = await _meetings(db, single)
    assert moved["title"] == "Board (moved)" and moved["start_time"] == datetime(2026, 1, 13, 19, 0, tzinfo=UTC)
    # Nothing changed since: the next round writes nothing.
    again = await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=world["mailbox"]["id"])
    assert again["updated"] == 0, again
    assert_read_only(graph)
    await rules_hold(db, "MA-")


def test_the_reconciliation_cron_is_read_in_utc_minutes():
    rules = DEFAULT_POLICY  # "17 * * * *"
    assert reconcile.due(rules, datetime(2026, 1, 5, 9, 17, 42, tzinfo=UTC))
    assert not reconcile.due(rules, datetime(2026, 1, 5, 9, 18, tzinfo=UTC))
