"""Bindings and exclusions (spec layers 3, 4) through the routes, on a candidate pool the worker filled from the
emulator: one live binding per event (MA-INV-30), the forced takeover switching administrator, mailbox and sync_from
together (MA-INV-35's lock order), the release, exclusions of a bound series; each audited (MA-INV-40)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from tenet.iam.permissions import Role
from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _pooled(ma, manager, graph, job_runtime, address):
    box = graph.add_mailbox(address)
    single = box.create_event("Board", "2026-01-12T09:00", "2026-01-12T10:00")
    series = box.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00",
                               pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                               until=date(2026, 6, 1))
    mailbox = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": address})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox["id"])
    return {"box": box, "mailbox": mailbox, "single": box.id_of(single, immutable=True),
            "series": box.id_of(series, immutable=True)}


@pytest.fixture
async def pool(ma, manager, graph, job_runtime):
    return await _pooled(ma, manager, graph, job_runtime, "room@contoso.com")


async def _bind(ma, user, pool, event="series", **extra):
    return await ma.call("POST", "/outlook/bindings", user,
                         json={"graph_event_id": pool[event], "mailbox_id": pool["mailbox"]["id"], **extra})


@pytest.mark.invariant("MA-INV-30")
@pytest.mark.invariant("MA-INV-40")
async def test_one_live_binding_per_event_and_the_pool_shows_it_managed(ma, manager, graph, pool, db):
    response = await _bind(ma, manager, pool)
    assert response.status_code == 201, response.text
    binding = response.json()
    assert binding["kind"] == "SERIES" and binding["status"] == "PENDING" and binding["subject"] == "Weekly sync"
    assert binding["sync_from"] == ma.clock.now().isoformat().replace("+00:00", "Z")
    again = await _bind(ma, manager, pool)
    assert again.status_code == 409 and code(again) == "OUTLOOK_EVENT_ALREADY_BOUND"
    assert again.json()["binding_id"] == binding["id"]
    items = (await ma.call("GET", "/outlook/candidates", manager)).json()["items"]
    managed = {i["graph_event_id"]: (i["managed"], i["binding_id"]) for i in items}
    assert managed[pool["series"]] == (True, binding["id"]) and managed[pool["single"]] == (False, None)
    single = await _bind(ma, manager, pool, "single")
    assert single.status_code == 201 and single.json()["kind"] == "SINGLE"
    unknown = await ma.call("POST", "/outlook/bindings", manager,
                            json={"graph_event_id": "AAMk-nope", "mailbox_id": pool["mailbox"]["id"]})
    assert unknown.status_code == 404 and code(unknown) == "OUTLOOK_CANDIDATE_NOT_FOUND"
    listed = (await ma.call("GET", "/outlook/bindings", manager)).json()["items"]
    assert {b["id"] for b in listed} == {binding["id"], single.json()["id"]}
    audit = await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_BINDING"})
    assert [a["action"] for a in audit.json()["items"]].count("OUTLOOK_BINDING_CREATED") == 2
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-40")
async def test_takeover_switches_administrator_mailbox_and_sync_from_together(ma, manager, users, graph, pool, db,
                                                                              job_runtime):
    binding = (await _bind(ma, manager, pool)).json()
    other = await _pooled(ma, manager, graph, job_runtime, "assistant@contoso.com")
    admin = await users.make(roles=[Role.ADMINISTRATOR])
    ma.clock.advance(timedelta(hours=2))
    stale = await ma.call("POST", f"/outlook/bindings/{binding['id']}/takeover", admin,
                          json={"mailbox_id": other["mailbox"]["id"]}, headers={"If-Match": '"9"'})
    assert stale.status_code == 412
    response = await ma.call("POST", f"/outlook/bindings/{binding['id']}/takeover", admin,
                             json={"mailbox_id": other["mailbox"]["id"], "graph_event_id": other["series"]})
    assert response.status_code == 200, response.text
    after = response.json()
    assert after["mailbox_id"] == other["mailbox"]["id"] and after["bound_by_id"] == str(admin.id)
    assert after["graph_event_id"] == other["series"] and after["version"] == binding["version"] + 1
    assert after["sync_from"] == ma.clock.now().isoformat().replace("+00:00", "Z")
    audit = (await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_BINDING"})).json()["items"]
    [taken] = [a for a in audit if a["action"] == "OUTLOOK_BINDING_TAKEN_OVER"]
    assert taken["changes"]["before"]["mailbox_id"] == pool["mailbox"]["id"]
    assert_read_only(graph)
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-40")
async def test_exclusions_of_a_bound_series_and_release(ma, manager, graph, pool, db):
    binding = (await _bind(ma, manager, pool)).json()
    occurrence = {"original_start": "2026-03-09T17:00:00Z"}
    path = f"/outlook/bindings/{binding['id']}"
    added = await ma.call("POST", path + "/exclusions", manager, json=occurrence)
    assert added.status_code == 201 and added.json()["exclusions"] == ["2026-03-09T17:00:00Z"]
    twice = await ma.call("POST", path + "/exclusions", manager, json=occurrence)
    assert twice.status_code == 409 and code(twice) == "OUTLOOK_EXCLUSION_EXISTS"
    assert (await ma.call("DELETE", path + "/exclusions", manager, json=occurrence)).status_code == 204
    gone = await ma.call("DELETE", path + "/exclusions", manager, json=occurrence)
    assert gone.status_code == 404 and code(gone) == "OUTLOOK_EXCLUSION_NOT_FOUND"
    single = (await _bind(ma, manager, pool, "single")).json()
    not_series = await ma.call("POST", f"/outlook/bindings/{single['id']}/exclusions", manager, json=occurrence)
    assert not_series.status_code == 409 and code(not_series) == "OUTLOOK_EXCLUSION_NOT_SERIES"
    released = await ma.call("POST", path + "/release", manager)
    assert released.status_code == 200 and released.json()["status"] == "RELEASED"
    again = await ma.call("POST", path + "/release", manager)
    assert again.status_code == 409 and code(again) == "OUTLOOK_BINDING_RELEASED"
    assert (await _bind(ma, manager, pool)).status_code == 201  # the event may be bound again
    actions = [a["action"] for a in (await ma.call("GET", "/audit-logs", manager,
                                                   params={"resource": "OUTLOOK_BINDING"})).json()["items"]]
    for action in ("OUTLOOK_EXCLUSION_ADDED", "OUTLOOK_EXCLUSION_REMOVED", "OUTLOOK_BINDING_RELEASED"):
        assert action in actions
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_employees_cannot_bind(ma, users, pool):
    employee = await users.make(roles=[Role.EMPLOYEE])
    assert (await _bind(ma, employee, pool)).status_code == 403
