"""Meetings: create, read, list, update, cancel, delete, required attendees, QR codes (issue 10 "Meetings",
"QR codes")."""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from datetime import UTC, datetime, timedelta

import pytest
import segno
from sqlalchemy import text

from tenet.iam.permissions import Role
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


def png_modules(png: bytes, *, scale: int = 10, border: int = 4) -> list[list[int]]:
    """The dark (1) / light (0) modules of a QR PNG, decoded from the file itself (zlib and the PNG filters), so
    the test reads what a scanner would see, not what segno was asked for."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    data = b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IDAT":
            data += body
        else:
            chunks[kind] = body
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    bpp = max(1, depth * channels // 8)
    stride = (width * depth * channels + 7) // 8
    raw, rows, prev = zlib.decompress(data), [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = (line[i - bpp] if i >= bpp else 0), prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            paeth = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            pred = {0: 0, 1: a, 2: b, 3: (a + b) // 2, 4: paeth}[kind]
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line

    def pixel(x: int, y: int) -> int:
        if depth == 1:
            bit = (rows[y][x // 8] >> (7 - x % 8)) & 1
            if color == 3:
                palette = chunks[b"PLTE"]
                return 1 if palette[bit * 3] < 128 else 0
            return 1 - bit
        return 1 if rows[y][x * bpp] < 128 else 0

    size = width // scale - 2 * border
    return [[pixel((border + col) * scale + scale // 2, (border + row) * scale + scale // 2) for col in range(size)]
            for row in range(size)]


class TestCreate:
    @pytest.mark.invariant("MA-INV-01", "MA-INV-15")
    async def test_a_meeting_gets_a_random_32_hex_id_and_both_codes(self, ma, manager, db, clock):
        meeting = await ma.create_ok(manager)
        assert re.fullmatch(r"[0-9a-f]{32}", meeting["id"])
        assert meeting["status"] == "SCHEDULED" and meeting["my_identity"] == "manager"
        assert meeting["qr_code_offline"]["check_in_url"] == (
            f"http://127.0.0.1:8000/meetingattendance/check-in/{meeting['id']}?mode=offline"
            f"&code={ma.offline_code(meeting['id'])}")
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-15")
    async def test_the_png_code_encodes_exactly_the_check_in_address(self, ma, manager):
        """The offline image adds the meeting's offline code to the stable address (issue 24 item 4)."""
        meeting = await ma.create_ok(manager)
        for mode in ("online", "offline"):
            response = await ma.call("GET", f"/meetings/{meeting['id']}/qrcode", manager,
                                     params={"mode": mode, "format": "png"})
            assert response.headers["content-type"] == "image/png"
            payload = f"http://127.0.0.1:8000/meetingattendance/check-in/{meeting['id']}?mode={mode}"
            if mode == "offline":
                payload += f"&code={ma.offline_code(meeting['id'])}"
            expected = [[1 if dark else 0 for dark in row] for row in segno.make(payload, error="m").matrix]
            assert png_modules(response.content) == expected
            svg = await ma.call("GET", f"/meetings/{meeting['id']}/qrcode", manager, params={"mode": mode})
            assert svg.headers["content-type"].startswith("image/svg+xml") and svg.text.startswith("<svg")
            again = await ma.call("GET", f"/meetings/{meeting['id']}/qrcode", manager, params={"mode": mode},
                                  headers={"If-None-Match": svg.headers["ETag"]})
            assert again.status_code == 304

    @pytest.mark.invariant("MA-INV-02")
    async def test_the_default_zone_is_stored_and_local_times_rendered(self, ma, manager):
        start = datetime(2026, 3, 9, 16, 0, tzinfo=UTC)
        meeting = await ma.create_ok(manager, start_time=start.isoformat(),
                                     end_time=(start + timedelta(hours=1)).isoformat())
        assert meeting["timezone"] == "America/Los_Angeles"
        assert meeting["start_time_local"] == "2026-03-09T09:00:00-07:00"
        assert meeting["check_in"]["opens_at"] == "2026-03-09T15:30:00Z"

    @pytest.mark.invariant("MA-INV-02")
    @pytest.mark.parametrize(("body", "status", "error"), [
        ({"timezone": "PST"}, 422, "TIMEZONE_INVALID"),
        ({"timezone": "Mars/Olympus"}, 422, "TIMEZONE_INVALID"),
        ({"start_time": "2026-03-09T09:00:00"}, 422, "VALIDATION_FAILED"),
        ({"end_time": "2026-01-05T09:00:00Z", "start_time": "2026-01-05T09:00:00Z"}, 422, "MEETING_TIME_INVALID"),
        ({"start_time": "2026-01-06T09:00:00Z", "end_time": "2026-01-13T09:00:01Z"}, 422, "MEETING_TIME_INVALID"),
        ({"checkin_closes_at": "2026-01-05T08:00:00Z"}, 422, "MEETING_TIME_INVALID"),
        ({"late_grace_minutes": 241}, 422, "VALIDATION_FAILED"),
        ({"online_link": "javascript:alert(1)"}, 422, "VALIDATION_FAILED"),
        # Outside the supported range, 1900-01-01 to 2200-01-01 (UTC): an overflow, a DataError, or a year-9999
        # meeting before.
        ({"start_time": "0001-01-01T00:00:00+05:00", "end_time": "0001-01-01T01:00:00+05:00"}, 422,
         "MEETING_TIME_INVALID"),
        ({"start_time": "9999-12-31T22:00:00-05:00", "end_time": "9999-12-31T23:00:00-05:00"}, 422,
         "MEETING_TIME_INVALID"),
        ({"start_time": "9999-12-31T22:00:00Z", "end_time": "9999-12-31T23:00:00Z"}, 422, "MEETING_TIME_INVALID"),
        ({"start_time": "2199-12-31T23:30:00Z", "end_time": "2200-01-01T00:30:00Z"}, 422, "MEETING_TIME_INVALID"),
        ({"start_time": "1899-12-31T23:00:00Z", "end_time": "1900-01-01T00:30:00Z"}, 422, "MEETING_TIME_INVALID"),
        ({"checkin_closes_at": "9999-12-31T23:00:00-05:00"}, 422, "MEETING_TIME_INVALID"),
    ])
    async def test_impossible_times_are_refused(self, ma, manager, body, status, error):
        response = await ma.create(manager, **body)
        assert (response.status_code, code(response)) == (status, error), response.text
        meeting = await ma.create_ok(manager)
        changed = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json=body)
        assert (changed.status_code, code(changed)) == (status, error), changed.text

    @pytest.mark.invariant("MA-INV-04")
    @pytest.mark.invariant("MA-INV-02")
    @pytest.mark.parametrize("zone", ["right/UTC", "posix/Asia/Shanghai", "posix/Europe/Paris", "localtime",
                                      "Factory"])
    async def test_names_zoneinfo_loads_that_are_no_iana_zone_are_refused(self, ma, manager, zone):
        """right/ zones count leap seconds (times shifted by 27 s) and PostgreSQL knows neither kind."""
        for path, body in (("/meetings", {"title": "M", **ma.window()}),
                           ("/series", {"title": "S", "start_date": "2026-03-02", "start_local_time": "09:00",
                                        "duration_minutes": 30, "rrule": "FREQ=DAILY;COUNT=2"}),
                           ("/templates", {"label": "T", "title": "T", "duration_minutes": 30})):
            response = await ma.call("POST", path, manager, json={**body, "timezone": zone})
            assert (response.status_code, code(response)) == (422, "TIMEZONE_INVALID"), (path, response.text)
        report = await ma.call("GET", "/reports/status-distribution", manager,
                               params={"from": "2026-01-01", "to": "2026-02-01", "tz": zone})
        assert (report.status_code, code(report)) == (422, "TIMEZONE_INVALID"), report.text

    @pytest.mark.parametrize("zone", ["Asia/Shanghai", "UTC", "America/Argentina/Buenos_Aires"])
    async def test_iana_names_are_accepted(self, ma, manager, zone):
        assert (await ma.create_ok(manager, timezone=zone))["timezone"] == zone

    async def test_attendees_must_be_active_accounts(self, ma, manager, employee, users, client):
        unknown = await ma.create(manager, required_attendee_ids=[str(uuid.uuid4())])
        assert (unknown.status_code, code(unknown)) == (422, "ATTENDEE_NOT_FOUND")
        admin = await users.admin()
        await client.post(f"/api/v1/iam/users/{employee.id}/disable", headers=admin.headers)
        disabled = await ma.create(manager, required_attendee_ids=[str(employee.id)])
        assert (disabled.status_code, code(disabled)) == (409, "ACCOUNT_NOT_ACTIVE")

    async def test_employees_cannot_create(self, ma, employee):
        response = await ma.create(employee)
        assert (response.status_code, code(response)) == (403, "PERMISSION_DENIED")


