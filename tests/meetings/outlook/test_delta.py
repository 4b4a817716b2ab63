"""Delta rounds (spec layer 5) and the candidate pool, end to end: the routes add a mailbox, the worker's round reads
calendarView/delta page by page on the emulator (masters read once, `@removed` confirmed by a GET), the cursor moves
with each page (MA-INV-37), a 410 / syncStateNotFound restarts a full pass without duplicates, a denied mailbox stops
without retries, a throttled one waits; `GET /outlook/candidates` lists the pool with managed flags."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold

POLICY = {"subscription_lifetime_minutes": 4200, "renewal_margin_minutes": 720, "window_days_back": 30,
          "window_days_ahead": 365, "reconcile_cron": "17 * * * *", "batch_size": 10, "max_concurrent_requests": 4,
          "retry_max_attempts": 5, "retry_base_seconds": 2}


@pytest.fixture
async def world(ma, manager, graph):
    assert (await ma.call("PUT", "/outlook/settings", manager, json=POLICY)).status_code == 200
    box = graph.add_mailbox("room@contoso.com")
    events = {f"single{n}": box.create_event(f"Review {n}", f"2026-01-{10 + n}T09:00", f"2026-01-{10 + n}T10:00")
              for n in range(12)}
    events["series"] = box.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00",
                                         pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                                         until=date(2026, 6, 1))
    response = await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})
    assert response.status_code == 201 and response.json()["state"] == "OK", response.text
    return {"box": box, "events": events, "mailbox": response.json()}


async def _round(job_runtime, world, **kwargs):
    return await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=world["mailbox"]["id"], **kwargs)


async def _one(db, sql, **params):
    async with db.read_only() as session:
        return (await session.execute(text(sql), params)).mappings().one()


async def _candidates(ma, manager, **params):
    response = await ma.call("GET", "/outlook/candidates", manager, params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    return response.json()["items"]


@pytest.mark.invariant("MA-INV-37")
async def test_a_full_pass_pages_to_the_delta_link_and_fills_the_pool(ma, manager, graph, world, db, job_runtime):
    jobs = await _one(db, "SELECT count(*) AS n FROM procrastinate_jobs "
                          "WHERE task_name = 'meetings:outlook_delta_round'")
    assert jobs["n"] == 1  # adding the mailbox queued its first round
    result = await _round(job_runtime, world)
    assert result["kind"] == "FULL" and result["pages"] >= 2 and result["candidates"] >= 13
    items = await _candidates(ma, manager)
    assert len(items) == 13 and not any(i["managed"] for i in items)
    [series] = [i for i in items if i["type"] == "seriesMaster"]
    assert series["subject"] == "Weekly sync" and series["timezone"] == "America/Los_Angeles"
    assert series["graph_event_id"] == world["box"].id_of(world["events"]["series"], immutable=True)
    # The master was read once, whatever the number of its occurrences in delta.
    assert len([r for r in graph.requests(route="event")]) == 1
    assert all("odata.maxpagesize" in r.prefer for r in graph.requests(route="delta"))
    cursor = await _one(db, "SELECT * FROM meeting_attendance.outlook_delta_cursors WHERE mailbox_id = :m",
                        m=world["mailbox"]["id"])
    assert cursor["delta_link"] and cursor["next_link"] is None and cursor["last_round_at"] == ma.clock.now()
    assert cursor["window_start"] == ma.clock.now().replace(hour=0) - timedelta(days=30)
    run = await _one(db, "SELECT * FROM meeting_attendance.outlook_sync_runs")
    assert run["status"] == "DONE" and run["kind"] == "FULL" and run["graph_requests"] == result["graph_requests"]
    assert [i["subject"] for i in await _candidates(ma, manager, type="seriesMaster")] == ["Weekly sync"]
    assert [i["subject"] for i in await _candidates(ma, manager, q="review 1")] == ["Review 1", "Review 10",
                                                                                    "Review 11"]
    paged = await ma.call("GET", "/outlook/candidates", manager, params={"limit": 5})
    assert len(paged.json()["items"]) == 5 and paged.json()["next_cursor"]
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_an_incremental_round_updates_confirms_deletions_and_keeps_events_that_left(ma, manager, graph, world,
                                                                                         db, job_runtime):
    await _round(job_runtime, world)
    box, events = world["box"], world["events"]
    box.update_event(events["single0"], subject="Renamed")
    box.delete_event(events["single1"])
    box.update_event(events["single2"], start="2028-01-10T09:00", end="2028-01-10T10:00")  # leaves the window
    box.create_event("New one", "2026-02-01T09:00", "2026-02-01T10:00")
    result = await _round(job_runtime, world)
    assert result["kind"] == "DELTA" and result["removed"] == 1 and result["left_window"] == 1
    subjects = {i["subject"] for i in await _candidates(ma, manager)}
    assert "Renamed" in subjects and "New one" in subjects and "Review 1" not in subjects
    assert "Review 2" in subjects  # left the window, not deleted: a GET found it
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_lost_sync_state_restarts_a_full_pass_without_duplicates(ma, manager, graph, world, db, job_runtime):
    await _round(job_runtime, world)
    graph.reset_delta(world["box"], code="syncStateNotFound")
    result = await _round(job_runtime, world)
    assert result["resets"] == 1 and result["kind"] == "FULL"
    assert len(await _candidates(ma, manager)) == 13
    assert [r.status for r in graph.requests(route="delta")].count(410) == 1
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_mailbox_denied_mid_sync_is_stored_and_not_retried(ma, manager, graph, world, db, job_runtime):
    graph.deny(world["box"])
    result = await _round(job_runtime, world)
    assert result["failed"] == "ErrorAccessDenied"
    mailbox = (await ma.call("GET", f"/outlook/mailboxes/{world['mailbox']['id']}", manager)).json()
    assert mailbox["state"] == "ACCESS_DENIED" and mailbox["last_error_request_id"]
    run = await _one(db, "SELECT * FROM meeting_attendance.outlook_sync_runs")
    assert run["status"] == "FAILED" and run["error_code"] == "ErrorAccessDenied"
    # Further rounds do nothing until an operator resyncs; the resync checks access again.
    assert await _round(job_runtime, world) == {"skipped": "ACCESS_DENIED"}
    graph.allow(world["box"])
    assert (await ma.call("POST", f"/outlook/mailboxes/{world['mailbox']['id']}/resync", manager)).status_code == 202
    assert (await _round(job_runtime, world))["kind"] == "FULL"
    assert (await ma.call("GET", f"/outlook/mailboxes/{world['mailbox']['id']}", manager)).json()["state"] == "OK"
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_throttled_mailbox_waits_for_retry_after_and_completes(ma, manager, graph, world, db, job_runtime):
    graph.throttle(world["box"], retry_after=1, route="delta", times=1)
    result = await _round(job_runtime, world)
    assert result["kind"] == "FULL" and len(await _candidates(ma, manager)) == 13
    assert [r.status for r in graph.requests(route="delta")][:2] == [429, 200]
    assert_read_only(graph)
    await rules_hold(db, "MA-")
