"""Reports in the console (issue 18), under `/console/reports`: one meeting, one series (per attendee and per meeting,
with a chart of each occurrence stacked by status), the status distribution over a range (chart) and the
low-attendance ranking. Each page reads the report the API route reads (tenet.meetings.reports: the same scope, a
leader sees the meetings they organize), for holders of `meeting:report:read` (the point the API checks); a refusal
is the 403 page in words.

Filters are form GETs; a table sorts on the server by `?sort=<column>` (`-<column>` descending, ties by the
report's own order, a stable sort). The reports are not paginated by the API (one statement each, bounded by
TENET_REPORT_MAX_RANGE_DAYS and `limit`), so neither are the pages. `?format=csv|xlsx` on a page's own address
downloads what the page shows, with the same filters and order, through the API's export code (reports.csv_bytes /
xlsx_bytes, the API's columns)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import anyio
from babel.dates import format_date
from babel.numbers import format_percent
from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import PermissionDenied, ValidationFailed
from tenet.kernel.settings import section
from tenet.meetings import reports
from tenet.meetings.api.reports import ATTENDEE_COLUMNS, MEETING_COLUMNS, ROW_COLUMNS, XLSX
from tenet.meetings.pages.console import ATTENDANCE_LABELS
from tenet.meetings.permissions import Permission
from tenet.meetings.settings import MeetingSettings
from tenet.web import charts, console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
HOME = f"{PREFIX}/reports"
STATUSES = ("present", "late", "excused", "absent")
LOW_ATTENDEE_COLUMNS = ("user_id", "display_name", "expected", "attended", "excused", "attendance_rate")
LOW_MEETING_COLUMNS = ("meeting_id", "title", "start_time", "expected", "attended", "attendance_rate")
DEFAULT_DAYS = 30
Format = Annotated[Literal["html", "csv", "xlsx"], Query(alias="format")]
Sort = Annotated[str | None, Query(max_length=40)]
Bound = Annotated[str | None, Query(max_length=40)]


def reader(viewer: Viewer) -> Any:
    """The caller, when they hold the report point; the page refuses as the API does otherwise."""
    if not viewer.can(Permission.REPORT_READ):
        raise PermissionDenied(f"Requires the permission {Permission.REPORT_READ}",
                               permission=Permission.REPORT_READ.value)
    return viewer.principal


def href(request: Request) -> Any:
    """`href(sort="-present")`: this page's address with some query parameters changed (None drops one)."""
    def build(**changes: str | None) -> str:
        params = {k: v for k, v in request.query_params.items() if k not in changes}
        params.update({k: v for k, v in changes.items() if v is not None})
        return request.url.path + ("?" + urlencode(params) if params else "")
    return build


def zone_of(request: Request, viewer: Viewer) -> str:
    return viewer.zone or request.app.state.settings.default_timezone


def sorted_rows(rows: list[dict[str, Any]], sort: str | None, columns: tuple[str, ...],
                name: str) -> list[dict[str, Any]]:
    """The rows by `sort` (a column, `-` first for descending); none (null rates) last either way. Unknown: 422."""
    if not sort:
        return rows
    column = sort.removeprefix("-")
    if column not in columns:
        raise ValidationFailed(f"{name} sorts by one of {', '.join(columns)}", field=name)
    present = [r for r in rows if r.get(column) is not None]
    missing = [r for r in rows if r.get(column) is None]
    present.sort(key=lambda r: r[column] if not isinstance(r[column], str) else r[column].casefold(),
                 reverse=sort.startswith("-"))
    return present + missing


def percent(viewer: Viewer, value: float | None) -> str:
    return "—" if value is None else format_percent(value, "#,##0.0%", locale=viewer.formats.locale)


async def download(fmt: str, name: str, sheets: list[tuple[str, tuple[str, ...], list[dict[str, Any]]]]) -> Response:
    """What the page shows, as the API writes it: CSV of the first table, XLSX of every table (a sheet each)."""
    if fmt == "csv":
        _, columns, rows = sheets[0]
        body = await anyio.to_thread.run_sync(reports.csv_bytes, columns, rows)
        media, extension = "text/csv; charset=utf-8", "csv"
    else:
        body = await anyio.to_thread.run_sync(reports.xlsx_bytes, sheets)
        media, extension = XLSX, "xlsx"
    return Response(body, media_type=media, headers={
        "Content-Disposition": f'attachment; filename="{name}.{extension}"', "Cache-Control": "private, no-store"})


def _words(viewer: Viewer) -> dict[str, str]:
    return {s: viewer.gettext(ATTENDANCE_LABELS[s.upper()]) for s in STATUSES}