class TestVisibility:
    async def test_attendees_see_their_meeting_and_outsiders_get_404(self, ma, manager, employee, users):
        outsider = await users.make()
        meeting = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)])
        mine = await ma.meeting(employee, meeting["id"])
        assert mine.status_code == 200 and mine.json()["my_identity"] == "attendee"
        assert mine.json()["attendance_summary"] is None and mine.json()["qr_code_online"] is None
        assert (await ma.meeting(outsider, meeting["id"])).status_code == 404
        assert (await ma.meeting(None, meeting["id"])).status_code == 401
        codes_for_attendee = await ma.call("GET", f"/meetings/{meeting['id']}/qrcode", employee)
        assert (codes_for_attendee.status_code, code(codes_for_attendee)) == (403, "MEETING_ACTION_FORBIDDEN")

    async def test_a_walk_in_sees_the_restricted_view(self, ma, manager, employee, users, clock, app):
        """Issue 24 item 10: the agenda's rule (an external attendee, a signed-in walk-in, gets the restricted
        view) for the meeting itself: what the public check-in page shows, and their own attendance."""
        meeting = await ma.create_ok(manager, description="Board only", online_link="https://meet.example/secret",
                                     required_attendee_ids=[str(employee.id)], location="Room 1")
        clock.set(datetime.fromisoformat(meeting["start_time"]))
        walk_in = await users.make()
        assert (await ma.check_in(walk_in, meeting["id"])).status_code == 201
        await ma.call("POST", f"/meetings/{meeting['id']}/cancel", manager, json={"reason": "Reorganisation"})
        seen = await ma.meeting(walk_in, meeting["id"])
        assert seen.status_code == 200
        public = (await ma.call("GET", f"/public/meetings/{meeting['id']}", None)).json()
        assert seen.json() == {**public, "view": "restricted", "my_identity": "external",
                               "my_attendance": seen.json()["my_attendance"]}
        assert seen.json()["my_attendance"]["status"] == "PRESENT" and seen.json()["location"] == "Room 1"
        for private in ("Board only", "meet.example", "Reorganisation", "Mina", str(manager.id)):
            assert private not in seen.text
        listed = (await ma.call("GET", "/meetings", walk_in)).json()["items"]
        assert [(m["id"], m["organizer_id"], m["my_identity"]) for m in listed] == [(meeting["id"], None, "external")]
        attendee = (await ma.meeting(employee, meeting["id"])).json()
        assert attendee["description"] == "Board only" and attendee["organizer"]["display_name"] == "Mina Manager"
        assert "view" not in attendee
        answers = app.openapi()["paths"]["/api/v1/meeting-attendance/meetings/{meeting_id}"]["get"]["responses"]
        assert {ref["$ref"].rsplit("/", 1)[1] for ref in answers["200"]["content"]["application/json"]["schema"][
            "anyOf"]} == {"MeetingRead", "MeetingExternalRead"}

    @pytest.mark.invariant("MA-INV-01")
    async def test_a_malformed_id_is_404(self, ma, manager):
        for meeting_id in ("1001", "x" * 33, "../etc", "%2e%2e"):
            assert (await ma.meeting(manager, meeting_id)).status_code == 404

    async def test_the_organizer_sees_the_codes(self, ma, manager, leader):
        meeting = await ma.create_ok(manager, organizer_id=str(leader.id))
        seen = await ma.meeting(leader, meeting["id"])
        assert seen.json()["my_identity"] == "organizer" and seen.json()["qr_code_offline"] is not None
        display = await ma.call("GET", f"/meetings/{meeting['id']}/display-code", leader, params={"mode": "offline"})
        assert display.status_code == 200
        assert display.json()["url"].endswith(f"?mode=offline&code={ma.offline_code(meeting['id'])}")

    async def test_lists_show_mine_by_start_and_managers_all(self, ma, manager, employee, clock):
        later = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)],
                                   **ma.window(starts_in=timedelta(days=2)))
        sooner = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)],
                                    **ma.window(starts_in=timedelta(days=1)))
        await ma.create_ok(manager)  # not the employee's
        mine = await ma.call("GET", "/meetings", employee)
        assert [m["id"] for m in mine.json()["items"]] == [sooner["id"], later["id"]]
        everything = await ma.call("GET", "/meetings", manager, params={"scope": "all", "limit": 2})
        assert len(everything.json()["items"]) == 2 and everything.json()["next_cursor"]
        rest = await ma.call("GET", "/meetings", manager,
                             params={"scope": "all", "cursor": everything.json()["next_cursor"]})
        assert len(rest.json()["items"]) == 1
        window = await ma.call("GET", "/meetings", employee, params={
            "from": (clock.now() + timedelta(days=1, hours=12)).isoformat(), "status": "SCHEDULED"})
        assert [m["id"] for m in window.json()["items"]] == [later["id"]]


