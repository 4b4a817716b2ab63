"""Report routes (`?format=json|csv|xlsx`): one meeting, one series, the status distribution and the low-attendance
ranking (tenet.meetings.reports)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response

from tenet.deps import now as clock_now
from tenet.deps import reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, json_response, problem_responses
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings import queries, reports
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import LowAttendance, MeetingReport, SeriesReport, StatusDistribution
from tenet.meetings.settings import MeetingSettings

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
ReportReader = Annotated[Principal, Depends(require(Permission.REPORT_READ))]
Format = Annotated[Literal["json", "csv", "xlsx"], Query(alias="format")]
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
_EXPORTS: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/csv": {}, XLSX: {}}, "description": "The report (JSON, CSV or XLSX)"}}

MEETING_COLUMNS = ("meeting_id", "title", "start_time", "start_time_local", "expected", "present", "late",
                   "excused", "absent", "guests", "walk_ins", "attendance_rate", "on_time_rate")
ATTENDEE_COLUMNS = ("user_id", "display_name", "expected", "present", "late", "excused", "absent",
                    "attendance_rate", "on_time_rate")
ROW_COLUMNS = ("subject_type", "user_id", "guest_id", "display_name", "email", "organization", "required", "status",
               "status_source", "mode", "checked_in_at", "note")


async def _export(fmt: str, name: str, sheets: list[tuple[str, tuple[str, ...], list[dict[str, Any]]]],
                  table: str | None = None) -> Response:
    """CSV (one table: the first, or `table`) or XLSX (every table a sheet), built in a worker thread."""
    if fmt == "csv":
        _, columns, rows = next((s for s in sheets if table is None or s[0].lower() == table), sheets[0])
        body = await anyio.to_thread.run_sync(reports.csv_bytes, columns, rows)
        media, extension = "text/csv; charset=utf-8", "csv"
    else:
        body = await anyio.to_thread.run_sync(reports.xlsx_bytes, sheets)
        media, extension = XLSX, "xlsx"
    return Response(body, media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="{name}.{extension}"'})


def _summary_row(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if not isinstance(v, list | dict)}


@router.get("/reports/meetings/{meeting_id}", response_model=MeetingReport,
            summary="Report of one meeting (managers; leaders of meetings they organize)", responses=_EXPORTS)
async def meeting_report(meeting_id: str, principal: ReportReader, request: Request,
                         fmt: Format = "json") -> Response:
    report = await reports.meeting_report(reads(request), meeting_id=meeting_id, principal=principal,
                                          now=clock_now(request))
    if fmt == "json":
        return json_response(MeetingReport.model_validate(report))
    summary = {**_summary_row(report), **{f"meeting_{k}": v for k, v in report["meeting"].items()}}
    return await _export(fmt, f"meeting-report-{meeting_id}", [
        ("Rows", ROW_COLUMNS, report["rows"]),
        ("Summary", tuple(summary), [summary]),
    ])


@router.get("/reports/series/{series_id}", response_model=SeriesReport,
            summary="Report of a series: per meeting and per attendee (started occurrences)", responses=_EXPORTS)
async def series_report(series_id: uuid.UUID, principal: ReportReader, request: Request, fmt: Format = "json",
                        table: Annotated[Literal["meetings", "attendees"], Query()] = "attendees") -> Response:
    report = await reports.series_report(reads(request), series_id=series_id, principal=principal,
                                         now=clock_now(request))
    if fmt == "json":
        return json_response(SeriesReport.model_validate(report))
    return await _export(fmt, f"series-report-{series_id}", [
        ("Attendees", ATTENDEE_COLUMNS, report["attendees"]),
        ("Meetings", MEETING_COLUMNS, report["meetings"]),
    ], table=table)


def _bounds(request: Request, start: str, end: str, tz: str | None) -> tuple[datetime, datetime, int]:
    settings = request.app.state.settings
    zone = tz or section(settings, KernelSettings).default_timezone
    return (reports.parse_bound(start, zone), reports.parse_bound(end, zone),
            section(settings, MeetingSettings).report_max_range_days)


@router.get("/reports/status-distribution", response_model=StatusDistribution,
            summary="Present / late / excused / absent over a range of meeting starts",
            description="Half-open `[from, to)` on the start time, at most `TENET_REPORT_MAX_RANGE_DAYS`; "
                        "managers count every meeting, leaders the ones they organize.",
            responses={**_EXPORTS, **problem_responses(422)})
async def status_distribution(principal: ReportReader, request: Request,
                              start: Annotated[str, Query(alias="from", max_length=40)],
                              end: Annotated[str, Query(alias="to", max_length=40)],
                              tz: Annotated[str | None, Query(max_length=64)] = None,
                              series_id: uuid.UUID | None = None,
                              fmt: Format = "json") -> Response:
    first, last, max_days = _bounds(request, start, end, tz)
    report = await reports.status_distribution(reads(request), principal=principal, start=first, end=last,
                                               max_days=max_days, series_id=series_id, now=clock_now(request))
    if fmt == "json":
        return json_response(StatusDistribution.model_validate(report))
    return await _export(fmt, "status-distribution", [("Distribution", tuple(report), [report])])


@router.get("/reports/low-attendance", response_model=LowAttendance,
            summary="Lowest attendance rates: attendees and meetings",
            description="Attendees expected at `min_meetings` or more; ascending by rate, ties by more expected.",
            responses={**_EXPORTS, **problem_responses(422)})
async def low_attendance(principal: ReportReader, request: Request,
                         start: Annotated[str, Query(alias="from", max_length=40)],
                         end: Annotated[str, Query(alias="to", max_length=40)],
                         tz: Annotated[str | None, Query(max_length=64)] = None,
                         limit: Annotated[int, Query(ge=1, le=100)] = 10,
                         min_meetings: Annotated[int, Query(ge=1, le=1000)] = 3,
                         fmt: Format = "json",
                         table: Annotated[Literal["attendees", "meetings"], Query()] = "attendees") -> Response:
    first, last, max_days = _bounds(request, start, end, tz)
    report = await reports.low_attendance(reads(request), principal=principal, start=first, end=last, max_days=max_days,
                                          limit=limit, min_meetings=min_meetings, now=clock_now(request))
    if fmt == "json":
        return json_response(LowAttendance.model_validate(report))
    return await _export(fmt, "low-attendance", [
        ("Attendees", ("user_id", "display_name", "expected", "attended", "excused", "attendance_rate"),
         report["attendees"]),
        ("Meetings", ("meeting_id", "title", "start_time", "expected", "attended", "attendance_rate"),
         report["meetings"]),
    ], table=table)
