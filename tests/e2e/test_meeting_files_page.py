"""A meeting's files page in real Chromium against a real `tenet serve` (issue 18): a manager opens it from the
meeting page, uploads a ~20 MB file and the progress bar moves through intermediate values (XMLHttpRequest upload
progress, the "My upload tasks" island under the strict CSP), downloads it (the same bytes), a file over the stated
limit is refused on the page before a byte is sent, the manager deletes the file after the confirmation, and an
administrator restores it from the deleted files; the page in zh-CN."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in

pytestmark = pytest.mark.live_server
BIG = b"%PDF-1.7\n" + bytes(range(256)) * (20 * 1024 * 4) + b"\n%%EOF\n"  # ~20 MB


def _meeting(server, admin: str) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {admin}"}
    start = datetime.now(UTC) + timedelta(days=1)
    meeting = httpx.post(f"{server.url}{BASE}/meetings", headers=headers, json={
        "title": f"Budget review {uuid.uuid4().hex[:6]}", "location": "Room 2", "timezone": "Asia/Shanghai",
        "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat()})
    assert meeting.status_code == 201, meeting.text
    section = httpx.post(f"{server.url}{BASE}/meetings/{meeting.json()['id']}/agenda/sections", headers=headers,
                         json={"title": "Numbers"})
    assert section.status_code == 201, section.text
    item = httpx.post(f"{server.url}{BASE}/agenda/sections/{section.json()['id']}/items", headers=headers,
                      json={"title": "Forecast slides"})
    assert item.status_code == 201, item.text
    return meeting.json()["id"], item.json()["id"]


async def test_a_manager_uploads_downloads_deletes_and_an_administrator_restores(
        live_server, live_admin_token, watched, tmp_path):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Mona Manager", ["MeetingManager"])
    admin = _person(live_server, live_admin_token, "Ada Admin", ["Administrator"])
    meeting_id, _ = _meeting(live_server, live_admin_token)
    files_url = f"/console/meetings/{meeting_id}/files"

    page = await open_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    await _sign_in(page, live_server, manager["email"], f"/console/meetings/{meeting_id}")
    await page.click("#files-link")
    await page.wait_for_url(f"{live_server.url}{files_url}")
    assert await page.text_content("#limit") == "Files up to 200 MB."
    await page.evaluate("""() => {
        window.progressSeen = [];
        new MutationObserver((changes) => changes.forEach((c) => {
            if (c.target.tagName === "PROGRESS") { window.progressSeen.push(Number(c.target.value)); }
        })).observe(document.getElementById("files"), {attributes: true, subtree: true, attributeFilter: ["value"]});
    }""")
    # The upload's pace is a slow link's (Chromium's own throttling), so its progress is seen on the way.
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Network.enable")
    await cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                        "uploadThroughput": 8 * 1024 * 1024})
    await page.set_input_files("#upload-meeting-file", files=[
        {"name": "forecast.pdf", "mimeType": "application/pdf", "buffer": BIG}])
    await page.select_option("#upload-meeting-category", "MATERIAL")
    url_before = page.url
    await page.click("#upload-meeting button[type=submit]")
    row = "#meeting-file-list tr:has-text('forecast.pdf')"
    await page.wait_for_selector(row, timeout=60_000)
    await cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                        "uploadThroughput": -1})
    assert page.url == url_before  # in place: no page load
    seen = await page.evaluate("window.progressSeen")
    assert [v for v in seen if 0 < v < 100], seen  # the bar moved through values on the way
    assert seen == sorted(seen), seen
    assert "20 MB" in await page.text_content(row) and "Mona Manager" in await page.text_content(row)
    await _shoot(page, "meeting-files")

    async with page.expect_download() as waiting:
        await page.click(f"{row} a.download")
    download = await waiting.value
    assert download.suggested_filename == "forecast.pdf"
    saved = tmp_path / "forecast.pdf"
    await download.save_as(saved)
    assert saved.read_bytes() == BIG

    # Over the limit the page states: refused here, before sending (the limit lowered on the page for the test).
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    await page.evaluate("() => { document.getElementById('files').dataset.maxBytes = '1000'; }")
    await page.set_input_files("#upload-meeting-file", files=[
        {"name": "notes.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-" + b"0" * 2000}])
    await page.click("#upload-meeting button[type=submit]")
    await page.wait_for_selector("#upload-message:not([hidden])")
    assert await page.text_content("#upload-message") == "The file is larger than the upload limit."
    assert sent == []
    assert await page.query_selector("#meeting-file-list tr:has-text('notes.pdf')") is None

    await page.click(f"{row} a.delete")
    await page.wait_for_selector("#confirm-delete")
    assert "forecast.pdf" in await page.text_content("#delete-what")
    await page.click("#confirm-delete")
    await page.wait_for_url(f"{live_server.url}{files_url}")
    assert await page.query_selector(row) is None
    assert await page.query_selector("#deleted-link") is None  # restoring is the administrators'

    # The administrator, in Chinese.
    admin_page = await open_page(viewport={"width": 1280, "height": 900}, locale="zh-CN",
                                 extra_http_headers={"Accept-Language": "zh-CN"})
    await _sign_in(admin_page, live_server, admin["email"], files_url)
    assert await admin_page.text_content("#meeting-files-title") == "会议文件"
    assert await admin_page.text_content("#limit") == "文件最大 200 MB。"
    await admin_page.click("#deleted-link")
    deleted_row = "#deleted-list tr:has-text('forecast.pdf')"
    await admin_page.wait_for_selector(deleted_row)
    assert "Mona Manager" in await admin_page.text_content(deleted_row)
    await admin_page.click(f"{deleted_row} button[type=submit]")
    await admin_page.wait_for_selector("#no-deleted")
    await admin_page.click("#back")
    await admin_page.wait_for_selector(row)
    assert "材料" in await admin_page.text_content(row)  # the category, in words
    await _shoot(admin_page, "meeting-files-zh")
    assert violations == []
