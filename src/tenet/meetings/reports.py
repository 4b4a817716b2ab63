"""Reports (spec §关键组件说明, 报表服务): one meeting, one series, the status distribution over a date range and the
low-attendance ranking; JSON, CSV or XLSX.

Definitions (D-26; the tests' hand-computed fixtures follow them exactly):
- expected: required attendees; present / late / excused: required attendees whose live attendance has it;
  absent = expected - present - late - excused; guests and walk-ins are reported beside, never in a rate;
- attendance_rate = (present + late) / (expected - excused), on_time_rate = present / (expected - excused),
  null when the denominator is 0, rounded to 4 decimals;
- series and range reports count only ACTIVE meetings that have started (a future meeting would count everyone
  absent); a single meeting's report may be of any non-deleted meeting. A series report also lists the series'
  required attendees no counted meeting expected yet (before the first one: all of them), with zero counts.
Each report is one SQL statement, so its figures come from one snapshot on the read path.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

from tenet.iam.principal import Principal
from tenet.kernel.pagination import PageParams
from tenet.kernel.plans import PlannedPerCall
from tenet.kernel.reads import Reads
from tenet.meetings import errors, queries, times
from tenet.meetings.permissions import Action

FIGURES = ("expected", "present", "late", "excused", "absent", "guests", "walk_ins")

_PER_MEETING = """
    r AS (SELECT r.meeting_id, r.user_id, a.status
            FROM meeting_attendance.meeting_required_attendees r JOIN m ON m.id = r.meeting_id
            LEFT JOIN meeting_attendance.attendances a
                   ON a.meeting_id = r.meeting_id AND a.user_id = r.user_id AND a.status <> 'VOIDED'),
    per_meeting AS (
        SELECT meeting_id, count(*) AS expected, count(*) FILTER (WHERE status = 'PRESENT') AS present,
               count(*) FILTER (WHERE status = 'LATE') AS late, count(*) FILTER (WHERE status = 'EXCUSED') AS excused
          FROM r GROUP BY meeting_id),
    extras AS (
        SELECT a.meeting_id, count(*) FILTER (WHERE a.subject_type = 'GUEST') AS guests,
               count(*) FILTER (WHERE a.subject_type = 'USER' AND NOT EXISTS (
                   SELECT 1 FROM meeting_attendance.meeting_required_attendees q
                    WHERE q.meeting_id = a.meeting_id AND q.user_id = a.user_id)) AS walk_ins
          FROM meeting_attendance.attendances a JOIN m ON m.id = a.meeting_id
         WHERE a.status <> 'VOIDED' GROUP BY a.meeting_id),
    meeting_rows AS (
        SELECT m.id AS meeting_id, m.title, m.start_time, m.timezone, coalesce(pm.expected, 0) AS expected,
               coalesce(pm.present, 0) AS present, coalesce(pm.late, 0) AS late, coalesce(pm.excused, 0) AS excused,
               coalesce(x.guests, 0) AS guests, coalesce(x.walk_ins, 0) AS walk_ins
          FROM m LEFT JOIN per_meeting pm ON pm.meeting_id = m.id LEFT JOIN extras x ON x.meeting_id = m.id)
"""
_PER_USER = """
    user_rows AS (
        SELECT r.user_id, u.display_name, count(*) AS expected,
               count(*) FILTER (WHERE r.status = 'PRESENT') AS present,
               count(*) FILTER (WHERE r.status = 'LATE') AS late,
               count(*) FILTER (WHERE r.status = 'EXCUSED') AS excused
          FROM r JOIN iam.user_account u ON u.id = r.user_id GROUP BY r.user_id, u.display_name)
"""

# Both reports are planned for the values of each call (kernel.reads.PlannedPerCall): a series may hold 2 meetings
# or 500, a range a day or a year, and the generic plan PostgreSQL adopts for a prepared statement ran the series
# report of 52 meetings x 300 attendees in 51 ms instead of 29 (bench series_report: 4.5x the baseline's CPU).
SERIES_SQL = PlannedPerCall(f"""
    WITH s AS (SELECT id, title, timezone, organizer_id FROM meeting_attendance.meeting_series
                WHERE id = %(series_id)s AND status = 'ACTIVE'),
    m AS (SELECT m.id, m.title, m.start_time, m.timezone FROM meeting_attendance.meetings m JOIN s ON s.id = m.series_id
           WHERE m.status = 'ACTIVE' AND m.start_time <= %(now)s),
    {_PER_MEETING}, {_PER_USER},
    -- Who the series expects and no counted meeting did yet (before the first one: everyone), with zeros.
    expected_rows AS (
        SELECT e.user_id, u.display_name, 0 AS expected, 0 AS present, 0 AS late, 0 AS excused
          FROM meeting_attendance.series_required_attendees e JOIN s ON s.id = e.series_id
          JOIN iam.user_account u ON u.id = e.user_id
         WHERE NOT EXISTS (SELECT 1 FROM user_rows x WHERE x.user_id = e.user_id))
    SELECT 'series' AS kind, to_jsonb(s) AS body FROM s
    UNION ALL SELECT 'meeting', to_jsonb(meeting_rows) FROM meeting_rows
    UNION ALL SELECT 'user', to_jsonb(user_rows) FROM user_rows
    UNION ALL SELECT 'user', to_jsonb(expected_rows) FROM expected_rows
