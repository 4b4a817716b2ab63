"""Attachments: the streamed upload and its checks (type whitelist, magic bytes, size while streaming, one part
`file`), names and paths, downloads (RFC 6266/5987 names, ranges), deletion, restore and purge, and the temp files
an interrupted upload leaves (none)."""

from __future__ import annotations

import hashlib
import io
import tracemalloc
import zipfile
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tenet.app import create_app
from tenet.kernel.jobs import run_now
from tenet.meetings.agenda import tasks as agenda_tasks
from tenet.meetings.agenda.downloads import content_disposition
from tenet.meetings.agenda.mime import clean_filename
from tests.conftest import test_settings
from tests.meetings.agenda.conftest import (
    BOUNDARY,
    PDF,
    PNG,
    AgendaApi,
    World,
    make_world,
    multipart,
    storage_files,
    streamed_pdf,
)
from tests.meetings.conftest import BASE, MeetingApi
from tests.support.outcomes import code
from tests.support.users import UserFactory


@pytest.fixture
async def item(agenda_api: AgendaApi, world: World) -> dict:
    section = await agenda_api.section(world.manager, world.meeting_id)
    return await agenda_api.item(world.manager, section["id"], "Slides")


def _docx() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
    return buffer.getvalue()


def _xlsx() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook/>")
    return buffer.getvalue()


DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


