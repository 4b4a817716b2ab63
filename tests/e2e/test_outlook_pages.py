"""The Outlook sync's pages in real Chromium (issues 17, 18), against a real `tenet serve` and `tenet worker`
configured for the Graph emulator (GRAPH_* and GRAPH_CA_BUNDLE, as an operator sets them): a manager adds a mailbox
with the keyboard, the worker's first delta round fills the pool, the manager binds the Outlook series from it and
truncates the local series it replaces on the launch clean-up page, after ticking the confirmation. The runs chart
loads as an image. No page trips the CSP; Tenet writes nothing to the mailbox."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.e2e.test_console_pages import PASSWORD, _person, _shoot, _sign_in
from tests.meetings.outlook.conftest import CLIENT_STATE
from tests.support.live import LiveProcess, LiveServer, service_env

pytestmark = pytest.mark.live_server
BASE = "/api/v1/meeting-attendance"


@pytest.fixture
def outlook_service(graph, migrated_database, tmp_path):
    """A server and a worker of their own (the emulator's credentials change with every test), on a new database."""
    url = migrated_database("outlook_pages")
    env = service_env(DATABASE_URL=url, TENET_DATA_DIR=str(tmp_path), GRAPH_TENANT_ID=graph.tenant_id,
                      GRAPH_CLIENT_ID=graph.client_id, GRAPH_CLIENT_SECRET=graph.client_secret,
                      GRAPH_AUTHORITY_URL=graph.authority_url, GRAPH_BASE_URL=graph.base_url,
                      GRAPH_CA_BUNDLE=graph.ca_bundle, GRAPH_NOTIFICATION_CLIENT_STATE=CLIENT_STATE)
    email = "outlook-admin@example.com"
    subprocess.run([sys.executable, "-m", "tenet", "users", "create-admin", "--email", email, "--password", PASSWORD],
                   env=env, check=True, capture_output=True, timeout=60)
    server = LiveServer(env=env, log_path=tmp_path / "server.log").start()
    worker = LiveProcess(["worker"], env=env, log_path=tmp_path / "worker.log").start()
    try:
        server.wait_ready()
        token = httpx.post(f"{server.url}/api/v1/auth/token",
                           data={"grant_type": "password", "username": email, "password": PASSWORD}).json()
        yield server, token["access_token"], worker
    finally:
        worker.stop()
        server.stop()


def _local_series(server, token: str) -> dict:
    """A series typed in by hand: Mondays 09:00 Los Angeles, from four weeks ago, twelve times."""
    today = datetime.now(UTC).date()
    start = today - timedelta(days=today.weekday() + 28)
    response = httpx.post(f"{server.url}{BASE}/series", headers={"Authorization": f"Bearer {token}"}, json={
        "title": "Weekly sync", "timezone": "America/Los_Angeles", "start_date": start.isoformat(),
        "start_local_time": "09:00", "duration_minutes": 60, "rrule": "FREQ=WEEKLY;BYDAY=MO;COUNT=12"})
    assert response.status_code == 201, response.text
    return response.json()["series"]


async def test_a_manager_adds_a_mailbox_binds_from_the_pool_and_truncates_the_local_series(
        graph, outlook_service, watched):
    server, token, worker = outlook_service
    open_page, violations = watched
    box = graph.add_mailbox("room@contoso.com")
    monday = datetime.now(UTC).date() + timedelta(days=7 - datetime.now(UTC).weekday())
    box.create_series("Weekly sync", f"{monday}T09:00", f"{monday}T10:00",
                      pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                      until=monday + timedelta(days=70), zone="Pacific Standard Time")
    manager = _person(server, token, "Mona Manager", ["MeetingManager"])
    local = _local_series(server, token)

    page = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(page, server, manager["email"], "/console/outlook")
    await page.focus("#address")
    await page.keyboard.type("room@contoso.com")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#mailboxes [data-state='OK']")
    await _shoot(page, "outlook")
    # The worker's first delta round (deferred when the mailbox was added) fills the pool.
    deadline = time.monotonic() + 30
    while True:
        await page.goto(f"{server.url}/console/outlook/candidates?type=seriesMaster")
        if await page.query_selector("#candidates form.bind") or time.monotonic() > deadline:
            break
        await page.wait_for_timeout(500)
    assert await page.query_selector("#candidates form.bind"), worker.output[-2000:]
    await page.click("#candidates form.bind button")
    await page.wait_for_selector("#binding")
    assert "room@contoso.com" in await page.text_content("#source")
    # The worker's first sync of the binding writes the series' meetings (one unit of work per batch): the binding
    # turns ACTIVE and keeps them.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if await page.query_selector("#binding [data-status='ACTIVE']") and \
                int(await page.text_content("#linked-meetings")) >= 10:
            break
        await page.wait_for_timeout(500)
        await page.reload()
    assert await page.query_selector("#binding [data-status='ACTIVE']"), worker.output[-2000:]
    assert int(await page.text_content("#linked-meetings")) >= 10, worker.output[-2000:]

    await page.goto(f"{server.url}/console/outlook/cleanup")
    article = f"#series-{local['id']}"
    await page.wait_for_selector(article)
    assert "same subject" in await page.text_content(f"{article} table")
    await page.click(f"{article} button:text('Truncate')")  # the browser wants the box ticked first
    assert await page.query_selector("#truncated") is None
    await page.focus(f"{article} input[name=confirm]")
    await page.keyboard.press("Space")
    await page.click(f"{article} button:text('Truncate')")
    await page.wait_for_selector("#truncated")
    assert await page.query_selector(article) is None
    await _shoot(page, "outlook-cleanup")

    await page.goto(f"{server.url}/console/outlook")
    chart = await page.wait_for_selector("img.chart")
    assert await chart.evaluate("img => img.complete && img.naturalWidth > 0")
    assert violations == []
    assert graph.writes_to_events() == [] and graph.requests_without_immutable_id() == []
    async with httpx.AsyncClient(base_url=server.url) as api:
        series = await api.get(f"{BASE}/series/{local['id']}", headers={"Authorization": f"Bearer {token}"})
    assert "UNTIL=" in series.json()["rrule"]