""")  # noqa: S608  (constants of this module)

RANGE_SQL = f"""
    WITH m AS (SELECT m.id, m.title, m.start_time, m.timezone FROM meeting_attendance.meetings m
                WHERE m.status = 'ACTIVE' AND m.start_time >= %(from)s AND m.start_time < %(to)s
                  AND m.start_time <= %(now)s AND {{scope}} {{series}}),
    {_PER_MEETING}, {_PER_USER}
    SELECT 'meeting' AS kind, to_jsonb(meeting_rows) AS body FROM meeting_rows
    UNION ALL SELECT 'user', to_jsonb(user_rows) FROM user_rows
"""  # noqa: S608  (constants of this module)


def rate(numerator: int, expected: int, excused: int) -> float | None:
    denominator = expected - excused
    return None if denominator <= 0 else round(numerator / denominator, 4)


def figures(row: dict[str, Any]) -> dict[str, Any]:
    absent = row["expected"] - row["present"] - row["late"] - row["excused"]
    return {**{k: row.get(k, 0) for k in FIGURES if k != "absent"}, "absent": absent,
            "attendance_rate": rate(row["present"] + row["late"], row["expected"], row["excused"]),
            "on_time_rate": rate(row["present"], row["expected"], row["excused"])}


def _meeting_out(row: dict[str, Any]) -> dict[str, Any]:
    start = datetime.fromisoformat(row["start_time"]) if isinstance(row["start_time"], str) else row["start_time"]
    return {"meeting_id": row["meeting_id"], "title": row["title"], "start_time": start,
            "start_time_local": times.local(start, row["timezone"]), **figures(row)}


def _user_out(row: dict[str, Any]) -> dict[str, Any]:
    out = {"user_id": row["user_id"], "display_name": row["display_name"], **figures(row)}
    out.pop("guests")
    out.pop("walk_ins")
    return out


async def meeting_report(reads: Reads, *, meeting_id: str, principal: Principal, now: datetime) -> dict[str, Any]:
    """One meeting: its figures and every row of its attendance list."""
    row = await reads.one(queries.MEETING_SQL, {"id": queries.valid_meeting_id(meeting_id), "caller": principal.id})
    queries.require(row, principal, Action.READ_REPORT)
    assert row is not None
    rows: list[dict[str, object]] = []
    cursor: str | None = None
    listed: list[dict[str, object]] = []
    while True:
        rows, cursor = await queries.attendances(reads, meeting_id=meeting_id, principal=principal, status=None,
                                                 subject_type=None, page=PageParams(limit=200, cursor=cursor))
        listed += rows
        if cursor is None:
            break
    counts = {"expected": row["required_count"], "present": row["present"], "late": row["late"],
              "excused": row["excused"], "guests": row["guests"], "walk_ins": row["walk_ins"]}
    meeting = {"id": row["id"], "title": row["title"], "start_time": row["start_time"], "end_time": row["end_time"],
               "timezone": row["timezone"], "start_time_local": times.local(row["start_time"], row["timezone"]),
               "status": times.clock_status(row["status"], row["start_time"], row["end_time"], now)}
    return {"meeting": meeting, **figures(counts), "rows": listed}


async def series_report(reads: Reads, *, series_id: uuid.UUID, principal: Principal, now: datetime) -> dict[str, Any]:
    """Per meeting and per attendee, over the series' started ACTIVE occurrences."""
    rows = await reads.all(SERIES_SQL, {"series_id": series_id, "now": now})
    head = next((r["body"] for r in rows if r["kind"] == "series"), None)
    if head is None or not (queries.is_manager(principal) or head["organizer_id"] == str(principal.id)):
        raise errors.SeriesNotFound()
    meetings = sorted((_meeting_out(r["body"]) for r in rows if r["kind"] == "meeting"),
                      key=lambda m: m["start_time"])
    attendees = sorted((_user_out(r["body"]) for r in rows if r["kind"] == "user"),
                       key=lambda u: (u["display_name"], u["user_id"]))
    return {"series": {"id": head["id"], "title": head["title"], "timezone": head["timezone"]},
            "meetings_counted": len(meetings), "meetings": meetings, "attendees": attendees}