class TestUploadChecks:
    @pytest.mark.invariant("MA-INV-26")
    async def test_a_stored_file_is_named_by_its_id_and_keeps_the_unicode_name(
            self, agenda_api: AgendaApi, world: World, item, storage_root: Path, db, rules_hold):
        response = await agenda_api.upload(world.manager, item["id"], PDF, filename="C:\\fake\\path\\会议纪要 v2.pdf")
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["filename"] == "会议纪要 v2.pdf" and body["size"] == str(len(PDF))
        assert body["sha256"] == hashlib.sha256(PDF).hexdigest()
        async with db.read_only() as session:
            path = (await session.execute(text(
                "SELECT storage_path FROM meeting_attendance.meeting_agenda_item_attachments WHERE id = :id"),
                {"id": body["id"]})).scalar_one()
        assert path == f"agenda-item/2026/01/{body['id']}" and (storage_root / path).read_bytes() == PDF
        assert storage_files(storage_root / "tmp") == []
        await rules_hold()

    @pytest.mark.parametrize(("data", "content_type", "filename", "status", "error"), [
        (b"MZ\x90\x00" + b"\x00" * 100, "application/octet-stream", "tool.exe", 415, "ATTACHMENT_MIME_NOT_ALLOWED"),
        (b"<html></html>", "text/html", "page.html", 415, "ATTACHMENT_MIME_NOT_ALLOWED"),
        (PDF, "image/png", "slides.png", 415, "ATTACHMENT_MIME_MISMATCH"),
        (b"MZ\x90\x00" + b"\x00" * 5000, "application/pdf", "evil.pdf", 415, "ATTACHMENT_MIME_MISMATCH"),
        (_xlsx(), DOCX, "report.docx", 415, "ATTACHMENT_MIME_MISMATCH"),
        (b"a,b\n\x00\x01", "text/csv", "data.csv", 415, "ATTACHMENT_MIME_MISMATCH"),
    ])
    @pytest.mark.invariant("MA-INV-26")
    async def test_types_outside_the_whitelist_or_not_matching_their_bytes_are_refused(
            self, agenda_api: AgendaApi, world: World, item, storage_root: Path, data, content_type, filename,
            status, error):
        response = await agenda_api.upload(world.manager, item["id"], data, filename=filename,
                                           content_type=content_type)
        assert (response.status_code, code(response)) == (status, error)
        assert storage_files(storage_root) == []

    @pytest.mark.parametrize(("data", "content_type", "filename", "stored_as"), [
        (_docx(), DOCX, "report.docx", DOCX),
        (PNG, "image/png", "chart.png", "image/png"),
        ("名前,点数\n太郎,90\n".encode(), "application/vnd.ms-excel", "scores.csv", "text/csv"),
        (b"plain text notes\n", "text/plain; charset=utf-8", "notes.txt", "text/plain"),
    ])
    @pytest.mark.invariant("MA-INV-26")
    async def test_whitelisted_types_with_matching_bytes_are_accepted(self, agenda_api: AgendaApi, world: World,
                                                                     item, data, content_type, filename, stored_as):
        response = await agenda_api.upload(world.manager, item["id"], data, filename=filename,
                                           content_type=content_type)
        assert response.status_code == 201, response.text
        assert response.json()["mime_type"] == stored_as

    @pytest.mark.invariant("MA-INV-26")
    async def test_the_size_limit_is_enforced_while_streaming_and_leaves_no_file(
            self, agenda_api: AgendaApi, world: World, item, storage_root: Path, db, clock, settings):
        small = create_app(test_settings(data_dir=settings.data_dir, meeting_attachment_max_bytes=300_000),
                           database=db, clock=clock, run_background_tasks=False)
        url = f"{BASE}/agenda-items/{item['id']}/attachments"
        headers = agenda_api.ma.headers(world.manager, **{"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=small), base_url="http://t") as client:
            exact = await client.post(url, headers=headers, content=multipart(
                [("file", "a.pdf", "application/pdf", b"%PDF-" + b"0" * (300_000 - 5))]))
            assert exact.status_code == 201, exact.text
            body, _ = streamed_pdf(2 * 1024 * 1024, chunk=64 * 1024)
            over = await client.post(url, headers=headers, content=body)
            assert (over.status_code, code(over)) == (413, "ATTACHMENT_TOO_LARGE")
            declared = await client.post(url, headers=headers, content=multipart(
                [("file", "a.pdf", "application/pdf", b"%PDF-" + b"0" * 400_000)]))
            assert (declared.status_code, code(declared)) == (413, "ATTACHMENT_TOO_LARGE")
        assert storage_files(storage_root / "tmp") == [] and len(storage_files(storage_root)) == 1

    @pytest.mark.parametrize("parts", [
        [],
        [("other", None, None, b"x")],
        [("file", "a.pdf", "application/pdf", PDF), ("file", "b.pdf", "application/pdf", PDF)],
        [("file", "a.pdf", "application/pdf", PDF), ("note", None, None, b"hello")],
        [("upload", "a.pdf", "application/pdf", PDF)],
    ])
    @pytest.mark.invariant("MA-INV-26")
    async def test_anything_but_one_part_named_file_is_malformed(self, agenda_api: AgendaApi, world: World, item,
                                                                  storage_root: Path, parts):
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", content=multipart(parts),
            headers=agenda_api.ma.headers(world.manager,
                                          **{"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}))
        assert (response.status_code, code(response)) == (400, "ATTACHMENT_UPLOAD_MALFORMED")
        assert storage_files(storage_root) == []

    @pytest.mark.invariant("MA-INV-26")
    async def test_an_rfc_5987_filename_is_read(self, agenda_api: AgendaApi, world: World, item):
        body = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename*=UTF-8''%E4%BC%9A%E8%AE%AE%E7%BA%AA%E8%A6%81%20v2.pdf\r\n"
                f"Content-Type: application/pdf\r\n\r\n").encode() + PDF + f"\r\n--{BOUNDARY}--\r\n".encode()
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", content=body,
            headers=agenda_api.ma.headers(world.manager,
                                          **{"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}))
        assert response.status_code == 201 and response.json()["filename"] == "会议纪要 v2.pdf"

    async def test_a_body_cut_before_its_closing_boundary_stores_nothing(self, agenda_api: AgendaApi, world: World,
                                                                        item, storage_root: Path):
        whole = multipart([("file", "a.pdf", "application/pdf", PDF)])
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", content=whole[: len(whole) - 40],
            headers=agenda_api.ma.headers(world.manager,
                                          **{"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}))
        assert (response.status_code, code(response)) == (400, "ATTACHMENT_UPLOAD_MALFORMED")
        assert storage_files(storage_root) == []

    @pytest.mark.parametrize("length", [257, 5000])
    async def test_a_boundary_longer_than_the_parser_reads_is_malformed(self, agenda_api: AgendaApi, world: World,
                                                                       item, storage_root: Path, length):
        """python-multipart refuses a boundary over 256 characters when the parser is built: that was a 500."""
        boundary = "b" * length
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
                f"Content-Type: application/pdf\r\n\r\n").encode() + PDF + f"\r\n--{boundary}--\r\n".encode()
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", content=body,
            headers=agenda_api.ma.headers(world.manager,
                                          **{"Content-Type": f"multipart/form-data; boundary={boundary}"}))
        assert (response.status_code, code(response)) == (400, "ATTACHMENT_UPLOAD_MALFORMED")
        assert storage_files(storage_root) == []

    @pytest.mark.parametrize("declared", [b"9" * 5000, b"0" * 5000 + b"9" * 20, "\u00b2".encode("latin-1")])
    async def test_a_declared_length_of_any_spelling_is_read_without_converting_it(self, agenda_api: AgendaApi,
                                                                                 world: World, item, declared):
        """The declared length is compared with the limit, never converted past it (int() of 5,000 digits raised
        ValueError, and "²" passes str.isdigit(): both 500s); the server in front refuses such a header anyway."""
        body = multipart([("file", "a.pdf", "application/pdf", PDF)])
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", content=body,
            headers={**agenda_api.ma.headers(world.manager, **{
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}), "Content-Length": declared})
        if declared.isdigit():
            assert (response.status_code, code(response)) == (413, "ATTACHMENT_TOO_LARGE")
        else:  # not a length: ignored, as any other such header is, and the body itself is measured
            assert response.status_code == 201, response.text

    async def test_a_body_that_is_not_multipart_is_415(self, agenda_api: AgendaApi, world: World, item):
        response = await agenda_api.ma.client.post(
            f"{BASE}/agenda-items/{item['id']}/attachments", json={"file": "x"},
            headers=agenda_api.ma.headers(world.manager))
        assert (response.status_code, code(response)) == (415, "UNSUPPORTED_MEDIA_TYPE")

    @pytest.mark.invariant("MA-INV-26")
    def test_filenames_are_cleaned_without_losing_unicode(self):
        assert clean_filename("../../etc/passwd") == "passwd"
        assert clean_filename("a\\b\\c.pdf") == "c.pdf"
        assert clean_filename("bad\x00\nname.pdf") == "bad name.pdf"
        assert clean_filename("..") == "file" and clean_filename("") == "file"
        long = clean_filename("长" * 300 + ".pdf")
        assert len(long) == 255 and long.endswith(".pdf")


class TestRetriedUploads:
    @pytest.mark.invariant("MA-INV-26")
    async def test_an_upload_retried_with_its_idempotency_key_stores_one_file(
            self, agenda_api: AgendaApi, world: World, item, storage_root: Path, db):
        """A client that lost the answer sends the upload again under the same key (another multipart boundary):
        it gets the first answer, and one file and one row exist."""
        key = {"Idempotency-Key": "slides-upload-1"}
        first = await agenda_api.call("POST", f"/agenda-items/{item['id']}/attachments", world.manager,
                                      content=multipart([("file", "slides.pdf", "application/pdf", PDF)]),
                                      headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", **key})
        other = "another-boundary-0123456789"
        again = await agenda_api.call("POST", f"/agenda-items/{item['id']}/attachments", world.manager,
                                      content=multipart([("file", "slides.pdf", "application/pdf", PDF)],
                                                        boundary=other),
                                      headers={"Content-Type": f"multipart/form-data; boundary={other}", **key})
        assert first.status_code == again.status_code == 201, again.text
        assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
        async with db.read_only() as session:
            rows = (await session.execute(text(
                "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments WHERE agenda_item_id = :i"),
                {"i": item["id"]})).scalar_one()
        assert rows == 1 and len(storage_files(storage_root / "agenda-item")) == 1


class TestMeetingAttachments:
    async def test_a_manager_files_minutes_with_a_category(self, agenda_api: AgendaApi, world: World, rules_hold):
        response = await agenda_api.upload_meeting(world.manager, world.meeting_id, category="MINUTES")
        assert response.status_code == 201, response.text
        assert (response.json()["category"], response.json()["meeting_id"]) == ("MINUTES", world.meeting_id)
        wrong = await agenda_api.upload_meeting(world.manager, world.meeting_id, category="GOSSIP")
        assert (wrong.status_code, code(wrong)) == (422, "ATTACHMENT_CATEGORY_INVALID")
        employee = await agenda_api.upload_meeting(world.alice, world.meeting_id)
        assert (employee.status_code, code(employee)) == (403, "PERMISSION_DENIED")
        await rules_hold()


class TestDownloads:
    async def test_the_file_comes_back_with_its_names_and_ranges(self, agenda_api: AgendaApi, world: World, item):
        data = b"%PDF-" + bytes(range(256)) * 40
        uploaded = (await agenda_api.upload(world.manager, item["id"], data, filename="会议纪要 v2.pdf")).json()
        url = uploaded["download_url"]
        whole = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.alice))
        assert whole.status_code == 200 and whole.content == data
        assert whole.headers["content-disposition"] == (
            "attachment; filename=\"v2.pdf\"; filename*=UTF-8''%E4%BC%9A%E8%AE%AE%E7%BA%AA%E8%A6%81%20v2.pdf")
        assert whole.headers["accept-ranges"] == "bytes" and whole.headers["content-type"] == "application/pdf"
        cases = {"bytes=0-9": (0, 9), "bytes=-10": (len(data) - 10, len(data) - 1), "bytes=5-": (5, len(data) - 1),
                 f"bytes=100-{len(data) * 2}": (100, len(data) - 1)}
        for header, (start, end) in cases.items():
            part = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.alice, Range=header))
            assert part.status_code == 206 and part.content == data[start:end + 1], header
            assert part.headers["content-range"] == f"bytes {start}-{end}/{len(data)}"
        several = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.alice,
                                                                                     Range="bytes=0-1,5-6"))
        assert several.status_code == 200 and several.content == data
        outside = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.alice,
                                                                                     Range=f"bytes={len(data)}-"))
        assert (outside.status_code, code(outside)) == (416, "RANGE_NOT_SATISFIABLE")
        assert outside.headers["content-range"] == f"bytes */{len(data)}"
        tag = whole.headers["etag"]
        assert (await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(
            world.alice, **{"If-None-Match": tag}))).status_code == 304
        stale = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(
            world.alice, Range="bytes=0-1", **{"If-Range": '"other"'}))
        assert stale.status_code == 200

    async def test_positions_of_any_length_are_read_without_converting_them(self, agenda_api: AgendaApi,
                                                                              world: World, item):
        """A position is compared with the file's size, never converted past it: int() of 5,000 digits raised
        ValueError (a 500). A first position past the end is 416; a last position or suffix past it means the
        end of the file (RFC 9110 section 14.1.2)."""
        data = b"%PDF-" + bytes(range(256)) * 4
        url = (await agenda_api.upload(world.manager, item["id"], data)).json()["download_url"]
        huge = "9" * 5000
        cases = {f"bytes={huge}-": (416, None), f"bytes={huge}-{huge}": (416, None),
                 f"bytes=0-{huge}": (206, (0, len(data) - 1)), f"bytes=-{huge}": (206, (0, len(data) - 1)),
                 f"bytes=3-{'0' * 4999}7": (206, (3, 7)), f"bytes={'0' * 5000}-": (206, (0, len(data) - 1)),
                 f"bytes=-{'0' * 5000}": (416, None), f"bytes={huge}-1": (200, None)}
        for header, (status, span) in cases.items():
            part = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.alice, Range=header))
            assert part.status_code == status, (header[:20], part.status_code, part.text[:200])
            if span is not None:
                assert part.content == data[span[0]:span[1] + 1]
                assert part.headers["content-range"] == f"bytes {span[0]}-{span[1]}/{len(data)}"

    def test_ascii_fallbacks(self):
        assert content_disposition("report.pdf") == "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        assert content_disposition("纪要.pdf").startswith('attachment; filename="download.pdf"')
        assert content_disposition('a"b\\c.txt').startswith('attachment; filename="a_b_c.txt"')

    async def test_externals_are_refused_and_strangers_see_nothing(self, agenda_api: AgendaApi, world: World, item):
        url = (await agenda_api.upload(world.manager, item["id"])).json()["download_url"]
        external = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.walk_in))
        assert (external.status_code, code(external)) == (403, "MEETING_ACTION_FORBIDDEN")
        stranger = await agenda_api.ma.client.get(url, headers=agenda_api.ma.headers(world.stranger))
        assert (stranger.status_code, code(stranger)) == (404, "ATTACHMENT_NOT_FOUND")