@router.get("/reports")
async def index(request: Request) -> Response:
    viewer = await console.signed_in(request)
    reader(viewer)
    today = console.now(request).astimezone(ZoneInfo(zone_of(request, viewer))).date()
    return console.render(request, viewer, "meetings/reports.html", active="reports",
                          default_from=(today - timedelta(days=DEFAULT_DAYS)).isoformat(),
                          default_to=(today + timedelta(days=1)).isoformat())


@router.get("/reports/open-meeting")
async def open_meeting(request: Request, id: Annotated[str, Query(max_length=64)]) -> Response:
    viewer = await console.signed_in(request)
    reader(viewer)
    return console.see_other(f"{HOME}/meetings/{quote(id.strip(), safe='')}")


@router.get("/reports/open-series")
async def open_series(request: Request, id: Annotated[str, Query(max_length=64)]) -> Response:
    viewer = await console.signed_in(request)
    reader(viewer)
    return console.see_other(f"{HOME}/series/{optional_uuid(id, 'id')}")


def optional_uuid(value: str | None, name: str) -> uuid.UUID | None:
    if not value or not value.strip():
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise ValidationFailed(f"{name} must be an id", field=name) from None


# --- one meeting ----------------------------------------------------------------------------------------------

@router.get("/reports/meetings/{meeting_id}")
async def meeting_page(request: Request, meeting_id: str, sort: Sort = None, fmt: Format = "html") -> Response:
    viewer = await console.signed_in(request)
    report = await reports.meeting_report(reads(request), meeting_id=meeting_id[:64], principal=reader(viewer),
                                          now=console.now(request))
    rows = sorted_rows(report["rows"], sort, ROW_COLUMNS, "sort")
    if fmt != "html":
        return await download(fmt, f"meeting-report-{report['meeting']['id']}", [("Rows", ROW_COLUMNS, rows)])
    return console.render(request, viewer, "meetings/report_meeting.html", active="reports",
                          href=href(request), report=report,
                          rows=rows, sort=sort or "", statuses=_words(viewer),
                          rate=percent(viewer, report["attendance_rate"]),
                          on_time=percent(viewer, report["on_time_rate"]))


# --- one series ----------------------------------------------------------------------------------------------

async def _series(request: Request, viewer: Viewer, series_id: uuid.UUID) -> dict[str, Any]:
    return await reports.series_report(reads(request), series_id=series_id, principal=reader(viewer),
                                       now=console.now(request))


@router.get("/reports/series/{series_id}")
async def series_page(request: Request, series_id: uuid.UUID, sort: Sort = None, meetings_sort: Sort = None,
                      fmt: Format = "html") -> Response:
    viewer = await console.signed_in(request)
    report = await _series(request, viewer, series_id)
    attendees = sorted_rows(report["attendees"], sort, ATTENDEE_COLUMNS, "sort")
    meetings = sorted_rows(report["meetings"], meetings_sort, MEETING_COLUMNS, "meetings_sort")
    if fmt != "html":
        return await download(fmt, f"series-report-{series_id}", [("Attendees", ATTENDEE_COLUMNS, attendees),
                                                                  ("Meetings", MEETING_COLUMNS, meetings)])
    zone = report["series"]["timezone"]
    for row in attendees + meetings:
        row["rate_text"] = percent(viewer, row["attendance_rate"])
        row["on_time_text"] = percent(viewer, row["on_time_rate"])
    return console.render(request, viewer, "meetings/report_series.html", active="reports",
                          href=href(request), report=report,
                          attendees=attendees, meetings=meetings, sort=sort or "", meetings_sort=meetings_sort or "",
                          zone=zone, statuses=_words(viewer))


@router.get("/reports/series/{series_id}/chart.svg")
async def series_chart(request: Request, series_id: uuid.UUID) -> Response:
    """Attendance per occurrence, stacked by status (the page's meetings table says the same in numbers)."""
    viewer = await console.signed_in(request)
    report = await _series(request, viewer, series_id)
    zone = ZoneInfo(report["series"]["timezone"])
    labels = [format_date(m["start_time"].astimezone(zone), "short", locale=viewer.formats.locale)
              for m in report["meetings"]]
    names = _words(viewer)
    series = {names[s]: [m[s] or None for m in report["meetings"]] for s in STATUSES}
    return charts.svg_response(charts.bars(viewer.gettext(N_("Attendance per occurrence")), labels, series))


# --- over a range ------------------------------------------------------------------------------------------

