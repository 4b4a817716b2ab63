"""Sources (spec layer 1): POST|GET /outlook/mailboxes with the access check, resync, sync-status — end to end through
the routes against the Graph emulator. A refused or unknown mailbox is stored as its state with Graph's code,
request-id and a hint (201), without a retry storm."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _add(ma, user, address="room@contoso.com", kind="SHARED"):
    return await ma.call("POST", "/outlook/mailboxes", user, json={"address": address, "kind": kind})


@pytest.mark.invariant("MA-INV-40")
async def test_a_reachable_mailbox_is_added_ok_and_audited(ma, manager, graph, db):
    box = graph.add_mailbox("room@contoso.com")
    response = await _add(ma, manager, "  Room@Contoso.com ")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["address"] == "room@contoso.com" and body["state"] == "OK" and body["graph_user_id"] == box.id
    assert body["last_error_code"] is None and response.headers["Location"].endswith(body["id"])
    listed = await ma.call("GET", "/outlook/mailboxes", manager)
    assert [m["id"] for m in listed.json()["items"]] == [body["id"]]
    assert (await ma.call("GET", f"/outlook/mailboxes/{body['id']}", manager)).json() == body
    audit = await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_MAILBOX"})
    assert [(a["action"], a["resource_id"]) for a in audit.json()["items"]] == [("OUTLOOK_MAILBOX_ADDED", body["id"])]
    assert [r.route for r in graph.requests()] == ["user", "events"]
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_a_denied_mailbox_is_stored_with_graph_s_code_request_id_and_a_hint(ma, manager, graph, db):
    box = graph.add_mailbox("denied@contoso.com")
    graph.deny(box)
    response = await _add(ma, manager, "denied@contoso.com")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["state"] == "ACCESS_DENIED" and body["last_error_code"] == "ErrorAccessDenied"
    assert body["last_error_request_id"] == graph.requests(route="events")[-1].request_id
    assert "RBAC for Applications" in body["last_error_hint"]
    # One look, no retries: a denied mailbox is an answer, not a failure.
    assert len(graph.requests(route="events")) == 1
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.parametrize("case", ["unknown", "rest-disabled"])
async def test_an_unknown_mailbox_is_stored_invalid(ma, manager, graph, case):
    if case == "rest-disabled":
        graph.add_mailbox("onprem@contoso.com").rest_enabled = False
    response = await _add(ma, manager, "onprem@contoso.com")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["state"] == "INVALID" and body["last_error_hint"]
    expected = "Request_ResourceNotFound" if case == "unknown" else "MailboxNotEnabledForRESTAPI"
    assert body["last_error_code"] == expected
    assert_read_only(graph)


async def test_the_same_address_twice_and_bad_addresses_are_refused(ma, manager, graph):
    graph.add_mailbox("room@contoso.com")
    assert (await _add(ma, manager)).status_code == 201
    again = await _add(ma, manager, "ROOM@contoso.com")
    assert again.status_code == 409 and code(again) == "OUTLOOK_MAILBOX_EXISTS"
    for bad in ("no-at-sign", "a@b", "two@@contoso.com"):
        response = await _add(ma, manager, bad)
        assert response.status_code == 422 and code(response) == "OUTLOOK_MAILBOX_ADDRESS_INVALID", bad
    wrong_kind = await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "x@contoso.com", "kind": "X"})
    assert wrong_kind.status_code == 422


async def test_graph_down_stores_nothing_and_answers_503(ma, manager, graph):
    box = graph.add_mailbox("room@contoso.com")
    graph.unavailable(box, retry_after=1, times=None, route="user")
    response = await _add(ma, manager)
    assert response.status_code == 503 and code(response) == "OUTLOOK_GRAPH_UNAVAILABLE", response.text
    assert response.json()["graph_code"] == "ServiceNotAvailable"
    assert len(graph.requests(route="user")) == 2  # two attempts, Retry-After honoured between them
    assert (await ma.call("GET", "/outlook/mailboxes", manager)).json()["items"] == []


@pytest.mark.invariant("MA-INV-40")
async def test_resync_puts_a_denied_mailbox_back_to_pending_and_drops_the_cursor(ma, manager, graph, db):
    box = graph.add_mailbox("denied@contoso.com")
    graph.deny(box)
    mailbox = (await _add(ma, manager, "denied@contoso.com")).json()
    async with db.unit_of_work() as session:
        await session.execute(text(
            "UPDATE meeting_attendance.outlook_delta_cursors SET window_start = :t, window_end = :e, "
            "delta_link = 'https://graph/delta?$deltatoken=x' WHERE mailbox_id = :m"),
            {"m": mailbox["id"], "t": ma.clock.now(), "e": ma.clock.now() + timedelta(days=30)})
    response = await ma.call("POST", f"/outlook/mailboxes/{mailbox['id']}/resync", manager)
    assert response.status_code == 202, response.text
    after = (await ma.call("GET", f"/outlook/mailboxes/{mailbox['id']}", manager)).json()
    assert after["state"] == "PENDING" and after["version"] == mailbox["version"] + 1
    async with db.read_only() as session:
        cursor = (await session.execute(text(
            "SELECT delta_link, full_pass_requested_at FROM meeting_attendance.outlook_delta_cursors "
            "WHERE mailbox_id = :m"), {"m": mailbox["id"]})).one()
    assert cursor.delta_link is None and cursor.full_pass_requested_at == ma.clock.now()
    audit = await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_MAILBOX"})
    assert "OUTLOOK_MAILBOX_RESYNC_REQUESTED" in [a["action"] for a in audit.json()["items"]]
    missing = await ma.call("POST", "/outlook/mailboxes/00000000-0000-0000-0000-000000000000/resync", manager)
    assert missing.status_code == 404 and code(missing) == "OUTLOOK_MAILBOX_NOT_FOUND"
    await rules_hold(db, "MA-")


async def test_sync_status_shows_subscription_cursor_error_and_reconciliations(ma, manager, graph, db):
    graph.add_mailbox("room@contoso.com")
    mailbox = (await _add(ma, manager)).json()
    now = ma.clock.now()
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_subscriptions (id, mailbox_id, graph_subscription_id, resource, "
            "expires_at, created_at) VALUES (gen_random_uuid(), :m, 'sub-1', '/users/x/events', :exp, :t)"),
            {"m": mailbox["id"], "t": now, "exp": now + timedelta(minutes=4200)})
        await session.execute(text(
            "UPDATE meeting_attendance.outlook_delta_cursors SET last_round_at = :last WHERE mailbox_id = :m"),
            {"m": mailbox["id"], "last": now - timedelta(minutes=5)})
        await session.execute(text(
            "INSERT INTO meeting_attendance.outlook_sync_runs (id, mailbox_id, kind, started_at, finished_at, status, "
            "counts, graph_requests) VALUES (gen_random_uuid(), :m, 'RECONCILE', :t, :t, 'DONE', "
            "'{\"created\": 1, \"cancelled\": 2}', 7)"), {"m": mailbox["id"], "t": now - timedelta(minutes=3)})
    response = await ma.call("GET", "/outlook/sync-status", manager)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["sync_on"] is True
    [item] = body["items"]
    assert item["mailbox_id"] == mailbox["id"] and item["state"] == "OK"
    assert item["subscription_id"] == "sub-1" and item["cursor_age_seconds"] == 300
    assert [(r["kind"], r["counts"], r["graph_requests"]) for r in item["reconciliations"]] == [
        ("RECONCILE", {"created": 1, "cancelled": 2}, 7)]
    assert_read_only(graph)
