"""A meeting's files in the console (issue 18): the meeting's and each agenda item's files as the agenda's query
shows them, upload (the island's XMLHttpRequest with the CSRF header answers the re-read list; the plain form with
its field comes back to the page), download, delete after a confirmation, and the administrators' deleted files
with restore; the role table (who sees, who may upload, delete, restore) both ways: what the page offers, and the
refusal of a forged request; CSRF; the upload limit stated on the page and enforced by the server in words."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import pytest

from tenet.app import create_app
from tenet.iam.permissions import Role
from tenet.web import i18n
from tests.conftest import test_settings
from tests.web.test_console_http import BASE, csrf_of, sign_in

PDF = b"%PDF-1.7\n" + b"%\xe2\xe3\xcf\xd3\n" + b"1 0 obj << /Type /Catalog >> endobj\n" * 40 + b"%%EOF\n"


def _file(name: str = "slides.pdf", data: bytes = PDF) -> dict:
    return {"file": (name, data, "application/pdf")}


async def _ok(response: httpx.Response, status: int = 201) -> dict:
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture
async def people(users):
    return {
        "admin": await users.make(roles=[Role.ADMINISTRATOR], display_name="Ada Admin"),
        "manager": await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager"),
        "tasked": await users.make(roles=[Role.EMPLOYEE], display_name="Tess Tasked"),
        "attendee": await users.make(roles=[Role.EMPLOYEE], display_name="Axel Attendee"),
        "leader": await users.make(roles=[Role.LEADER], display_name="Lea Leader"),
        "stranger": await users.make(roles=[Role.EMPLOYEE], display_name="Stan Stranger"),
    }


@pytest.fixture
def browsers(app):
    """One signed-in browser (its own cookie jar) per person."""

    @asynccontextmanager
    async def open_as(person, language: str = "en") -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver",
                                     headers={"Accept-Language": language}) as browser:
            signed = await sign_in(browser, person.email)
            assert signed.status_code == 303, signed.text
            yield browser

    return open_as


@pytest.fixture
async def world(client, people, clock):
    """A meeting of the manager's: the tasked employee holds an upload task on the item, the attendee none, the
    leader is required too; one meeting file (the manager's) and one item file (the tasked employee's)."""
    manager, tasked = people["manager"], people["tasked"]
    start = clock.now() + timedelta(hours=2)
    meeting = await _ok(await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Board meeting", "timezone": "Asia/Shanghai", "location": "Room 1", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat(),
        "required_attendee_ids": [str(people[p].id) for p in ("tasked", "attendee", "leader")]}))
    section = await _ok(await client.post(f"{BASE}/meetings/{meeting['id']}/agenda/sections",
                                          headers=manager.headers, json={"title": "Numbers"}))
    item = await _ok(await client.post(f"{BASE}/agenda/sections/{section['id']}/items", headers=manager.headers,
                                       json={"title": "Quarterly numbers"}))
    await _ok(await client.post(f"{BASE}/agenda/items/{item['id']}/upload-tasks", headers=manager.headers,
                                json={"assignee_user_ids": [str(tasked.id)]}))
    minutes = await _ok(await client.post(f"{BASE}/meetings/{meeting['id']}/attachments", headers=manager.headers,
                                          files=_file("minutes.pdf"), data={"category": "MINUTES"}))
    slides = await _ok(await client.post(f"{BASE}/agenda-items/{item['id']}/attachments", headers=tasked.headers,
                                         files=_file("slides.pdf")))
    return {"meeting": meeting["id"], "item": item["id"], "minutes": minutes["id"], "slides": slides["id"]}


async def _api_files(client, manager, meeting_id: str) -> list[str]:
    agenda = await _ok(await client.get(f"{BASE}/meetings/{meeting_id}/agenda", headers=manager.headers), 200)
    return sorted([a["filename"] for a in agenda["meeting_attachments"]]
                  + [a["filename"] for s in agenda["sections"] for i in s["items"] for a in i["attachments"]])


def _page_url(world) -> str:
    return f"/console/meetings/{world['meeting']}/files"


# --- the page --------------------------------------------------------------------------------------------------

async def test_the_page_lists_the_meetings_and_the_items_files(browsers, people, world):
    async with browsers(people["manager"]) as browser:
        page = await browser.get(_page_url(world))
    assert page.status_code == 200, page.text
    html = page.text
    meeting_files = html[html.index('id="meeting-files"'):html.index(f'id="item-{world["item"]}"')]
    item_files = html[html.index(f'id="item-{world["item"]}"'):]
    assert f'id="file-{world["minutes"]}"' in meeting_files and "minutes.pdf" in meeting_files
    assert "Minutes" in meeting_files and "Mona Manager" in meeting_files
    assert f'id="file-{world["slides"]}"' in item_files and "slides.pdf" in item_files
    assert "Tess Tasked" in item_files and "Quarterly numbers" in item_files and "Numbers" in item_files
    assert "1.4 kB" in html and "application/pdf" in html  # size in the language's words
    assert "(Asia/Shanghai)" in html  # the upload time in the meeting's zone
    assert f'href="/console/files/meeting/{world["minutes"]}/download"' in html
    assert 'data-max-bytes="209715200"' in html and "Files up to 200 MB." in html
    assert '<script src="/static/upload-tasks.js" defer></script>' in html and "<script>" not in html
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_the_page_in_chinese(browsers, people, world):
    async with browsers(people["manager"], "zh-CN") as browser:
        page = await browser.get(_page_url(world))
    assert page.status_code == 200
    for words in ("会议文件", "上传人", "上传时间", "大小", "下载", "删除", "会议纪要", "文件最大 200 MB。", "1.4 kB"):
        assert words in page.text, words


async def test_the_meeting_page_links_the_files_page(browsers, people, world):
    async with browsers(people["attendee"]) as browser:
        page = await browser.get(f"/console/meetings/{world['meeting']}")
    assert f'id="files-link" href="/console/meetings/{world["meeting"]}/files"' in page.text


@pytest.mark.parametrize(("language", "size", "shown"), [
    ("en", 512, "512 bytes"), ("zh-CN", 512, "512字节"), ("en", 1536, "1.5 kB"), ("en", 209_715_200, "200 MB"),
    ("zh-CN", 20 * 1024 * 1024 + 300_000, "20.3 MB"), ("en", 5000 * 1024**3, "5,000 GB")])
def test_sizes_are_written_in_the_language(language, size, shown):
    assert i18n.Formats(language).size(size) == shown


# --- uploads ---------------------------------------------------------------------------------------------------

async def test_a_manager_uploads_with_the_script_and_without(client, browsers, people, world):
    async with browsers(people["manager"]) as browser:
        token = csrf_of((await browser.get(_page_url(world))).text)
        xhr = await browser.post(_page_url(world), files=_file("notice.pdf"), data={"category": "OTHER"},
                                 headers={"X-CSRF-Token": token})
        assert xhr.status_code == 200, xhr.text
        assert "<html" not in xhr.text and 'id="meeting-files"' in xhr.text and "notice.pdf" in xhr.text
        plain = await browser.post(f"/console/meetings/{world['meeting']}/items/{world['item']}/files",
                                   files=_file("extra.pdf"), data={"csrf_token": token})
        assert plain.status_code == 303 and plain.headers["location"] == _page_url(world)
    assert await _api_files(client, people["manager"], world["meeting"]) == [
        "extra.pdf", "minutes.pdf", "notice.pdf", "slides.pdf"]
    agenda = await _ok(await client.get(f"{BASE}/meetings/{world['meeting']}/agenda",
                                        headers=people["manager"].headers), 200)
    assert {a["filename"]: a["category"] for a in agenda["meeting_attachments"]} == {
        "minutes.pdf": "MINUTES", "notice.pdf": "OTHER"}


async def test_the_tasked_attendee_uploads_to_the_item_only(client, browsers, people, world):
    async with browsers(people["tasked"]) as browser:
        page = await browser.get(_page_url(world))
        assert f'action="/console/meetings/{world["meeting"]}/items/{world["item"]}/files"' in page.text
        assert 'id="upload-meeting"' not in page.text
        token = csrf_of(page.text)
        xhr = await browser.post(f"/console/meetings/{world['meeting']}/items/{world['item']}/files",
                                 files=_file("more.pdf"), headers={"X-CSRF-Token": token})
        assert xhr.status_code == 200, xhr.text
        forged = await browser.post(_page_url(world), files=_file("sneaky.pdf"), headers={"X-CSRF-Token": token})
        assert forged.status_code == 403 and 'id="error"' in forged.text
    assert await _api_files(client, people["manager"], world["meeting"]) == ["minutes.pdf", "more.pdf", "slides.pdf"]


async def test_an_item_of_another_meeting_is_not_uploaded_through_this_one(client, browsers, people, world, clock):
    manager = people["manager"]
    start = clock.now() + timedelta(hours=3)
    other = await _ok(await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Other", "timezone": "Asia/Shanghai", "location": "Room 2", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=1)).isoformat()}))
    async with browsers(manager) as browser:
        token = csrf_of((await browser.get(_page_url(world))).text)
        wrong = await browser.post(f"/console/meetings/{other['id']}/items/{world['item']}/files",
                                   files=_file("x.pdf"), headers={"X-CSRF-Token": token})
    assert wrong.status_code == 404 and 'data-code="AGENDA_ITEM_NOT_FOUND"' in wrong.text
    assert await _api_files(client, manager, world["meeting"]) == ["minutes.pdf", "slides.pdf"]


# --- download, delete, restore ---------------------------------------------------------------------------------

async def test_download_gives_the_bytes_to_participants_only(browsers, people, world):
    async with browsers(people["attendee"]) as browser:
        got = await browser.get(f"/console/files/agenda-item/{world['slides']}/download")
        assert got.status_code == 200 and got.content == PDF
        assert got.headers["content-type"].startswith("application/pdf")
        ranged = await browser.get(f"/console/files/meeting/{world['minutes']}/download",
                                   headers={"Range": "bytes=0-7"})
        assert ranged.status_code == 206 and ranged.content == PDF[:8]
    async with browsers(people["stranger"]) as browser:
        refused = await browser.get(f"/console/files/agenda-item/{world['slides']}/download")
        assert refused.status_code == 404 and 'data-code="ATTACHMENT_NOT_FOUND"' in refused.text
        assert (await browser.get(_page_url(world))).status_code == 404


async def test_delete_asks_first_then_an_administrator_restores(client, browsers, people, world):
    manager, admin = people["manager"], people["admin"]
    confirm_url = f"{_page_url(world)}/agenda-item/{world['slides']}/delete"
    async with browsers(manager) as browser:
        page = await browser.get(_page_url(world))
        assert f'href="{confirm_url}"' in page.text
        assert 'id="deleted-link"' not in page.text  # restoring is the administrators'
        confirm = await browser.get(confirm_url)
        assert confirm.status_code == 200 and "slides.pdf" in confirm.text and 'id="confirm-delete"' in confirm.text
        assert await _api_files(client, manager, world["meeting"]) == ["minutes.pdf", "slides.pdf"]  # not yet
        done = await browser.post(confirm_url, data={"csrf_token": csrf_of(confirm.text)})
        assert done.status_code == 303 and done.headers["location"] == _page_url(world)
        assert (await browser.get(f"{_page_url(world)}/deleted")).status_code == 403
    assert await _api_files(client, manager, world["meeting"]) == ["minutes.pdf"]

    async with browsers(admin) as browser:
        page = await browser.get(_page_url(world))
        assert f'id="deleted-link" href="{_page_url(world)}/deleted"' in page.text
        deleted = await browser.get(f"{_page_url(world)}/deleted")
        assert deleted.status_code == 200 and f'id="deleted-{world["slides"]}"' in deleted.text
        assert "Mona Manager" in deleted.text  # who deleted it
        restore_url = f"{_page_url(world)}/agenda-item/{world['slides']}/restore"
        assert f'action="{restore_url}"' in deleted.text
        restored = await browser.post(restore_url, data={"csrf_token": csrf_of(deleted.text)})
        assert restored.status_code == 303 and restored.headers["location"] == f"{_page_url(world)}/deleted"
        after = await browser.get(f"{_page_url(world)}/deleted")
        assert 'id="no-deleted"' in after.text
        again = await browser.post(restore_url, data={"csrf_token": csrf_of(deleted.text)})
        assert again.status_code == 409 and "This file is not deleted." in again.text
    assert await _api_files(client, manager, world["meeting"]) == ["minutes.pdf", "slides.pdf"]


# --- the role table ---------------------------------------------------------------------------------------------

# who: (sees the page, may upload a meeting file, may upload to the item, may delete the manager's minutes,
#       may delete the tasked attendee's slides, sees the deleted files / may restore)
ROLE_TABLE = {
    "admin": (True, True, True, True, True, True),
    "manager": (True, True, True, True, True, False),
    "tasked": (True, False, True, False, True, False),
    "attendee": (True, False, False, False, False, False),
    "leader": (True, False, False, False, False, False),
    "stranger": (False, False, False, False, False, False),
}


@pytest.mark.parametrize("who", list(ROLE_TABLE))
async def test_the_role_table_offers_and_refuses_alike(client, browsers, people, world, who):
    sees, upload_meeting, upload_item, delete_minutes, delete_slides, restores = ROLE_TABLE[who]
    async with browsers(people[who]) as browser:
        page = await browser.get(_page_url(world))
        assert page.status_code == (200 if sees else 404), page.text
        token = csrf_of(page.text)
        html = page.text
        if sees:
            assert ('id="upload-meeting"' in html) is upload_meeting
            assert (f'id="upload-{world["item"]}"' in html) is upload_item
            assert (f"/meeting/{world['minutes']}/delete" in html) is delete_minutes
            assert (f"/agenda-item/{world['slides']}/delete" in html) is delete_slides
            assert ('id="deleted-link"' in html) is restores
            assert "/download" in html  # every participant downloads
        # Server-side, whatever the page offered: a forged form meets the API's own refusal.
        meeting_upload = await browser.post(_page_url(world), files=_file("m.pdf"), headers={"X-CSRF-Token": token})
        assert (meeting_upload.status_code == 200) is upload_meeting, meeting_upload.text
        item_upload = await browser.post(f"/console/meetings/{world['meeting']}/items/{world['item']}/files",
                                         files=_file("i.pdf"), headers={"X-CSRF-Token": token})
        assert (item_upload.status_code == 200) is upload_item, item_upload.text
        confirm = await browser.get(f"{_page_url(world)}/meeting/{world['minutes']}/delete")
        assert (confirm.status_code == 200) is delete_minutes
        deleted_minutes = await browser.post(f"{_page_url(world)}/meeting/{world['minutes']}/delete",
                                             data={"csrf_token": token})
        assert (deleted_minutes.status_code == 303) is delete_minutes, deleted_minutes.text
        if sees and not delete_minutes:
            assert deleted_minutes.status_code == 403 and 'data-code="ATTACHMENT_NOT_OWN"' in deleted_minutes.text
        deleted_page = await browser.get(f"{_page_url(world)}/deleted")
        assert (deleted_page.status_code == 200) is restores
        restore = await browser.post(f"{_page_url(world)}/meeting/{world['minutes']}/restore",
                                     data={"csrf_token": token})
        if restores:
            assert restore.status_code == 303, restore.text  # the admin deleted them just before
        else:
            assert restore.status_code in (403, 404) and 'id="error"' in restore.text
    expected = {"minutes.pdf", "slides.pdf"} | ({"m.pdf"} if upload_meeting else set()) \
        | ({"i.pdf"} if upload_item else set())
    if delete_minutes and not restores:
        expected.discard("minutes.pdf")
    assert set(await _api_files(client, people["manager"], world["meeting"])) == expected


async def test_the_tasked_attendee_deletes_their_own_file(client, browsers, people, world):
    async with browsers(people["tasked"]) as browser:
        confirm = await browser.get(f"{_page_url(world)}/agenda-item/{world['slides']}/delete")
        done = await browser.post(f"{_page_url(world)}/agenda-item/{world['slides']}/delete",
                                  data={"csrf_token": csrf_of(confirm.text)})
        assert done.status_code == 303
    assert await _api_files(client, people["manager"], world["meeting"]) == ["minutes.pdf"]


# --- CSRF and the limit ------------------------------------------------------------------------------------------

async def test_forms_without_their_csrf_token_change_nothing(client, browsers, people, world):
    async with browsers(people["admin"]) as browser:
        for headers, data in (({"X-CSRF-Token": "0" * 64}, {}), ({}, {}), ({}, {"csrf_token": "0" * 64})):
            for url in (_page_url(world), f"/console/meetings/{world['meeting']}/items/{world['item']}/files"):
                forged = await browser.post(url, files=_file("forged.pdf"), data=data, headers=headers)
                assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
        for data in ({}, {"csrf_token": "0" * 64}):
            forged = await browser.post(f"{_page_url(world)}/meeting/{world['minutes']}/delete", data=data)
            assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
        assert await _api_files(client, people["manager"], world["meeting"]) == ["minutes.pdf", "slides.pdf"]
        deleted = await client.delete(f"{BASE}/attachments/meeting/{world['minutes']}",
                                      headers=people["manager"].headers)
        assert deleted.status_code == 204
        forged = await browser.post(f"{_page_url(world)}/meeting/{world['minutes']}/restore", data={})
        assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
    assert await _api_files(client, people["manager"], world["meeting"]) == ["slides.pdf"]


async def test_the_limit_is_stated_and_a_larger_file_refused_in_words(db, clock, settings, client, people, world):
    small = create_app(test_settings(data_dir=settings.data_dir, meeting_attachment_max_bytes=300_000),
                       database=db, clock=clock, run_background_tasks=False)
    transport = httpx.ASGITransport(app=small, client=("203.0.113.10", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as browser:
        await sign_in(browser, people["manager"].email)
        page = await browser.get(_page_url(world))
        assert 'data-max-bytes="300000"' in page.text and "Files up to 293 kB." in page.text
        sentence = re.search(r'data-too-large="([^"]+)"', page.text)
        assert sentence and sentence.group(1) == "The file is larger than the upload limit."
        over = await browser.post(_page_url(world), files=_file("big.pdf", b"%PDF-" + b"0" * 400_000),
                                  headers={"X-CSRF-Token": csrf_of(page.text)})
        assert over.status_code == 413 and 'data-code="ATTACHMENT_TOO_LARGE"' in over.text
        assert "The file is larger than the upload limit." in over.text
    assert await _api_files(client, people["manager"], world["meeting"]) == ["minutes.pdf", "slides.pdf"]


async def test_without_a_session_the_page_sends_to_sign_in(client, world):
    response = await client.get(_page_url(world))
    assert response.status_code == 303 and "sign-in?next=" in response.headers["location"]
