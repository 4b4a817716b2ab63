""""My upload tasks" in real Chromium against a real `tenet serve` (issue 18): an attendee signs in, sees the task
that is due, picks a file and uploads it in place; the progress bar moves (XMLHttpRequest upload progress, the
script served by Tenet under the strict CSP), and the task shows as uploaded without a page load, as the API says;
in English and in Chinese (the refusal and the task's state read in the person's language)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in, _token

pytestmark = pytest.mark.live_server
PDF = b"%PDF-1.7\n" + b"0" * (3 * 1024 * 1024) + b"\n%%EOF\n"


def _task(server, admin: str, attendee: dict) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {admin}"}
    start = datetime.now(UTC) + timedelta(days=1)
    meeting = httpx.post(f"{server.url}{BASE}/meetings", headers=headers, json={
        "title": f"Budget review {uuid.uuid4().hex[:6]}", "location": "Room 2", "timezone": "Asia/Shanghai",
        "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat(),
        "required_attendee_ids": [attendee["id"]]})
    assert meeting.status_code == 201, meeting.text
    section = httpx.post(f"{server.url}{BASE}/meetings/{meeting.json()['id']}/agenda/sections", headers=headers,
                         json={"title": "Numbers"})
    assert section.status_code == 201, section.text
    item = httpx.post(f"{server.url}{BASE}/agenda/sections/{section.json()['id']}/items", headers=headers,
                      json={"title": "Forecast slides"})
    assert item.status_code == 201, item.text
    task = httpx.post(f"{server.url}{BASE}/agenda/items/{item.json()['id']}/upload-tasks", headers=headers,
                      json={"assignee_user_ids": [attendee["id"]], "due_at": start.isoformat()})
    assert task.status_code == 201, task.text
    return item.json()["id"], task.json()["items"][0]["id"]


def _statuses(server, email: str) -> dict[str, str]:
    mine = httpx.get(f"{server.url}{BASE}/me/upload-tasks",
                     headers={"Authorization": f"Bearer {_token(server, email)}"})
    mine.raise_for_status()
    return {t["id"]: t["status"] for t in mine.json()["items"]}


# What the attendee reads, in each language (the zh-CN catalog's words).
WORDS = {
    "en-US": {"title": "My upload tasks", "to_upload": "To upload", "refused": "This type of file is not accepted.",
              "uploaded": "Uploaded ", "shot": "upload-tasks"},
    "zh-CN": {"title": "我的上传任务", "to_upload": "待上传", "refused": "不接受此类型的文件。", "uploaded": "已于 ",
              "shot": "upload-tasks-zh"},
}


@pytest.mark.parametrize("locale", sorted(WORDS))
async def test_an_attendee_uploads_in_place_with_a_progress_bar(live_server, live_admin_token, watched, locale):
    words = WORDS[locale]
    open_page, violations = watched
    attendee = _person(live_server, live_admin_token, "Ada Attendee", ["Employee"])
    _, task_id = _task(live_server, live_admin_token, attendee)

    page = await open_page(viewport={"width": 1280, "height": 900}, locale=locale)
    await _sign_in(page, live_server, attendee["email"], "/console/upload-tasks")
    row = f"#task-{task_id}"
    assert await page.text_content("h1") == words["title"]
    assert await page.get_attribute(row, "data-status") == "PENDING"
    assert "Forecast slides" in await page.text_content(row)
    assert (await page.text_content(f"{row} .state")).strip() == words["to_upload"]
    await _shoot(page, words["shot"])
    # Every value the progress bar takes, recorded as the script sets it.
    await page.evaluate("""() => {
        window.progressSeen = [];
        new MutationObserver((changes) => changes.forEach((c) => {
            if (c.target.tagName === "PROGRESS") { window.progressSeen.push(Number(c.target.value)); }
        })).observe(document.getElementById("tasks"), {attributes: true, subtree: true, attributeFilter: ["value"]});
    }""")
    # A refused file: the refusal's sentence above the list, the task still to upload.
    await page.set_input_files(f"{row} input[type=file]", files=[
        {"name": "tool.exe", "mimeType": "application/x-msdownload", "buffer": b"MZ" + b"0" * 500}])
    await page.click(f"{row} button[type=submit]")
    await page.wait_for_selector("#upload-message:not([hidden])")
    assert await page.text_content("#upload-message") == words["refused"]
    assert await page.get_attribute(row, "data-status") == "PENDING"
    url_before = page.url
    await page.set_input_files(f"{row} input[type=file]", files=[
        {"name": "forecast.pdf", "mimeType": "application/pdf", "buffer": PDF}])
    await page.click(f"{row} button[type=submit]")
    await page.wait_for_selector(f"{row}[data-status=UPLOADED]", timeout=20_000)
    assert page.url == url_before  # in place: no page load
    seen = await page.evaluate("window.progressSeen")
    assert seen and max(seen) == 100, seen
    assert await page.query_selector(f"{row} form.upload") is None
    assert (await page.text_content(f"{row} .state")).strip().startswith(words["uploaded"])
    assert await page.is_hidden("#upload-message")  # the earlier refusal is gone

    assert _statuses(live_server, attendee["email"]) == {task_id: "UPLOADED"}
    assert violations == []
