"""The Outlook sync in the console (issues 17, 18), over HTTP against the Graph emulator: a manager adds mailboxes
(one Exchange refuses: shown with Graph's code, request-id and the hint), sees the pool after a delta round, binds a
series from it, excludes and includes an occurrence, meets a 412 on a stale takeover, releases; the runs chart is an
SVG under its own policy; the launch clean-up truncates a local series only once confirmed. Refusals come back in
words next to their form; people without meeting:outlook:manage get no link and a 403; with the credentials unset
the pages say the sync is off."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import httpx
import pytest

from tenet.app import create_app
from tenet.iam.permissions import Role
from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tenet.web.charts import CHART_POLICY
from tests.conftest import test_settings
from tests.meetings.outlook.conftest import assert_read_only
from tests.support.invariants import rules_hold
from tests.web.test_console_http import csrf_of, sign_in

LAUNCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _launch(clock, graph):
    clock.set(LAUNCH)
    graph.state.set_now(LAUNCH)


async def _page(client: httpx.AsyncClient, path: str, status: int = 200) -> httpx.Response:
    response = await client.get(path)
    assert response.status_code == status, response.text
    return response


async def _post(client: httpx.AsyncClient, path: str, form_page: str, **data: str) -> httpx.Response:
    return await client.post(path, data={"csrf_token": csrf_of(form_page), **data})


def _data_codes(html: str) -> list[str]:
    return re.findall(r'class="error" role="alert" data-code="([A-Z_]+)"', html)


async def test_a_manager_adds_mailboxes_binds_a_series_and_works_the_binding(client, manager, graph, db,
                                                                             job_runtime):
    box = graph.add_mailbox("room@contoso.com")
    series = box.create_series("Weekly sync", "2026-01-12T09:00", "2026-01-12T10:00",
                               pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                               until=date(2026, 6, 1))
    graph.deny(graph.add_mailbox("denied@contoso.com"))
    await sign_in(client, manager.email)
    home = await _page(client, "/console")
    assert 'href="/console/outlook"' in home.text
    overview = await _page(client, "/console/outlook")
    assert "No mailbox is a source yet." in overview.text
    added = await _post(client, "/console/outlook/mailboxes", overview.text, address=" Room@Contoso.com ",
                        kind="SHARED")
    assert added.status_code == 303 and added.headers["location"] == "/console/outlook"
    twice = await _post(client, "/console/outlook/mailboxes", overview.text, address="room@contoso.com")
    assert twice.status_code == 409 and _data_codes(twice.text) == ["OUTLOOK_MAILBOX_EXISTS"]
    assert 'value="room@contoso.com"' in twice.text  # what was typed stays in the field
    bad = await _post(client, "/console/outlook/mailboxes", overview.text, address="not an address")
    assert bad.status_code == 422 and _data_codes(bad.text) == ["OUTLOOK_MAILBOX_ADDRESS_INVALID"]
    await _post(client, "/console/outlook/mailboxes", overview.text, address="denied@contoso.com")
    overview = await _page(client, "/console/outlook")
    assert overview.text.count('data-state="OK"') == 1 and 'data-state="ACCESS_DENIED"' in overview.text
    assert 'data-code="ErrorAccessDenied"' in overview.text and "RBAC for Applications" in overview.text

    mailbox_id = re.search(r'id="mailbox-([0-9a-f-]{36})">\s*<th scope="row">room@', overview.text).group(1)
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox_id)
    pool = await _page(client, "/console/outlook/candidates?type=seriesMaster")
    event_id = box.id_of(series, immutable=True)
    assert f'data-event="{event_id}"' in pool.text and "Weekly sync" in pool.text
    bound = await _post(client, "/console/outlook/bindings", pool.text, graph_event_id=event_id,
                        mailbox_id=mailbox_id, sync_from="")
    assert bound.status_code == 303, bound.text
    binding_path = bound.headers["location"]
    again = await _post(client, "/console/outlook/bindings", pool.text, graph_event_id=event_id,
                        mailbox_id=mailbox_id, sync_from="")
    assert again.status_code == 409 and _data_codes(again.text) == ["OUTLOOK_EVENT_ALREADY_BOUND"]
    listed = await _page(client, "/console/outlook/bindings?status=PENDING")
    assert binding_path.rsplit("/", 1)[1] in listed.text

    binding = await _page(client, binding_path)
    assert 'data-status="PENDING"' in binding.text and "room@contoso.com" in binding.text
    excluded = await _post(client, f"{binding_path}/exclude", binding.text, original_start="2026-01-26T09:00")
    assert excluded.status_code == 303, excluded.text
    binding = await _page(client, binding_path)
    assert "Include again" in binding.text
    twice = await _post(client, f"{binding_path}/exclude", binding.text, original_start="2026-01-26T09:00")
    assert twice.status_code == 409 and _data_codes(twice.text) == ["OUTLOOK_EXCLUSION_EXISTS"]
    assert 'aria-describedby="exclude-error"' in twice.text
    start = re.search(r'name="original_start" value="([^"]+)"', binding.text).group(1)
    included = await _post(client, f"{binding_path}/include", binding.text, original_start=start)
    assert included.status_code == 303
    stale = await _post(client, f"{binding_path}/takeover", binding.text, mailbox_id=mailbox_id, version="99")
    assert stale.status_code == 412 and _data_codes(stale.text) == ["PRECONDITION_FAILED"]
    released = await _post(client, f"{binding_path}/release", binding.text)
    assert released.status_code == 303
    binding = await _page(client, binding_path)
    assert 'data-status="RELEASED"' in binding.text and 'id="takeover"' not in binding.text

    chart = await _page(client, f"/console/outlook/mailboxes/{mailbox_id}/runs.svg")
    assert chart.headers["content-type"] == "image/svg+xml"
    assert chart.headers["content-security-policy"] == CHART_POLICY and chart.text.lstrip().startswith("<?xml")
    assert "<svg" in chart.text and "http://" not in chart.text.split("<svg", 1)[1].split(">", 1)[0].replace(
        "http://www.w3.org", "")
    disabled = await _post(client, f"/console/outlook/mailboxes/{mailbox_id}/disable", overview.text)
    assert disabled.status_code == 303
    overview = await _page(client, "/console/outlook")
    assert f'id="mailbox-{mailbox_id}"' not in overview.text  # sync-status lists live mailboxes only
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_the_launch_clean_up_truncates_only_once_confirmed(client, ma, manager, graph, clock, db):
    clock.set(datetime(2025, 11, 20, tzinfo=UTC))
    made = await ma.call("POST", "/series", manager, json={
        "title": "Weekly sync", "timezone": "America/Los_Angeles", "start_date": "2025-12-01",
        "start_local_time": "09:00", "duration_minutes": 60, "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=12"})
    series_id = made.json()["series"]["id"]
    clock.set(LAUNCH)
    await sign_in(client, manager.email)
    page = await _page(client, "/console/outlook/cleanup")
    assert f'id="series-{series_id}"' in page.text
    assert re.search(r'data-step="truncate_local_series" data-done="no"', page.text)
    unconfirmed = await _post(client, f"/console/outlook/cleanup/series/{series_id}/truncate", page.text,
                              version=str(made.json()["series"]["version"]))
    assert unconfirmed.status_code == 422 and _data_codes(unconfirmed.text) == ["VALIDATION_FAILED"]
    assert f'aria-describedby="truncate-error-{series_id}"' in unconfirmed.text
    stale = await _post(client, f"/console/outlook/cleanup/series/{series_id}/truncate", page.text, confirm="yes",
                        version="99")
    assert stale.status_code == 412
    done = await _post(client, f"/console/outlook/cleanup/series/{series_id}/truncate", page.text, confirm="yes",
                       version=str(made.json()["series"]["version"]))
    assert done.status_code == 303
    after = await client.get(done.headers["location"])
    assert 'id="truncated"' in after.text and "7 meetings that had not started were deleted" in after.text
    assert 'id="nothing-to-clean"' in after.text
    assert re.search(r'data-step="truncate_local_series" data-done="yes"', after.text)
    series = (await ma.call("GET", f"/series/{series_id}", manager)).json()
    assert series["rrule"] == "FREQ=WEEKLY;BYDAY=MO;UNTIL=20260104"
    assert_read_only(graph)
    await rules_hold(db, "MA-")


async def test_without_the_permission_there_is_no_link_and_no_page(client, users):
    employee = await users.make(roles=[Role.EMPLOYEE])
    await sign_in(client, employee.email)
    home = await _page(client, "/console")
    assert 'href="/console/outlook"' not in home.text
    for path in ("/console/outlook", "/console/outlook/candidates", "/console/outlook/bindings",
                 "/console/outlook/cleanup"):
        refused = await client.get(path)
        assert refused.status_code == 403 and 'data-code="PERMISSION_DENIED"' in refused.text, path
    forged = await client.post("/console/outlook/mailboxes", data={"csrf_token": csrf_of(home.text),
                                                                   "address": "room@contoso.com"})
    assert forged.status_code == 403


async def test_with_the_credentials_unset_the_pages_say_the_sync_is_off(db, clock, tmp_path, users):
    app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
        manager = await users.make(roles=[Role.MEETING_MANAGER])
        await sign_in(client, manager.email)
        for path in ("/console/outlook", "/console/outlook/candidates", "/console/outlook/bindings"):
            page = await _page(client, path)
            assert 'id="sync-off"' in page.text and "GRAPH_CLIENT_SECRET" in page.text
        page = await _page(client, "/console/outlook")
        refused = await _post(client, "/console/outlook/mailboxes", page.text, address="room@contoso.com")
        assert refused.status_code == 409 and _data_codes(refused.text) == ["OUTLOOK_SYNC_OFF"]
        cleanup = await client.get("/console/outlook/cleanup")
        assert cleanup.status_code == 409 and "OUTLOOK_SYNC_OFF" in cleanup.text


async def test_the_pages_speak_chinese(client, users, graph):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    await sign_in(client, manager.email, headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    page = await client.get("/console/outlook", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    assert "添加邮箱" in page.text and "源邮箱" in page.text and 'lang="zh-CN"' in page.text


async def test_runs_and_hints_are_said_in_chinese_and_graphs_code_is_kept(client, manager, graph, job_runtime):
    """A run's kind and status and the hint Tenet stored (in English, as the API answers it) are said in the viewer's
    language; Graph's own code and request-id stay as Graph gave them."""
    graph.add_mailbox("room@contoso.com")
    graph.deny(graph.add_mailbox("denied@contoso.com"))
    zh = {"Accept-Language": "zh-CN,zh;q=0.9"}
    await sign_in(client, manager.email, headers=zh)
    client.headers.update(zh)
    overview = await _page(client, "/console/outlook")
    for address in ("room@contoso.com", "denied@contoso.com"):
        await _post(client, "/console/outlook/mailboxes", overview.text, address=address)
    overview = await _page(client, "/console/outlook")
    mailbox_id = re.search(r'id="mailbox-([0-9a-f-]{36})">\s*<th scope="row">room@', overview.text).group(1)
    await run_now(tasks.outlook_delta_round, job_runtime, mailbox_id=mailbox_id)
    overview = await _page(client, "/console/outlook")
    assert 'data-code="ErrorAccessDenied"' in overview.text  # Graph's code, as Graph gave it
    hint = re.search(r'<div class="muted hint">([^<]*)</div>', overview.text).group(1)
    assert hint.startswith("Exchange 拒绝本应用访问此邮箱") and "完整重新同步" in hint
    cells = re.findall(r'<td data-(?:kind|status)="([A-Z]+)">([^<]*)', overview.text)
    assert cells and all(re.search(r"[\u4e00-\u9fff]", said) for _, said in cells), cells
    assert ("DONE", "已完成") in cells
