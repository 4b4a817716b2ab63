"""The webhook (spec layer 5) and the subscriptions' upkeep (layer 1), end to end: the job creates each mailbox's
subscription on the emulator, which validates both URLs against this test's app; the emulator's notifications reach
the app, which checks clientState per item, stores, queues one processing job and answers 202; lifecycle events
renew, recreate and reauthorize (MA-INV-36) and `missed` asks for a full delta pass."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.conftest import BASE
from tests.meetings.outlook.conftest import CLIENT_STATE, assert_read_only
from tests.support.invariants import rules_hold


async def _mailbox(ma, manager, graph, address="room@contoso.com"):
    box = graph.add_mailbox(address)
    response = await ma.call("POST", "/outlook/mailboxes", manager, json={"address": address})
    assert response.status_code == 201 and response.json()["state"] == "OK", response.text
    return box, response.json()


async def _rows(db, sql, params=None):
    async with db.read_only() as session:
        return (await session.execute(text(sql), params or {})).mappings().all()


async def _subscriptions(db):
    return await _rows(db, "SELECT * FROM meeting_attendance.outlook_subscriptions ORDER BY created_at, status")


@pytest.mark.parametrize("route", ["notifications", "lifecycle"])
async def test_the_validation_token_is_echoed_as_plain_text(client, route):
    response = await client.post(f"{BASE}/outlook/{route}", params={"validationToken": "Validation: a+b <c>&d"},
                                 headers={"Content-Type": "text/plain"})
    assert response.status_code == 200 and response.text == "Validation: a+b <c>&d"
    assert response.headers["content-type"].startswith("text/plain")


@pytest.mark.invariant("MA-INV-36")
async def test_upkeep_creates_one_subscription_per_mailbox_validated_by_graph(ma, manager, tenet_on_graph, db,
                                                                               job_runtime):
    graph = tenet_on_graph
    box, _ = await _mailbox(ma, manager, graph)
    assert await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0) == {
        "created": 1, "renewed": 0, "recreated": 0, "reauthorized": 0, "deleted": 0, "failed": 0}
    [sub] = graph.subscriptions(box)
    assert sub.resource == f"/users/{box.id}/events" and sub.client_state == CLIENT_STATE
    assert sub.notification_url == f"https://tenet.test{BASE}/outlook/notifications"
    [row] = await _subscriptions(db)
    assert row["graph_subscription_id"] == sub.id and row["status"] == "ACTIVE"
    assert row["expires_at"] == ma.clock.now() + timedelta(minutes=4200)
    # A second pass changes nothing: one ACTIVE subscription per mailbox.
    assert (await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0))["created"] == 0
    assert len(graph.subscriptions(box)) == 1
    status = (await ma.call("GET", "/outlook/sync-status", manager)).json()["items"][0]
    assert status["subscription_id"] == sub.id
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-36")
async def test_renewal_within_the_margin_and_recreation_after_a_404(ma, manager, tenet_on_graph, db, job_runtime):
    graph = tenet_on_graph
    box, _ = await _mailbox(ma, manager, graph)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    # Inside the 720-minute margin: renewed by PATCH, same subscription.
    ma.clock.advance(timedelta(minutes=4200 - 700))
    graph.state.set_now(ma.clock.now())
    assert (await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0))["renewed"] == 1
    [row] = await _subscriptions(db)
    assert row["renewed_at"] == ma.clock.now() and row["expires_at"] == ma.clock.now() + timedelta(minutes=4200)
    # Graph forgets it: the next renewal's 404 makes a new one.
    [sub] = graph.subscriptions(box)
    graph.expire_subscription(sub)
    ma.clock.advance(timedelta(minutes=4200 - 700))
    graph.state.set_now(ma.clock.now())
    assert (await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0))["recreated"] == 1
    rows = await _subscriptions(db)
    assert sorted(r["status"] for r in rows) == ["ACTIVE", "REMOVED"]
    assert [s.id for s in graph.subscriptions(box)] == [r["graph_subscription_id"] for r in rows
                                                        if r["status"] == "ACTIVE"]
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_batch_keeps_good_items_drops_bad_ones_and_queues_one_job(ma, manager, tenet_on_graph, db,
                                                                         job_runtime):
    graph = tenet_on_graph
    box, mailbox = await _mailbox(ma, manager, graph)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    box.create_event("Standup", "2026-01-06T09:00", "2026-01-06T09:15", zone="Pacific Standard Time")
    box.create_event("Review", "2026-01-07T09:00", "2026-01-07T10:00", zone="Pacific Standard Time")
    await graph.deliver_notifications(duplicate=True, out_of_order=True, wrong_client_state=[0])
    [delivery] = graph.deliveries()[-1:]
    assert delivery.status == 202
    stored = await _rows(db, "SELECT * FROM meeting_attendance.outlook_notifications ORDER BY id")
    assert len(stored) == 3 and {str(r["mailbox_id"]) for r in stored} == {mailbox["id"]}
    assert {r["change_type"] for r in stored} == {"created"} and all(r["status"] == "PENDING" for r in stored)
    # A second batch while the job waits queues nothing more.
    box.create_event("Later", "2026-01-08T09:00", "2026-01-08T10:00")
    await graph.deliver_notifications()
    jobs = await _rows(db, "SELECT task_name, status FROM procrastinate_jobs "
                           "WHERE queueing_lock = 'outlook:notifications'")
    assert [(j["task_name"], j["status"]) for j in jobs] == [("meetings:outlook_process_notifications", "todo")]
    result = await run_now(tasks.outlook_process_notifications, job_runtime)
    assert result["notifications"] == 4 and result["mailboxes_changed"] == [str(mailbox["id"])]
    # Adding the mailbox queued its first round; that one waits still, so the changes queue no second one.
    assert result["rounds_queued"] == 0
    rounds = await _rows(db, "SELECT args FROM procrastinate_jobs WHERE task_name = 'meetings:outlook_delta_round'")
    assert [r["args"] for r in rounds] == [{"mailbox_id": mailbox["id"]}]
    done = await _rows(db, "SELECT DISTINCT status FROM meeting_attendance.outlook_notifications")
    assert [r["status"] for r in done] == ["DONE"]
    status = (await ma.call("GET", "/outlook/sync-status", manager)).json()["items"][0]
    assert status["last_notification_at"] == ma.clock.now().isoformat().replace("+00:00", "Z")
    assert_read_only(graph)


async def test_lifecycle_events_reauthorize_recreate_and_ask_for_a_full_pass(ma, manager, tenet_on_graph, db,
                                                                             job_runtime):
    graph = tenet_on_graph
    box, _ = await _mailbox(ma, manager, graph)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    [sub] = graph.subscriptions(box)
    await graph.send_lifecycle((sub, "reauthorizationRequired"), (sub, "reauthorizationRequired"))
    result = await run_now(tasks.outlook_process_notifications, job_runtime)
    assert result["reauthorizationRequired"] == 1 and not sub.reauthorization_required
    assert len(graph.requests(route="reauthorize")) == 1
    await graph.send_lifecycle((sub, "missed"))
    await run_now(tasks.outlook_process_notifications, job_runtime)
    [cursor] = await _rows(db, "SELECT * FROM meeting_attendance.outlook_delta_cursors")
    assert cursor["full_pass_requested_at"] == ma.clock.now()
    await graph.send_lifecycle((sub, "subscriptionRemoved"))
    result = await run_now(tasks.outlook_process_notifications, job_runtime)
    assert result["subscriptionRemoved"] == 1
    rows = await _subscriptions(db)
    assert sorted(r["status"] for r in rows) == ["ACTIVE", "REMOVED"]
    [new] = graph.subscriptions(box)
    assert new.id != sub.id and new.id in {r["graph_subscription_id"] for r in rows if r["status"] == "ACTIVE"}
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_wrong_client_state_everywhere_or_sync_off_stores_nothing(client, db, app, clock, tmp_path):
    body = {"value": [{"subscriptionId": "s", "changeType": "updated", "clientState": "guess",
                       "resource": "Users/u/Events/e"}]}
    response = await client.post(f"{BASE}/outlook/notifications", json=body)
    assert response.status_code == 202
    from tenet.app import create_app
    from tests.conftest import test_settings
    off = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=off), base_url="http://testserver") as other:
        good = {"value": [{**body["value"][0], "clientState": CLIENT_STATE}]}
        assert (await other.post(f"{BASE}/outlook/notifications", json=good)).status_code == 202
    assert await _rows(db, "SELECT id FROM meeting_attendance.outlook_notifications") == []
    for bad in (b"not json", b'{"value": 3}', b"[]"):
        response = await client.post(f"{BASE}/outlook/notifications", content=bad,
                                     headers={"Content-Type": "application/json"})
        assert response.status_code == 400, bad


async def test_replay_processes_a_mailbox_s_stored_notifications_again_and_old_ones_are_purged(
        ma, manager, tenet_on_graph, db, job_runtime):
    graph = tenet_on_graph
    box, mailbox = await _mailbox(ma, manager, graph)
    await run_now(tasks.outlook_subscriptions, job_runtime, timestamp=0)
    box.create_event("Standup", "2026-01-06T09:00", "2026-01-06T09:15")
    await graph.deliver_notifications()
    await run_now(tasks.outlook_process_notifications, job_runtime)
    since = (ma.clock.now() - timedelta(minutes=1)).isoformat()
    response = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/replay", manager, json={"since": since})
    assert response.status_code == 202 and response.json()["notifications"] == 1, response.text
    assert (await run_now(tasks.outlook_process_notifications, job_runtime))["notifications"] == 1
    audit = await ma.call("GET", "/audit-logs", manager, params={"action": "OUTLOOK_MAILBOX_REPLAY_REQUESTED"})
    assert len(audit.json()["items"]) == 1
    # Kept 7 days (the replay window), then purged.
    job_runtime.clock.advance(timedelta(days=7, minutes=1))
    assert await run_now(tasks.outlook_purge_notifications, job_runtime, timestamp=0) == 1
    assert await _rows(db, "SELECT id FROM meeting_attendance.outlook_notifications") == []
    assert_read_only(graph)


async def test_the_webhooks_answers_are_timed_and_their_items_counted(client):
    """/metrics: Graph's 3-second deadline has a histogram of its own, and kept and dropped items are counted (kept
    once committed)."""
    from prometheus_client import REGISTRY

    def metric(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    acks = {kind: metric("tenet_outlook_webhook_ack_seconds_count", kind=kind) for kind in ("change", "lifecycle")}
    kept = metric("tenet_outlook_notifications_total", kind="change", outcome="kept")
    dropped = metric("tenet_outlook_notifications_total", kind="change", outcome="dropped")
    item = {"subscriptionId": "s", "changeType": "updated", "clientState": CLIENT_STATE, "resource": "Users/u/Events/e"}
    body = {"value": [item, item, {**item, "clientState": "guess"}]}
    assert (await client.post(f"{BASE}/outlook/notifications", json=body)).status_code == 202
    assert (await client.post(f"{BASE}/outlook/lifecycle", params={"validationToken": "t"})).status_code == 200
    assert metric("tenet_outlook_webhook_ack_seconds_count", kind="change") - acks["change"] == 1
    assert metric("tenet_outlook_webhook_ack_seconds_count", kind="lifecycle") - acks["lifecycle"] == 1
    assert metric("tenet_outlook_notifications_total", kind="change", outcome="kept") - kept == 2
    assert metric("tenet_outlook_notifications_total", kind="change", outcome="dropped") - dropped == 1
