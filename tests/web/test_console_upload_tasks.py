""""My upload tasks" in the console (issue 18): the person's tasks as `GET /me/upload-tasks` answers them, an upload
in place (the script's XMLHttpRequest with the CSRF header answers the re-read list; the plain form with its field
comes back to the page), the state after it as the API reports it, and refusals: no CSRF, no task, a bad id."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, csrf_of, page_csrf, sign_in

PDF = b"%PDF-1.7\n" + b"%\xe2\xe3\xcf\xd3\n" + b"1 0 obj << /Type /Catalog >> endobj\n" * 40 + b"%%EOF\n"


@pytest.fixture
async def people(users):
    manager = await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")
    alice = await users.make(roles=[Role.EMPLOYEE], display_name="Alice Attendee")
    stranger = await users.make(roles=[Role.EMPLOYEE], display_name="Stan Stranger")
    return manager, alice, stranger


async def _ok(response, status=201):
    assert response.status_code == status, response.text
    return response.json()


async def _tasks(client, manager, alice, clock, *titles: str) -> tuple[str, list[str]]:
    start = clock.now() + timedelta(hours=2)
    meeting = await _ok(await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Board meeting", "timezone": "Asia/Shanghai", "location": "Room 1", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat(), "required_attendee_ids": [str(alice.id)]}))
    section = await _ok(await client.post(f"{BASE}/meetings/{meeting['id']}/agenda/sections",
                                          headers=manager.headers, json={"title": "Numbers"}))
    items = []
    for n, title in enumerate(titles):
        item = await _ok(await client.post(f"{BASE}/agenda/sections/{section['id']}/items",
                                           headers=manager.headers, json={"title": title}))
        await _ok(await client.post(f"{BASE}/agenda/items/{item['id']}/upload-tasks", headers=manager.headers,
                                    json={"assignee_user_ids": [str(alice.id)],
                                          "due_at": (start - timedelta(hours=1, minutes=n)).isoformat()}))
        items.append(item["id"])
    return meeting["id"], items


async def _api_statuses(client, alice) -> dict[str, str]:
    mine = await _ok(await client.get(f"{BASE}/me/upload-tasks", headers=alice.headers), 200)
    return {t["agenda_item"]["title"]: t["status"] for t in mine["items"]}


def _file(name: str = "slides.pdf") -> dict:
    return {"file": (name, PDF, "application/pdf")}


async def test_the_page_lists_what_is_due_and_uploads_in_place(client, people, clock):
    manager, alice, _ = people
    meeting_id, (first, second) = await _tasks(client, manager, alice, clock, "Quarterly numbers", "Hiring plan")
    await sign_in(client, alice.email)
    page = await client.get("/console/upload-tasks")
    assert page.status_code == 200
    assert page.text.index("Hiring plan") < page.text.index("Quarterly numbers")  # soonest due first, as the API
    assert page.text.count('data-status="PENDING"') == 2 and page.text.count('class="upload"') == 2
    assert f'action="/console/agenda-items/{first}/upload"' in page.text
    assert '<script src="/static/upload-tasks.js" defer></script>' in page.text
    assert "<script>" not in page.text and "script-src 'self'" in page.headers["content-security-policy"]
    assert 'href="/console/upload-tasks" aria-current="page"' in page.text
    token = csrf_of(page.text)

    # The script's way: the CSRF header, the file alone; the answer is the list as it is now.
    xhr = await client.post(f"/console/agenda-items/{first}/upload", files=_file(),
                            headers={"X-CSRF-Token": token})
    assert xhr.status_code == 200, xhr.text
    assert 'id="task-list"' in xhr.text and "<html" not in xhr.text
    assert xhr.text.count('data-status="UPLOADED"') == 1 and xhr.text.count('class="upload"') == 1
    assert await _api_statuses(client, alice) == {"Quarterly numbers": "UPLOADED", "Hiring plan": "PENDING"}

    # Without the script: the form's field, then back to the page.
    plain = await client.post(f"/console/agenda-items/{second}/upload", data={"csrf_token": token},
                              files=_file("plan.pdf"))
    assert plain.status_code == 303 and plain.headers["location"] == "/console/upload-tasks"
    assert await _api_statuses(client, alice) == {"Quarterly numbers": "UPLOADED", "Hiring plan": "UPLOADED"}
    after = await client.get("/console/upload-tasks")
    assert after.text.count('data-status="UPLOADED"') == 2 and 'class="upload"' not in after.text
    agenda = await _ok(await client.get(f"{BASE}/meetings/{meeting_id}/agenda", headers=manager.headers), 200)
    files = [a["filename"] for s in agenda["sections"] for i in s["items"] for a in i["attachments"]]
    assert sorted(files) == ["plan.pdf", "slides.pdf"]


async def test_a_forged_or_refused_upload_stores_nothing(client, people, clock):
    manager, alice, _ = people
    _, (item,) = await _tasks(client, manager, alice, clock, "Quarterly numbers")
    await sign_in(client, alice.email)
    for headers, data in (({"X-CSRF-Token": "0" * 64}, {}), ({}, {}), ({}, {"csrf_token": "0" * 64})):
        forged = await client.post(f"/console/agenda-items/{item}/upload", files=_file(), data=data, headers=headers)
        assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
    assert await _api_statuses(client, alice) == {"Quarterly numbers": "PENDING"}
    token = await page_csrf(client, "/console/upload-tasks")
    wrong = await client.post(f"/console/agenda-items/{item}/upload", headers={"X-CSRF-Token": token},
                              files={"file": ("tool.exe", b"MZ" + b"0" * 500, "application/x-msdownload")})
    assert wrong.status_code == 415 and 'data-code="ATTACHMENT_MIME_NOT_ALLOWED"' in wrong.text
    assert "This type of file is not accepted." in wrong.text
    assert await _api_statuses(client, alice) == {"Quarterly numbers": "PENDING"}


async def test_someone_without_the_task_is_refused_in_words(client, people, clock):
    manager, alice, stranger = people
    _, (item,) = await _tasks(client, manager, alice, clock, "Quarterly numbers")
    await sign_in(client, stranger.email)
    page = await client.get("/console/upload-tasks")
    assert 'id="no-tasks"' in page.text
    refused = await client.post(f"/console/agenda-items/{item}/upload", files=_file(),
                                headers={"X-CSRF-Token": await page_csrf(client, "/console/upload-tasks")})
    assert refused.status_code in (403, 404) and 'id="error"' in refused.text
    assert refused.headers["content-type"].startswith("text/html")
    bad = await client.post("/console/agenda-items/not-an-id/upload", files=_file(),
                            headers={"X-CSRF-Token": csrf_of(page.text)})
    assert bad.status_code == 422 and 'data-code="VALIDATION_FAILED"' in bad.text


async def test_without_a_session_the_page_sends_to_sign_in(client):
    response = await client.get("/console/upload-tasks")
    assert response.status_code == 303 and response.headers["location"].endswith("next=/console/upload-tasks")


async def test_the_script_is_served_by_tenet(client):
    script = await client.get("/static/upload-tasks.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "XMLHttpRequest" in script.text and "upload.addEventListener(\"progress\"" in script.text
