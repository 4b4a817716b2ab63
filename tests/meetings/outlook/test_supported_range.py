"""Instants a binding command takes (`sync_from` of a binding or a takeover, an exclusion's original start) lie in the
range Tenet supports (kernel.recurrence, meetings.times: 1900-01-01 to 2200-01-01 UTC), the one rule and code of
meetings (422 MEETING_TIME_INVALID, reason out_of_range), for the API and the console alike (issue 17, the outside
audit's second finding). `9999-12-31T23:59` in Los Angeles is `10000-01-01 07:59Z`: PostgreSQL stored it, and then
nothing could read the binding again (GET 422, the worker's sync failing with `timestamp too large` forever, release
422)."""

from __future__ import annotations

import re
from datetime import date

import httpx
import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.outcomes import code
from tests.web.test_console_http import csrf_of, sign_in

WEEKLY = {"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]}
PAST_9999 = "9999-12-31T23:59"  # a datetime-local value; in America/Los_Angeles it is after the year 9999 in UTC
OUT_OF_RANGE = ["9999-12-31T23:59:00-08:00", "2200-01-01T00:00:00Z", "1899-12-31T23:59:59Z",
                "0001-01-01T00:00:00+09:00"]


async def _post(client: httpx.AsyncClient, path: str, form_page: str, **data: str) -> httpx.Response:
    return await client.post(path, data={"csrf_token": csrf_of(form_page), **data})


def _data_codes(html: str) -> list[str]:
    return re.findall(r'class="error" role="alert" data-code="([A-Z_]+)"', html)


async def _rows(db, sql, **params):
    async with db.read_only() as session:
        return [dict(r) for r in (await session.execute(text(sql), params)).mappings().all()]


@pytest.fixture
async def pool(ma, manager, graph, job_runtime):
    box = graph.add_mailbox("room@contoso.com")
    series = box.create_series("Weekly sync", "2026-03-02T09:00", "2026-03-02T10:00", pattern=WEEKLY,
                               until=date(2026, 4, 27))
    mailbox = (await ma.call("POST", "/outlook/mailboxes", manager, json={"address": "room@contoso.com"})).json()
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox["id"])
    return {"box": box, "mailbox": mailbox, "series": box.id_of(series)}


async def test_the_console_refuses_instants_past_the_supported_range_next_to_the_field_and_stores_nothing(
        client, ma, manager, graph, pool, db, job_runtime):
    await sign_in(client, manager.email)
    page = (await client.get("/console/outlook/candidates?type=seriesMaster")).text
    refused = await _post(client, "/console/outlook/bindings", page, graph_event_id=pool["series"],
                          mailbox_id=pool["mailbox"]["id"], sync_from=PAST_9999)
    assert refused.status_code == 422 and _data_codes(refused.text) == ["MEETING_TIME_INVALID"], refused.text
    assert await _rows(db, "SELECT id FROM meeting_attendance.outlook_bindings") == []
    bound = await _post(client, "/console/outlook/bindings", page, graph_event_id=pool["series"],
                        mailbox_id=pool["mailbox"]["id"], sync_from="")
    assert bound.status_code == 303, bound.text
    path = bound.headers["location"]
    binding = (await client.get(path)).text
    for value in (PAST_9999, "1800-01-01T00:00"):
        excluded = await _post(client, f"{path}/exclude", binding, original_start=value)
        assert excluded.status_code == 422 and _data_codes(excluded.text) == ["MEETING_TIME_INVALID"], value
        assert 'aria-describedby="exclude-error"' in excluded.text  # next to the field it concerns
    taken = await _post(client, f"{path}/takeover", binding, mailbox_id=pool["mailbox"]["id"], graph_event_id="",
                        sync_from=PAST_9999, version=re.search(r'name="version" value="(\d+)"', binding).group(1))
    assert taken.status_code == 422 and _data_codes(taken.text) == ["MEETING_TIME_INVALID"]
    assert await _rows(db, "SELECT * FROM meeting_attendance.outlook_exclusions") == []
    # The binding stays readable and workable: the API reads it, the worker syncs it, it can be released.
    binding_id = path.rsplit("/", 1)[1]
    read = await ma.call("GET", f"/outlook/bindings/{binding_id}", manager)
    assert read.status_code == 200 and read.json()["exclusions"] == [] and read.json()["version"] == 1
    counts = await run_now(tasks.outlook_sync_binding, job_runtime, binding_id=binding_id,
                           mailbox_id=pool["mailbox"]["id"])
    assert counts["created"] == 9, counts
    assert (await ma.call("POST", f"/outlook/bindings/{binding_id}/release", manager)).status_code == 200
    assert_read_only(graph)


@pytest.mark.parametrize("instant", OUT_OF_RANGE)
async def test_the_api_refuses_the_same_instants_with_the_same_code(ma, manager, graph, pool, db, instant):
    create = await ma.call("POST", "/outlook/bindings", manager, json={
        "graph_event_id": pool["series"], "mailbox_id": pool["mailbox"]["id"], "sync_from": instant})
    assert create.status_code == 422 and code(create) == "MEETING_TIME_INVALID", create.text
    assert create.json()["reason"] == "out_of_range" and create.json()["field"] == "sync_from"
    binding = (await ma.call("POST", "/outlook/bindings", manager, json={
        "graph_event_id": pool["series"], "mailbox_id": pool["mailbox"]["id"]})).json()
    path = f"/outlook/bindings/{binding['id']}"
    for method, suffix, body, field in (
            ("POST", "/exclusions", {"original_start": instant}, "original_start"),
            ("DELETE", "/exclusions", {"original_start": instant}, "original_start"),
            ("POST", "/takeover", {"mailbox_id": pool["mailbox"]["id"], "sync_from": instant}, "sync_from")):
        response = await ma.call(method, path + suffix, manager, json=body)
        assert response.status_code == 422 and code(response) == "MEETING_TIME_INVALID", (suffix, response.text)
        assert response.json()["field"] == field
    assert (await ma.call("GET", path, manager)).json() == binding
    assert await _rows(db, "SELECT * FROM meeting_attendance.outlook_exclusions") == []
