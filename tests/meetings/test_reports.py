"""Reports checked against hand-computed fixtures (issue 10 "Reports"), in JSON, CSV and XLSX."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import openpyxl
import pytest

from tests.support.outcomes import code

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clock(clock):
    clock.set(NOW)


async def test_a_meeting_report_matches_the_hand_count(ma, manager, users, clock):
    """10 required: 5 present, 2 late, 1 excused, 2 absent; 2 guests and 1 walk-in beside.
    attendance rate = (5 + 2) / (10 - 1) = 0.7778; on time = 5 / 9 = 0.5556."""
    people = [await users.make(display_name=f"Person {i:02d}") for i in range(10)]
    meeting = await ma.create_ok(manager, required_attendee_ids=[str(p.id) for p in people])
    start = datetime.fromisoformat(meeting["start_time"])
    clock.set(start)
    for person in people[:5]:
        assert (await ma.check_in(person, meeting["id"])).json()["status"] == "PRESENT"
    clock.set(start + timedelta(minutes=10))
    for person in people[5:7]:
        assert (await ma.check_in(person, meeting["id"])).json()["status"] == "LATE"
    excused = await ma.call("POST", f"/meetings/{meeting['id']}/attendances", manager,
                            json={"user_id": str(people[7].id), "status": "EXCUSED", "note": "Sick"})
    assert excused.status_code == 201
    await ma.check_in(await users.make(display_name="Walker"), meeting["id"])
    await ma.guest_check_in(meeting["id"], name="Guest One")
    await ma.guest_check_in(meeting["id"], name="Guest Two")
    report = (await ma.call("GET", f"/reports/meetings/{meeting['id']}", manager)).json()
    assert {k: report[k] for k in ("expected", "present", "late", "excused", "absent", "guests", "walk_ins",
                                   "attendance_rate", "on_time_rate")} == {
        "expected": 10, "present": 5, "late": 2, "excused": 1, "absent": 2, "guests": 2, "walk_ins": 1,
        "attendance_rate": 0.7778, "on_time_rate": 0.5556}
    assert len(report["rows"]) == 13 and report["meeting"]["status"] == "IN_PROGRESS"
    exported = await ma.call("GET", f"/reports/meetings/{meeting['id']}", manager, params={"format": "csv"})
    assert exported.headers["content-type"] == "text/csv; charset=utf-8"
    assert exported.content.startswith(b"\xef\xbb\xbf") and b"\r\n" in exported.content
    rows = list(csv.DictReader(io.StringIO(exported.content.decode("utf-8-sig"))))
    assert [r["status"] for r in rows].count("ABSENT") == 2


@pytest.fixture
async def series_fixture(ma, manager, users, clock):
    """Daily series of 4 at 09:00 Los Angeles from 2 March; three attendees; three occurrences held:
    M1: A present, B late, C absent; M2: A present, B excused, C present; M3: A absent, B absent, C late.
    M4 has not started and does not count."""
    a = await users.make(display_name="Ada")
    b = await users.make(display_name="Bo")
    c = await users.make(display_name="=SUM(1)")  # a display name a spreadsheet would run
    made = await ma.call("POST", "/series", manager, json={
        "title": "Daily", "timezone": "America/Los_Angeles", "start_date": "2026-03-02", "start_local_time": "09:00",
        "duration_minutes": 30, "rrule": "FREQ=DAILY;COUNT=4",
        "required_attendee_ids": [str(a.id), str(b.id), str(c.id)]})
    assert made.status_code == 201, made.text
    body = made.json()
    occurrences = body["series"]["occurrences"]
    plan = [{a: "on", b: "late"}, {a: "on", b: "excused", c: "on"}, {c: "late"}]
    for occurrence, moves in zip(occurrences, plan, strict=False):
        start = datetime.fromisoformat(occurrence["start_time"])
        for person, how in moves.items():
            if how == "excused":
                await ma.call("POST", f"/meetings/{occurrence['meeting_id']}/attendances", manager,
                              json={"user_id": str(person.id), "status": "EXCUSED", "note": "Leave"})
                continue
            clock.set(start + (timedelta(minutes=10) if how == "late" else timedelta(0)))
            assert (await ma.check_in(person, occurrence["meeting_id"])).status_code == 201
    clock.set(datetime.fromisoformat(occurrences[2]["start_time"]) + timedelta(hours=2))
    return body, (a, b, c)


async def test_a_series_report_matches_the_hand_count(ma, manager, series_fixture):
    body, _ = series_fixture
    report = (await ma.call("GET", f"/reports/series/{body['series']['id']}", manager)).json()
    assert report["meetings_counted"] == 3
    assert [(m["expected"], m["present"], m["late"], m["excused"], m["absent"], m["attendance_rate"])
            for m in report["meetings"]] == [(3, 1, 1, 0, 1, 0.6667), (3, 2, 0, 1, 0, 1.0), (3, 0, 1, 0, 2, 0.3333)]
    by_name = {u["display_name"]: u for u in report["attendees"]}
    assert {n: (u["present"], u["late"], u["excused"], u["absent"], u["attendance_rate"])
            for n, u in by_name.items()} == {"Ada": (2, 0, 0, 1, 0.6667), "Bo": (0, 1, 1, 1, 0.5),
                                              "=SUM(1)": (1, 1, 0, 1, 0.6667)}
    exported = await ma.call("GET", f"/reports/series/{body['series']['id']}", manager,
                             params={"format": "csv", "table": "attendees"})
    rows = list(csv.DictReader(io.StringIO(exported.content.decode("utf-8-sig"))))
    assert "'=SUM(1)" in [r["display_name"] for r in rows]  # formula injection neutralised
    workbook = await ma.call("GET", f"/reports/series/{body['series']['id']}", manager, params={"format": "xlsx"})
    book = openpyxl.load_workbook(io.BytesIO(workbook.content))
    assert book.sheetnames == ["Attendees", "Meetings"]
    sheet = book["Meetings"]
    header = [c.value for c in sheet[1]]
    assert [r[header.index("attendance_rate")] for r in sheet.iter_rows(min_row=2, values_only=True)] == [
        0.6667, 1.0, 0.3333]
    assert sheet.cell(row=2, column=header.index("attendance_rate") + 1).number_format == "0.00%"


async def test_a_series_report_before_its_first_meeting_lists_who_is_expected(ma, manager, users):
    """Review finding (issue 23): before the first occurrence starts, the report listed nobody. It lists the series'
    required attendees with zero counted meetings (rates null), in JSON, CSV and XLSX alike."""
    a, b = await users.make(display_name="Ada"), await users.make(display_name="Bo")
    made = await ma.call("POST", "/series", manager, json={
        "title": "Weekly", "timezone": "UTC", "start_date": "2026-03-09", "start_local_time": "09:00",
        "duration_minutes": 30, "rrule": "FREQ=WEEKLY;COUNT=3", "required_attendee_ids": [str(a.id), str(b.id)]})
    assert made.status_code == 201, made.text
    series_id = made.json()["series"]["id"]
    report = (await ma.call("GET", f"/reports/series/{series_id}", manager)).json()
    assert report["meetings_counted"] == 0 and report["meetings"] == []
    assert [(u["user_id"], u["display_name"], u["expected"], u["present"], u["late"], u["excused"], u["absent"],
             u["attendance_rate"], u["on_time_rate"]) for u in report["attendees"]] == [
        (str(a.id), "Ada", 0, 0, 0, 0, 0, None, None), (str(b.id), "Bo", 0, 0, 0, 0, 0, None, None)]
    exported = await ma.call("GET", f"/reports/series/{series_id}", manager, params={"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(exported.content.decode("utf-8-sig"))))
    assert [(r["display_name"], r["expected"], r["attendance_rate"]) for r in rows] == [("Ada", "0", ""),
                                                                                        ("Bo", "0", "")]
    workbook = await ma.call("GET", f"/reports/series/{series_id}", manager, params={"format": "xlsx"})
    sheet = openpyxl.load_workbook(io.BytesIO(workbook.content))["Attendees"]
    header = [c.value for c in sheet[1]]
    assert [r[header.index("display_name")] for r in sheet.iter_rows(min_row=2, values_only=True)] == ["Ada", "Bo"]


async def test_distribution_and_ranking_over_a_range(ma, manager, leader, series_fixture):
    _, (a, b, c) = series_fixture
    params = {"from": "2026-03-01", "to": "2026-03-10"}
    distribution = (await ma.call("GET", "/reports/status-distribution", manager, params=params)).json()
    assert {k: distribution[k] for k in ("meetings_counted", "expected", "present", "late", "excused", "absent",
                                         "attendance_rate")} == {
        "meetings_counted": 3, "expected": 9, "present": 3, "late": 2, "excused": 1, "absent": 3,
        "attendance_rate": 0.625}
    assert distribution["from"] == "2026-03-01T08:00:00Z"  # midnight in Los Angeles
    ranking = (await ma.call("GET", "/reports/low-attendance", manager, params=params)).json()
    assert [r["user_id"] for r in ranking["attendees"]] == [str(b.id), *sorted([str(a.id), str(c.id)])]
    assert [r["attendance_rate"] for r in ranking["meetings"]] == [0.3333, 0.6667, 1.0]
    # A leader counts only meetings they organize: none here.
    mine = (await ma.call("GET", "/reports/status-distribution", leader, params=params)).json()
    assert mine["meetings_counted"] == 0 and mine["attendance_rate"] is None
    too_long = await ma.call("GET", "/reports/status-distribution", manager,
                             params={"from": "2026-01-01", "to": "2027-06-01"})
    assert (too_long.status_code, code(too_long)) == (422, "REPORT_RANGE_INVALID")


async def test_report_access(ma, manager, leader, employee, users):
    meeting = await ma.create_ok(manager, required_attendee_ids=[str(leader.id)])
    led = await ma.create_ok(manager, organizer_id=str(leader.id))
    assert (await ma.call("GET", f"/reports/meetings/{led['id']}", leader)).status_code == 200
    forbidden = await ma.call("GET", f"/reports/meetings/{meeting['id']}", leader)
    assert (forbidden.status_code, code(forbidden)) == (403, "MEETING_ACTION_FORBIDDEN")
    assert (await ma.call("GET", f"/reports/meetings/{meeting['id']}", employee)).status_code == 403


async def test_the_audit_log_filters(ma, manager, employee, leader):
    meeting = await ma.create_ok(manager)
    await ma.call("PATCH", f"/meetings/{meeting['id']}", manager, json={"title": "New"})
    everything = (await ma.call("GET", "/audit-logs", manager, params={"meeting_id": meeting["id"]})).json()
    assert [r["action"] for r in everything["items"]] == ["MEETING_UPDATED", "MEETING_CREATED"]
    only = (await ma.call("GET", "/audit-logs", manager, params={"action": "MEETING_CREATED",
                                                                 "meeting_id": meeting["id"]})).json()
    assert len(only["items"]) == 1 and only["items"][0]["changes"]["entityId"] == meeting["id"]
    unknown = await ma.call("GET", "/audit-logs", manager, params={"action": "NOT_AN_ACTION"})
    assert unknown.status_code == 422
    assert (await ma.call("GET", "/audit-logs", employee)).status_code == 403


@pytest.mark.parametrize(("path", "params"), [
    # Out of the supported range (1900-01-01 to 2200-01-01): overflows (500) or empty answers before.
    ("/reports/status-distribution", {"from": "0001-01-01", "to": "0001-01-05", "tz": "Asia/Tokyo"}),
    ("/reports/status-distribution", {"from": "9999-12-30", "to": "9999-12-31", "tz": "America/New_York"}),
    ("/reports/status-distribution", {"from": "9999-12-31T23:00:00-05:00", "to": "9999-12-31T23:30:00-05:00"}),
    ("/reports/status-distribution", {"from": "0001-01-01T00:00:00Z", "to": "0001-01-02T00:00:00Z"}),
    ("/reports/low-attendance", {"from": "0001-01-01", "to": "0001-01-05", "tz": "Asia/Tokyo"}),
    ("/reports/low-attendance", {"from": "2199-12-01", "to": "2200-01-02"}),
    # Inverted, empty, huge, malformed.
    ("/reports/status-distribution", {"from": "2026-02-01", "to": "2026-01-01"}),
    ("/reports/low-attendance", {"from": "2026-02-01", "to": "2026-02-01"}),
    ("/reports/status-distribution", {"from": "1900-01-01", "to": "2199-12-31"}),
    ("/reports/low-attendance", {"from": "2026-01-01", "to": "2026-13-01"}),
    ("/meetings", {"from": "0001-01-01T00:00:00+05:00", "to": "0001-01-02T00:00:00+05:00", "scope": "all"}),
    ("/meetings", {"from": "9999-12-31T00:00:00-05:00", "to": "9999-12-31T23:00:00-05:00", "scope": "all"}),
    ("/meetings", {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "scope": "all"}),
    ("/audit-logs", {"from": "0001-01-01T00:00:00+05:00"}),
    ("/audit-logs", {"to": "9999-12-31T23:00:00-05:00"}),
    ("/audit-logs", {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}),
])
async def test_ranges_outside_inverted_or_too_long_are_422(ma, manager, users, path, params):
    from tenet.iam.permissions import Role

    auditor = await users.make(roles=[Role.MEETING_MANAGER, Role.ADMINISTRATOR])
    response = await ma.call("GET", path, auditor, params=params)
    assert (response.status_code, code(response)) == (422, "REPORT_RANGE_INVALID"), response.text


async def test_the_ends_of_the_supported_range_are_accepted(ma, manager):
    for params in ({"from": "1900-01-01T00:00:00Z", "to": "1900-12-01T00:00:00Z"},
                   {"from": "2199-02-01", "to": "2200-01-01", "tz": "UTC"}):
        response = await ma.call("GET", "/reports/status-distribution", manager, params=params)
        assert response.status_code == 200, response.text


async def test_text_a_worksheet_cannot_hold_is_exported_marked_not_a_500(ma, manager, users):
    """XML 1.0 has no C0 control characters but tab, LF and CR; a title or a name may hold one (they are text
    like any other). openpyxl refused the cell (IllegalCharacterError, a 500); it is written as U+FFFD."""
    person = await users.make(display_name="Esc\x1bape")
    meeting = await ma.create_ok(manager, title="Weekly\x16sync", required_attendee_ids=[str(person.id)])
    workbook = await ma.call("GET", f"/reports/meetings/{meeting['id']}", manager, params={"format": "xlsx"})
    assert workbook.status_code == 200, workbook.text
    book = openpyxl.load_workbook(io.BytesIO(workbook.content))
    written = {value for sheet in book for row in sheet.iter_rows(values_only=True) for value in row}
    assert {"Weekly\ufffdsync", "Esc\ufffdape"} <= written
    exported = await ma.call("GET", f"/reports/meetings/{meeting['id']}", manager, params={"format": "csv"})
    assert "Esc\x1bape" in exported.content.decode("utf-8-sig")  # CSV holds any character