class TestDeleteRestorePurge:
    @pytest.mark.invariant("MA-INV-27")
    async def test_uploader_deletes_own_manager_forces_others_cannot(self, agenda_api: AgendaApi, world: World,
                                                                     item, rules_hold):
        await agenda_api.assign(world.manager, item["id"], world.alice, world.bob)
        alices = (await agenda_api.upload(world.alice, item["id"])).json()["id"]
        bobs = (await agenda_api.upload(world.bob, item["id"])).json()["id"]
        other = await agenda_api.call("DELETE", f"/attachments/agenda-item/{alices}", world.bob)
        assert (other.status_code, code(other)) == (403, "ATTACHMENT_NOT_OWN")
        await agenda_api.ok("DELETE", f"/attachments/agenda-item/{alices}", world.alice, 204)
        await agenda_api.ok("DELETE", f"/attachments/agenda-item/{bobs}", world.manager, 204)
        view = (await agenda_api.agenda(world.manager, world.meeting_id)).json()
        assert view["sections"][0]["items"][0]["attachments"] == []
        await rules_hold()

    @pytest.mark.invariant("MA-INV-27")
    async def test_administrators_restore_inside_the_window_only(self, agenda_api: AgendaApi, world: World, item,
                                                                clock, rules_hold):
        first = (await agenda_api.upload(world.manager, item["id"])).json()["id"]
        second = (await agenda_api.upload(world.manager, item["id"])).json()["id"]
        for attachment in (first, second):
            await agenda_api.ok("DELETE", f"/attachments/agenda-item/{attachment}", world.manager, 204)
        manager = await agenda_api.call("POST", f"/attachments/agenda-item/{first}/restore", world.manager)
        assert (manager.status_code, code(manager)) == (403, "PERMISSION_DENIED")
        listed = await agenda_api.ok("GET", f"/meetings/{world.meeting_id}/attachments/deleted", world.admin)
        assert {row["id"] for row in listed} == {first, second}
        await agenda_api.ok("POST", f"/attachments/agenda-item/{first}/restore", world.admin, 204)
        again = await agenda_api.call("POST", f"/attachments/agenda-item/{first}/restore", world.admin)
        assert (again.status_code, code(again)) == (409, "ATTACHMENT_NOT_DELETED")
        clock.advance(timedelta(days=30, seconds=1))
        late = await agenda_api.call("POST", f"/attachments/agenda-item/{second}/restore", world.admin)
        assert (late.status_code, code(late)) == (409, "ATTACHMENT_RESTORE_WINDOW_PASSED")
        await rules_hold()

    @pytest.mark.invariant("MA-INV-27")
    async def test_no_restore_under_a_deleted_item(self, agenda_api: AgendaApi, world: World, item):
        attachment = (await agenda_api.upload(world.manager, item["id"])).json()["id"]
        await agenda_api.ok("DELETE", f"/agenda/items/{item['id']}", world.manager, 204)
        refused = await agenda_api.call("POST", f"/attachments/agenda-item/{attachment}/restore", world.admin)
        assert (refused.status_code, code(refused)) == (409, "ATTACHMENT_PARENT_DELETED")

    @pytest.mark.invariant("MA-INV-27")
    async def test_the_purge_removes_rows_and_files_after_the_window_children_first(
            self, agenda_api: AgendaApi, world: World, item, storage_root: Path, clock, job_runtime, db, rules_hold):
        kept = (await agenda_api.upload(world.manager, item["id"])).json()
        await agenda_api.assign(world.manager, item["id"], world.alice)
        await agenda_api.upload(world.alice, item["id"])
        other = await agenda_api.item(world.manager, item["section_id"], "Other")
        await agenda_api.upload(world.manager, other["id"])
        await agenda_api.ok("DELETE", f"/agenda/items/{item['id']}", world.manager, 204)
        assert len(storage_files(storage_root)) == 3
        clock.advance(timedelta(days=29))
        early = await run_now(agenda_tasks.purge_deleted_agenda, job_runtime, timestamp=0)
        assert early["meeting_agenda_item_attachments"] == 0 and len(storage_files(storage_root)) == 3
        clock.advance(timedelta(days=1, seconds=1))
        counts = await run_now(agenda_tasks.purge_deleted_agenda, job_runtime, timestamp=0)
        assert (counts["meeting_agenda_item_attachments"], counts["meeting_agenda_item_upload_tasks"],
                counts["meeting_agenda_items"]) == (2, 1, 1)
        assert counts["bytes"] == 2 * len(PDF)
        assert [p.name for p in storage_files(storage_root)] != [] and kept["id"] not in str(storage_files(
            storage_root))
        async with db.read_only() as session:
            left = (await session.execute(text(
                "SELECT count(*) FROM meeting_attendance.meeting_agenda_items"))).scalar_one()
        assert left == 1
        await rules_hold()

    @pytest.mark.invariant("MA-INV-27")
    async def test_the_purge_detector_sees_rows_kept_past_the_window(self, agenda_api: AgendaApi, world: World,
                                                                    item, clock, db, rules_hold):
        attachment = (await agenda_api.upload(world.manager, item["id"])).json()["id"]
        await agenda_api.ok("DELETE", f"/attachments/agenda-item/{attachment}", world.manager, 204)

        with pytest.raises(AssertionError, match="MA-INV-27"):
            await rules_hold(clock.now() + timedelta(days=32))


