"""Launch clean-up (spec layer 8): the checklist of local series no binding manages, with their Outlook look-alikes
from the candidate pool and the operations steps; the truncation that ends such a series before today in Tenet only
(MA-INV-38: nothing written to Outlook; MA-INV-40: audited); and disabling a mailbox, whose Graph subscription the
worker then deletes."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import cleanup, tasks
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

LAUNCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # Monday 01:00 in Los Angeles


async def _local_series(ma, manager, clock, **body):
    """A series typed into Tenet by hand before launch: Mondays 09:00 Los Angeles from 1 December, 12 times."""
    clock.set(datetime(2025, 11, 20, tzinfo=UTC))
    payload = {"title": "Weekly sync", "timezone": "America/Los_Angeles", "start_date": "2025-12-01",
               "start_local_time": "09:00", "duration_minutes": 60, "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=12", **body}
    response = await ma.call("POST", "/series", manager, json=payload)
    assert response.status_code == 201, response.text
    clock.set(LAUNCH)
    return response.json()


@pytest.fixture
async def pool(ma, manager, graph, job_runtime, clock):
    """One source mailbox whose pool holds three Outlook series masters and a single event."""
    clock.set(LAUNCH)
    graph.state.set_now(LAUNCH)
    box = graph.add_mailbox("room@contoso.com")
    monday = {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]}
    same = box.create_series("weekly  SYNC", "2026-01-12T09:00", "2026-01-12T10:00", pattern=monday,
                             until=date(2026, 6, 1))
    near = box.create_series("Standup", "2026-01-12T09:10", "2026-01-12T09:25", pattern=monday,
                             until=date(2026, 6, 1))
    box.create_series("Finance review", "2026-01-13T14:00", "2026-01-13T15:00",
                      pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["tuesday"]}, until=date(2026, 6, 1))
    box.create_event("Weekly sync", "2026-01-12T09:00", "2026-01-12T10:00")  # a single event: not a series root
    mailbox = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox["id"])
    return {"box": box, "mailbox": mailbox, "same": box.id_of(same, immutable=True),
            "near": box.id_of(near, immutable=True)}


async def _meetings_of(db, series_id):
    async with db.read_only() as session:
        return (await session.execute(text(
            "SELECT series_occurrence_date AS day, status FROM meeting_attendance.meetings WHERE series_id = :s "
            "ORDER BY series_occurrence_date"), {"s": series_id})).all()


@pytest.mark.invariant("MA-INV-38")
async def test_the_checklist_lists_unbound_local_series_with_their_outlook_look_alikes(ma, manager, graph, pool, db,
                                                                                      clock):
    made = await _local_series(ma, manager, clock)
    ended = await _local_series(ma, manager, clock, title="Old retro", start_date="2025-11-24",
                                rrule="FREQ=WEEKLY;BYDAY=MO;COUNT=2")  # all past: nothing to clean up
    response = await ma.call("GET", "/outlook/cleanup", manager)
    assert response.status_code == 200, response.text
    body = response.json()
    [item] = body["series"]
    assert item["series_id"] == made["series"]["id"] != ended["series"]["id"]
    assert item["weekdays"] == ["MO"] and item["start_local_time"] == "09:00:00"
    assert item["future_meetings"] == 7 and item["next_start"] == "2026-01-05T17:00:00Z"
    alikes = [(a["graph_event_id"], a["signals"]) for a in item["look_alikes"]]
    # Best first: subject, weekday and time; then weekday and time (10 minutes off); Tuesday's series is not alike.
    assert alikes == [(pool["same"], ["subject", "weekday", "time"]), (pool["near"], ["weekday", "time"])]
    assert item["look_alikes"][0]["local_time"] == "09:00:00" and item["look_alikes"][0]["managed"] is False
    steps = {s["step"]: (s["done"], s["count"]) for s in body["operations"]}
    assert steps == {"credentials": (True, None), "mailboxes": (True, 1), "bindings": (False, 0),
                     "truncate_local_series": (False, 1), "watch_sync": (True, None)}
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-38")
@pytest.mark.invariant("MA-INV-40")
async def test_truncation_deletes_what_has_not_started_keeps_history_and_is_audited(ma, manager, graph, pool, db,
                                                                                   clock):
    made = await _local_series(ma, manager, clock)
    series_id = made["series"]["id"]
    stale = await ma.call("POST", f"/outlook/cleanup/series/{series_id}/truncate", manager,
                          headers={"If-Match": '"99"'})
    assert stale.status_code == 412
    response = await ma.call("POST", f"/outlook/cleanup/series/{series_id}/truncate", manager,
                             headers={"If-Match": f'"{made["series"]["version"]}"'})
    assert response.status_code == 200, response.text
    body = response.json()
    # 01:00 on Monday 5 January in Los Angeles: today's 09:00 has not started, so the series ends yesterday.
    assert body["status"] == "ACTIVE" and body["until"] == "2026-01-04" and body["changed"] is True
    assert body["rrule"] == "FREQ=WEEKLY;BYDAY=MO;UNTIL=20260104" and len(body["deleted_meeting_ids"]) == 7
    rows = await _meetings_of(db, series_id)
    assert [(r.day.isoformat(), r.status) for r in rows if r.status == "ACTIVE"] == [
        ("2025-12-01", "ACTIVE"), ("2025-12-08", "ACTIVE"), ("2025-12-15", "ACTIVE"), ("2025-12-22", "ACTIVE"),
        ("2025-12-29", "ACTIVE")]
    assert sum(r.status == "DELETED" for r in rows) == 7
    series = (await ma.call("GET", f"/series/{series_id}", manager)).json()
    assert series["rrule"] == body["rrule"]
    audit = (await ma.call("GET", "/audit-logs", manager, params={"resource": "SERIES"})).json()["items"]
    [truncated] = [a for a in audit if a["action"] == "OUTLOOK_SERIES_TRUNCATED"]
    assert truncated["resource_id"] == series_id
    # Again: nothing left to do, nothing written, no second audit row.
    again = (await ma.call("POST", f"/outlook/cleanup/series/{series_id}/truncate", manager)).json()
    assert again["changed"] is False and again["deleted_meeting_ids"] == [] and again["until"] == "2026-01-04"
    audit = (await ma.call("GET", "/audit-logs", manager, params={"resource": "SERIES"})).json()["items"]
    assert [a["action"] for a in audit].count("OUTLOOK_SERIES_TRUNCATED") == 1
    checklist = (await ma.call("GET", "/outlook/cleanup", manager)).json()
    assert checklist["series"] == []
    assert {s["step"]: s["done"] for s in checklist["operations"]}["truncate_local_series"] is True
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_an_occurrence_of_today_that_has_started_stays_and_ends_the_rule(ma, manager, pool, db, clock):
    made = await _local_series(ma, manager, clock)
    clock.set(datetime(2026, 1, 5, 17, 30, tzinfo=UTC))  # 09:30 in Los Angeles: today's meeting is running
    body = (await ma.call("POST", f"/outlook/cleanup/series/{made['series']['id']}/truncate", manager)).json()
    assert body["until"] == "2026-01-05" and body["rrule"].endswith("UNTIL=20260105")
    assert len(body["deleted_meeting_ids"]) == 6
    rows = await _meetings_of(db, made["series"]["id"])
    assert [r.day for r in rows if r.status == "ACTIVE"][-1] == date(2026, 1, 5)
    await rules_hold(db, "MA-")


async def test_a_series_none_of_which_has_started_is_deleted(ma, manager, pool, db, clock):
    made = await _local_series(ma, manager, clock, start_date="2026-01-12", rrule="FREQ=WEEKLY;BYDAY=MO;COUNT=3")
    body = (await ma.call("POST", f"/outlook/cleanup/series/{made['series']['id']}/truncate", manager)).json()
    assert body["status"] == "DELETED" and body["until"] is None and len(body["deleted_meeting_ids"]) == 3
    gone = await ma.call("GET", f"/series/{made['series']['id']}", manager)
    assert gone.status_code == 404
    again = await ma.call("POST", f"/outlook/cleanup/series/{made['series']['id']}/truncate", manager)
    assert again.status_code == 404 and code(again) == "SERIES_NOT_FOUND"
    await rules_hold(db, "MA-")


async def test_a_series_outlook_manages_is_refused_and_others_cannot_truncate(ma, manager, employee, pool, db,
                                                                              clock):
    made = await _local_series(ma, manager, clock)
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_bindings (id, graph_event_id, kind, mailbox_id, bound_by_id, "
            "sync_from, series_id, status, created_at, updated_at, version) VALUES (gen_random_uuid(), :g, 'SERIES', "
            ":m, :u, :t, :s, 'ACTIVE', :t, :t, 1)"),
            {"g": pool["same"], "m": pool["mailbox"]["id"], "u": str(manager.id), "t": LAUNCH,
             "s": made["series"]["id"]})
    refused = await ma.call("POST", f"/outlook/cleanup/series/{made['series']['id']}/truncate", manager)
    assert refused.status_code == 409 and code(refused) == "OUTLOOK_MANAGED" and refused.json()["binding_id"]
    assert (await ma.call("GET", "/outlook/cleanup", manager)).json()["series"] == []
    assert len([r for r in await _meetings_of(db, made["series"]["id"]) if r.status == "ACTIVE"]) == 12
    denied = await ma.call("POST", f"/outlook/cleanup/series/{made['series']['id']}/truncate", employee)
    assert denied.status_code == 403
    missing = await ma.call("POST", "/outlook/cleanup/series/00000000-0000-0000-0000-000000000000/truncate", manager)
    assert missing.status_code == 404 and code(missing) == "SERIES_NOT_FOUND"


@pytest.mark.invariant("MA-INV-40")
@pytest.mark.invariant("MA-INV-36")
async def test_a_disabled_mailbox_loses_its_subscription_and_its_address_can_come_back(ma, manager, tenet_on_graph, db,
                                                                                      job_runtime, clock):
    graph = tenet_on_graph
    box = graph.add_mailbox("room@contoso.com")
    mailbox = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})).json()
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    assert len(graph.subscriptions(box)) == 1
    stale = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/disable", manager, headers={"If-Match": '"9"'})
    assert stale.status_code == 412
    response = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/disable", manager)
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "DISABLED" and response.json()["version"] == mailbox["version"] + 1
    counts = await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    assert counts["deleted"] == 1 and counts["created"] == 0
    assert graph.subscriptions(box) == []
    async with db.read_only() as session:
        statuses = (await session.execute(text(
            "SELECT status FROM meeting_attendance.outlook_subscriptions WHERE mailbox_id = :m"),
            {"m": mailbox["id"]})).scalars().all()
    assert statuses == ["DELETED"]
    again = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/disable", manager)
    assert again.status_code == 409 and code(again) == "OUTLOOK_MAILBOX_DISABLED"
    resync = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/resync", manager)
    assert resync.status_code == 409 and code(resync) == "OUTLOOK_MAILBOX_DISABLED"
    audit = (await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_MAILBOX"})).json()["items"]
    assert "OUTLOOK_MAILBOX_DISABLED" in [a["action"] for a in audit]
    back = await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})
    assert back.status_code == 201 and back.json()["id"] != mailbox["id"] and back.json()["state"] == "OK"
    status = (await ma.call("GET", "/outlook/sync-status", manager)).json()["items"]
    assert [s["mailbox_id"] for s in status] == [back.json()["id"]]
    assert_read_only(graph)
    await rules_hold(db, "MA-")


def test_look_alike_signals_need_a_subject_or_both_weekday_and_time():
    local = {"title": "Design Review", "weekdays": ["TU"], "start_local_time": datetime(2026, 1, 1, 23, 55).time()}
    rows = [
        {"mailbox_id": "m", "graph_event_id": "a", "subject": "design review — EMEA", "timezone": "Europe/Paris",
         "start_at": datetime(2026, 1, 6, 8, 0, tzinfo=UTC), "recurrence": None, "managed": False, "binding_id": None},
        {"mailbox_id": "m", "graph_event_id": "b", "subject": "Other", "timezone": "UTC",
         "start_at": datetime(2026, 1, 6, 0, 5, tzinfo=UTC), "recurrence": {"pattern": {"daysOfWeek": ["tuesday"]}},
         "managed": False, "binding_id": None},
        {"mailbox_id": "m", "graph_event_id": "c", "subject": "Other", "timezone": "UTC",
         "start_at": datetime(2026, 1, 7, 23, 55, tzinfo=UTC), "recurrence": {"pattern": {"daysOfWeek": ["wednesday"]}},
         "managed": False, "binding_id": None},
    ]
    found = cleanup.look_alikes(local, cleanup.candidate_index(rows))
    # "b" is 10 minutes away across midnight and shares Tuesday; "a" only shares the subject; "c" only the time.
    assert [(f["graph_event_id"], f["signals"]) for f in found] == [("b", ["weekday", "time"]),
                                                                    ("a", ["subject", "weekday"])]
    assert cleanup.truncated_rule("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;COUNT=30", date(2026, 2, 1)) == \
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;UNTIL=20260201"
    assert cleanup.series_weekdays("FREQ=DAILY;COUNT=3", date(2026, 1, 1)) == ["MO", "TU", "WE", "TH", "FR", "SA",
                                                                                 "SU"]
    assert cleanup.series_weekdays("FREQ=MONTHLY;COUNT=3", date(2026, 1, 1)) == ["TH"]