class TestChanges:
    @pytest.mark.invariant("MA-INV-03")
    async def test_clock_status_follows_the_clock(self, ma, manager, clock):
        meeting = await ma.create_ok(manager)
        start = datetime.fromisoformat(meeting["start_time"])
        for moment, expected in [(start - timedelta(seconds=1), "SCHEDULED"), (start, "IN_PROGRESS"),
                                 (start + timedelta(minutes=59, seconds=59), "IN_PROGRESS"),
                                 (start + timedelta(hours=1), "COMPLETED")]:
            clock.set(moment)
            assert (await ma.meeting(manager, meeting["id"])).json()["status"] == expected

    async def test_update_with_if_match(self, ma, manager):
        meeting = await ma.create_ok(manager)
        changed = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"title": "Renamed"},
                                headers={"If-Match": '"1"'})
        assert changed.status_code == 200 and changed.json()["title"] == "Renamed"
        assert changed.headers["ETag"] == '"2"'
        stale = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"title": "Again"},
                              headers={"If-Match": '"1"'})
        assert (stale.status_code, code(stale), stale.json()["current_version"]) == (412, "PRECONDITION_FAILED", 2)

    @pytest.mark.invariant("MA-INV-03")
    async def test_cancel_is_final_and_delete_hides(self, ma, manager, db, clock):
        meeting = await ma.create_ok(manager)
        cancelled = await ma.call("POST", f"/meetings/{meeting['id']}/cancel", manager, json={"reason": "Holiday"})
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "CANCELLED"
        again = await ma.call("POST", f"/meetings/{meeting['id']}/cancel", manager)
        assert (again.status_code, code(again)) == (409, "MEETING_CANCELLED")
        edit = await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"title": "x"})
        assert (edit.status_code, code(edit)) == (409, "MEETING_CANCELLED")
        assert (await ma.call("DELETE", f"/meetings/{meeting['id']}", manager)).status_code == 204
        assert (await ma.meeting(manager, meeting["id"])).status_code == 404
        assert (await ma.call("DELETE", f"/meetings/{meeting['id']}", manager)).status_code == 404
        await rules_hold(db, "MA-", now=clock.now())

    @pytest.mark.invariant("MA-INV-04")
    async def test_required_attendees_are_replaced(self, ma, manager, employee, leader, users):
        meeting = await ma.create_ok(manager, required_attendee_ids=[str(employee.id)])
        replaced = await ma.call("PUT", f"/meetings/{meeting['id']}/required-attendees", manager,
                                 json={"user_ids": [str(leader.id), str(leader.id)]})
        assert replaced.status_code == 200
        assert replaced.json() == {"user_ids": [str(leader.id)], "added": [str(leader.id)],
                                   "removed": [str(employee.id)]}
        listed = await ma.call("GET", f"/meetings/{meeting['id']}/required-attendees", manager)
        assert [a["user_id"] for a in listed.json()["items"]] == [str(leader.id)]
        assert (await ma.meeting(employee, meeting["id"])).status_code == 404

    async def test_regenerated_codes_follow_the_public_base_url(self, ma, manager, app, db):
        meeting = await ma.create_ok(manager)
        app.state.settings = app.state.settings.model_copy(update={"public_base_url": "https://meet.example.org"})
        response = await ma.call("POST", f"/meetings/{meeting['id']}/qrcode/regenerate", manager)
        assert response.status_code == 200
        assert response.json()["online"]["check_in_url"].startswith("https://meet.example.org/meetingattendance/")
        async with db.read_only() as session:
            payloads = (await session.execute(text("SELECT payload FROM meeting_attendance.meeting_qr_codes "
                                                   "WHERE meeting_id = :m"), {"m": meeting["id"]})).scalars().all()
        assert all(p.startswith("https://meet.example.org/") for p in payloads) and len(payloads) == 2


@pytest.mark.invariant("MA-INV-20")
async def test_commands_are_audited_without_personal_text(ma, manager, db):
    meeting = await ma.create_ok(manager, description="Private agenda notes")
    await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"description": "Other notes"})
    async with db.read_only() as session:
        rows = (await session.execute(text(
            "SELECT action, changes FROM meeting_attendance.audit_logs WHERE meeting_id = :m ORDER BY id"),
            {"m": meeting["id"]})).all()
    assert [r.action for r in rows] == ["MEETING_CREATED", "MEETING_UPDATED"]
    assert rows[1].changes["after"] == {"description_changed": True}
    assert "notes" not in str(rows[1].changes)


async def test_a_leader_without_the_role_cannot_manage(ma, leader, users):
    for role in (Role.LEADER, Role.EMPLOYEE):
        person = await users.make(roles=[role])
        assert (await ma.create(person)).status_code == 403