class TestLeftovers:
    async def test_the_sweeper_removes_stale_temp_files_and_orphans(self, agenda_api: AgendaApi, world: World,
                                                                  item, storage_root: Path, job_runtime):
        import os
        import time

        live = (await agenda_api.upload(world.manager, item["id"])).json()["id"]
        temp = storage_root / "tmp" / "uploads"
        temp.mkdir(parents=True, exist_ok=True)
        stale, fresh = temp / "dead.part", temp / "running.part"
        stale.write_bytes(b"x")
        fresh.write_bytes(b"y")
        os.utime(stale, (time.time() - 7200, time.time() - 7200))
        orphan = storage_root / "agenda-item" / "2026" / "01" / "00000000-0000-4000-8000-000000000000"
        orphan.write_bytes(b"%PDF-")
        recent = await run_now(agenda_tasks.sweep_upload_leftovers, job_runtime, timestamp=0)
        assert recent == {"temp_files": 1, "orphan_files": 0} and not stale.exists() and orphan.exists()
        for path in storage_files(storage_root / "agenda-item"):
            os.utime(path, (time.time() - 3 * 86400, time.time() - 3 * 86400))
        counts = await run_now(agenda_tasks.sweep_upload_leftovers, job_runtime, timestamp=0)
        assert fresh.exists() and not orphan.exists()
        assert counts["orphan_files"] == 1
        assert any(live in p.name for p in storage_files(storage_root))