def _range(request: Request, viewer: Viewer, start: str | None, end: str | None) -> tuple[str, str, datetime,
                                                                                           datetime, int]:
    zone = zone_of(request, viewer)
    today = console.now(request).astimezone(ZoneInfo(zone)).date()
    start = start or (today - timedelta(days=DEFAULT_DAYS)).isoformat()
    end = end or (today + timedelta(days=1)).isoformat()
    max_days = section(request.app.state.settings, MeetingSettings).report_max_range_days
    return start, end, reports.parse_bound(start, zone), reports.parse_bound(end, zone), max_days


async def _distribution(request: Request, viewer: Viewer, start: str | None, end: str | None,
                        series_id: uuid.UUID | None) -> tuple[dict[str, Any], dict[str, str]]:
    shown_from, shown_to, first, last, max_days = _range(request, viewer, start, end)
    report = await reports.status_distribution(reads(request), principal=reader(viewer), start=first, end=last,
                                               max_days=max_days, series_id=series_id, now=console.now(request))
    return report, {"from": shown_from, "to": shown_to, "series_id": str(series_id or "")}


@router.get("/reports/status-distribution")
async def distribution_page(request: Request, start: Annotated[str | None, Query(alias="from", max_length=40)] = None,
                            end: Annotated[str | None, Query(alias="to", max_length=40)] = None,
                            series_id: Annotated[str | None, Query(max_length=64)] = None,
                            fmt: Format = "html") -> Response:
    viewer = await console.signed_in(request)
    report, filters = await _distribution(request, viewer, start, end, optional_uuid(series_id, "series_id"))
    summary = {k: v for k, v in report.items() if not isinstance(v, list | dict)}
    if fmt != "html":
        return await download(fmt, "status-distribution", [("Distribution", tuple(summary), [summary])])
    total = sum(report[s] for s in STATUSES)
    shares = {s: percent(viewer, report[s] / total if total else None) for s in STATUSES}
    return console.render(request, viewer, "meetings/report_distribution.html", active="reports",
                          href=href(request), report=report,
                          filters=filters, statuses=_words(viewer), shares=shares,
                          rate=percent(viewer, report["attendance_rate"]),
                          on_time=percent(viewer, report["on_time_rate"]))


@router.get("/reports/status-distribution/chart.svg")
async def distribution_chart(request: Request,
                             start: Annotated[str | None, Query(alias="from", max_length=40)] = None,
                             end: Annotated[str | None, Query(alias="to", max_length=40)] = None,
                             series_id: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    viewer = await console.signed_in(request)
    report, _ = await _distribution(request, viewer, start, end, optional_uuid(series_id, "series_id"))
    names = _words(viewer)
    return charts.svg_response(charts.bars(
        viewer.gettext(N_("Attendance by status")), [names[s] for s in STATUSES],
        {viewer.gettext(N_("Required attendances")): [report[s] for s in STATUSES]}, stacked=False))


@router.get("/reports/low-attendance")
async def low_attendance_page(request: Request,
                              start: Annotated[str | None, Query(alias="from", max_length=40)] = None,
                              end: Annotated[str | None, Query(alias="to", max_length=40)] = None,
                              limit: Annotated[int, Query(ge=1, le=100)] = 10,
                              min_meetings: Annotated[int, Query(ge=1, le=1000)] = 3,
                              sort: Sort = None, meetings_sort: Sort = None, fmt: Format = "html") -> Response:
    viewer = await console.signed_in(request)
    shown_from, shown_to, first, last, max_days = _range(request, viewer, start, end)
    report = await reports.low_attendance(reads(request), principal=reader(viewer), start=first, end=last,
                                          max_days=max_days, limit=limit, min_meetings=min_meetings,
                                          now=console.now(request))
    attendees = sorted_rows(report["attendees"], sort, LOW_ATTENDEE_COLUMNS, "sort")
    meetings = sorted_rows(report["meetings"], meetings_sort, LOW_MEETING_COLUMNS, "meetings_sort")
    if fmt != "html":
        return await download(fmt, "low-attendance", [("Attendees", LOW_ATTENDEE_COLUMNS, attendees),
                                                      ("Meetings", LOW_MEETING_COLUMNS, meetings)])
    for row in attendees + meetings:
        row["rate_text"] = percent(viewer, row["attendance_rate"])
    return console.render(request, viewer, "meetings/report_low.html", active="reports",
                          href=href(request), attendees=attendees,
                          meetings=meetings, sort=sort or "", meetings_sort=meetings_sort or "",
                          zone=zone_of(request, viewer),
                          filters={"from": shown_from, "to": shown_to, "limit": str(limit),
                                   "min_meetings": str(min_meetings)})
