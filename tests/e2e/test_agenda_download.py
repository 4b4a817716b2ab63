"""Downloads in real Chromium (issue 11): the browser saves an item file under exactly its Unicode name, from the
RFC 6266 / RFC 5987 Content-Disposition the service sends, against the real server process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.meetings.agenda.conftest import BOUNDARY, PDF, multipart

pytestmark = pytest.mark.live_server

NAME = "会议纪要 v2.pdf"


async def test_a_participant_downloads_a_file_named_in_chinese_and_the_saved_name_is_exactly_that(
        live_server, live_admin_token, browser, tmp_path):
    base = f"{live_server.url}/api/v1/meeting-attendance"
    headers = {"Authorization": f"Bearer {live_admin_token}"}
    start = datetime.now(UTC) + timedelta(hours=2)
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        meeting = (await client.post("/meetings", json={"title": "Minutes", "start_time": start.isoformat(),
                                                        "end_time": (start + timedelta(hours=1)).isoformat()})).json()
        section = (await client.post(f"/meetings/{meeting['id']}/agenda/sections", json={"title": "A"})).json()
        item = (await client.post(f"/agenda/sections/{section['id']}/items", json={"title": "B"})).json()
        uploaded = await client.post(f"/agenda-items/{item['id']}/attachments",
                                     content=multipart([("file", NAME, "application/pdf", PDF)]),
                                     headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
        assert uploaded.status_code == 201, uploaded.text
    context = await browser.new_context(accept_downloads=True, extra_http_headers=headers)
    try:
        page = await context.new_page()
        async with page.expect_download() as waiting:
            # A download navigation aborts the page load; the download itself is what we wait for.
            try:
                await page.goto(f"{live_server.url}{uploaded.json()['download_url']}")
            except Exception as exc:
                assert "ERR_ABORTED" in str(exc) or "Download is starting" in str(exc)
        download = await waiting.value
        assert download.suggested_filename == NAME
        saved = tmp_path / download.suggested_filename
        await download.save_as(saved)
        assert saved.name == NAME and saved.read_bytes() == PDF
    finally:
        await context.close()