class TestStreaming:
    async def test_a_50_mib_upload_is_never_held_in_memory(self, agenda_api: AgendaApi, world: World, item,
                                                           storage_root: Path):
        size = 50 * 1024 * 1024
        body, length = streamed_pdf(size)
        tracemalloc.start()
        try:
            response = await agenda_api.ma.client.post(
                f"{BASE}/agenda-items/{item['id']}/attachments", content=body,
                headers=agenda_api.ma.headers(world.manager, **{
                    "Content-Type": f"multipart/form-data; boundary={BOUNDARY}", "Content-Length": str(length)}))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert response.status_code == 201, response.text
        assert response.json()["size"] == str(size)
        # The 1 MiB write buffer, a chunk or two in flight and the parser: far below the file.
        assert peak < 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB upload"

    async def test_a_client_that_goes_away_mid_upload_leaves_no_temp_file(self, app, world: World, item,
                                                                        storage_root: Path, agenda_api: AgendaApi):
        """The ASGI exchange of a client that disconnects after 3 MiB: no file stays, in tmp or in storage."""
        headers = agenda_api.ma.headers(world.manager, **{
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}", "Content-Length": str(100 * 1024 * 1024)})
        body, _ = streamed_pdf(100 * 1024 * 1024, chunk=512 * 1024)
        sent = 0
        seen_temp: list[int] = []

        async def receive():
            nonlocal sent
            if sent >= 3 * 1024 * 1024:
                seen_temp.append(len(storage_files(storage_root / "tmp")))
                return {"type": "http.disconnect"}
            chunk = await body.__anext__()
            sent += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": True}

        messages = []

        async def send(message):
            messages.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": f"{BASE}/agenda-items/{item['id']}/attachments", "raw_path": b"",
                 "query_string": b"", "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 1),
                 "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
        await app(scope, receive, send)
        assert seen_temp == [1], "the upload was streaming into a temp file when the client left"
        assert storage_files(storage_root) == []


class TestNoConnectionHeld:
    async def test_no_database_connection_is_held_while_the_body_arrives(self, committed_db, clock, settings):
        """On a database with real pools: halfway through a 4 MiB body, neither the write pool nor the read pool has
        a connection checked out for the upload; the short unit of work after the body commits the row."""
        app = create_app(settings, database=committed_db, clock=clock, run_background_tasks=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            ma = MeetingApi(client, app, clock)
            api = AgendaApi(ma)
            world = await make_world(ma, UserFactory(app, committed_db, clock))
            section = await api.section(world.manager, world.meeting_id)
            item = await api.item(world.manager, section["id"])
        size = 4 * 1024 * 1024
        body, length = streamed_pdf(size, chunk=256 * 1024)
        headers = ma.headers(world.manager, **{"Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                                               "Content-Length": str(length)})
        sent, held = 0, []
        reads_pool = committed_db.reads.pool

        async def receive():
            nonlocal sent
            if sent >= size // 2 and not held:
                stats = reads_pool.get_stats()
                held.append((committed_db.engine.pool.checkedout(),
                             stats.get("pool_size", 0) - stats.get("pool_available", 0)))
            try:
                chunk = await body.__anext__()
            except StopAsyncIteration:
                return {"type": "http.request", "body": b"", "more_body": False}
            sent += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": True}

        messages = []

        async def send(message):
            messages.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": f"{BASE}/agenda-items/{item['id']}/attachments", "raw_path": b"",
                 "query_string": b"", "root_path": "", "server": ("t", 80), "client": ("127.0.0.1", 1),
                 "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
        await app(scope, receive, send)
        assert messages[0]["status"] == 201
        assert held == [(0, 0)]