def parse_bound(value: str, zone_name: str) -> datetime:
    """A report bound: a date (midnight in `zone_name`) or an instant with an offset, in the supported range."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            if not times.in_range(datetime.combine(day, time(0, 0), tzinfo=UTC), end=True):
                raise errors.ReportRangeInvalid(f"from and to lie {times.RANGE_TEXT}")
            return datetime.combine(day, time(0, 0)).replace(tzinfo=times.zone(zone_name)).astimezone(UTC)
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise errors.ReportRangeInvalid("from and to are dates (YYYY-MM-DD) or instants with an offset") from None
    if moment.tzinfo is None:
        raise errors.ReportRangeInvalid("an instant needs an offset")
    check_window(moment)
    return moment.astimezone(UTC)


def check_window(*bounds: datetime | None) -> None:
    """Range bounds (aware) lie in the supported range, the end of it included (REPORT_RANGE_INVALID)."""
    if any(bound is not None and not times.in_range(bound, end=True) for bound in bounds):
        raise errors.ReportRangeInvalid(f"from and to lie {times.RANGE_TEXT}")


async def _range(reads: Reads, *, principal: Principal, start: datetime, end: datetime, max_days: int,
                 series_id: uuid.UUID | None, now: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if end <= start or end - start > timedelta(days=max_days):
        raise errors.ReportRangeInvalid(f"to must be after from, at most {max_days} days later", max_days=max_days)
    scope = "TRUE" if queries.is_manager(principal) else "m.organizer_id = %(caller)s"
    series = "AND m.series_id = %(series_id)s" if series_id else ""
    rows = await reads.all(PlannedPerCall(RANGE_SQL.format(scope=scope, series=series)),
                           {"from": start, "to": end, "now": now, "caller": principal.id, "series_id": series_id})
    meetings = [_meeting_out(r["body"]) for r in rows if r["kind"] == "meeting"]
    users = [_user_out(r["body"]) for r in rows if r["kind"] == "user"]
    return meetings, users


async def status_distribution(reads: Reads, *, principal: Principal, start: datetime, end: datetime, max_days: int,
                              series_id: uuid.UUID | None, now: datetime) -> dict[str, Any]:
    meetings, _ = await _range(reads, principal=principal, start=start, end=end, max_days=max_days,
                               series_id=series_id, now=now)
    totals = {k: sum(m[k] for m in meetings) for k in ("expected", "present", "late", "excused", "guests",
                                                       "walk_ins")}
    return {"from": start, "to": end, "meetings_counted": len(meetings), **figures(totals)}


async def low_attendance(reads: Reads, *, principal: Principal, start: datetime, end: datetime, max_days: int,
                         limit: int, min_meetings: int, now: datetime) -> dict[str, Any]:
    """Attendees (expected at `min_meetings` or more) and meetings, lowest attendance rate first; ties: more
    expected first, then id."""
    meetings, users = await _range(reads, principal=principal, start=start, end=end, max_days=max_days,
                                   series_id=None, now=now)

    def key(row: dict[str, Any], ident: str) -> tuple[float, int, str]:
        value = row["attendance_rate"]
        return (2.0 if value is None else value, -row["expected"], str(row[ident]))

    ranked_users = sorted((u for u in users if u["expected"] >= min_meetings), key=lambda u: key(u, "user_id"))
    ranked_meetings = sorted((m for m in meetings if m["expected"] > 0), key=lambda m: key(m, "meeting_id"))
    return {"from": start, "to": end,
            "attendees": [{"user_id": u["user_id"], "display_name": u["display_name"], "expected": u["expected"],
                           "attended": u["present"] + u["late"], "excused": u["excused"],
                           "attendance_rate": u["attendance_rate"]} for u in ranked_users[:limit]],
            "meetings": [{"meeting_id": m["meeting_id"], "title": m["title"], "start_time": m["start_time"],
                          "expected": m["expected"], "attended": m["present"] + m["late"],
                          "attendance_rate": m["attendance_rate"]} for m in ranked_meetings[:limit]]}


# --- exports ---------------------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """Spreadsheet-safe value: text that a spreadsheet would run as a formula is prefixed with ' (OWASP CSV
    injection); ids and times as text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    text_value = str(value)
    return "'" + text_value if text_value.startswith(_FORMULA_START) else text_value


def csv_bytes(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> bytes:
    """UTF-8 with BOM (Excel reads Chinese names right), CRLF, RFC 4180 quoting."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(row.get(c)) for c in columns])
    return b"\xef\xbb\xbf" + buffer.getvalue().encode("utf-8")


def xlsx_bytes(sheets: Sequence[tuple[str, Sequence[str], Iterable[dict[str, Any]]]]) -> bytes:
    """Write-only workbook (rows streamed, bounded memory); rates as percentages."""
    book = Workbook(write_only=True)
    for title, columns, rows in sheets:
        sheet = book.create_sheet(title=title)
        sheet.append(list(columns))
        for row in rows:
            values = []
            for column in columns:
                value = cell(row.get(column))
                if column.endswith("_rate") and isinstance(value, float):
                    percent = WriteOnlyCell(sheet, value=value)
                    percent.number_format = "0.00%"
                    values.append(percent)
                elif isinstance(value, str):
                    # XML 1.0 holds no C0 control character but tab, LF and CR: a title or name with one is
                    # written marked, as U+FFFD (openpyxl refuses the cell otherwise).
                    values.append(ILLEGAL_CHARACTERS_RE.sub("\ufffd", value))
                else:
                    values.append(value)
            sheet.append(values)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
