"""Report routes (`?format=json|csv|xlsx`) and the audit log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, Query, Request, Response

from tenet.deps import now as clock_now
from tenet.deps import reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, SqlKeyset, page_params
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings import errors, reports
from tenet.meetings.audit import Action as AuditAction
from tenet.meetings.audit import Resource
from tenet.meetings.http import router
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import AuditLogRead, LowAttendance, MeetingReport, SeriesReport, StatusDistribution
from tenet.meetings.settings import MeetingSettings

ReportReader = Annotated[Principal, Depends(require(Permission.REPORT_READ))]
AuditReader = Annotated[Principal, Depends(require(Permission.AUDIT_READ))]
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
async def meeting_report(meeting_id: str, user: ReportReader, request: Request,
                         fmt: Format = "json") -> Response:
    report = await reports.meeting_report(reads(request), meeting_id=meeting_id, principal=user,
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
async def series_report(series_id: uuid.UUID, user: ReportReader, request: Request, fmt: Format = "json",
                        table: Annotated[Literal["meetings", "attendees"], Query()] = "attendees") -> Response:
    report = await reports.series_report(reads(request), series_id=series_id, principal=user, now=clock_now(request))
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
async def status_distribution(user: ReportReader, request: Request,
                              start: Annotated[str, Query(alias="from", max_length=40)],
                              end: Annotated[str, Query(alias="to", max_length=40)],
                              tz: Annotated[str | None, Query(max_length=64)] = None,
                              series_id: uuid.UUID | None = None,
                              fmt: Format = "json") -> Response:
    first, last, max_days = _bounds(request, start, end, tz)
    report = await reports.status_distribution(reads(request), principal=user, start=first, end=last,
                                               max_days=max_days, series_id=series_id, now=clock_now(request))
    if fmt == "json":
        return json_response(StatusDistribution.model_validate(report))
    return await _export(fmt, "status-distribution", [("Distribution", tuple(report), [report])])


@router.get("/reports/low-attendance", response_model=LowAttendance,
            summary="Lowest attendance rates: attendees and meetings",
            description="Attendees expected at `min_meetings` or more; ascending by rate, ties by more expected.",
            responses={**_EXPORTS, **problem_responses(422)})
async def low_attendance(user: ReportReader, request: Request,
                         start: Annotated[str, Query(alias="from", max_length=40)],
                         end: Annotated[str, Query(alias="to", max_length=40)],
                         tz: Annotated[str | None, Query(max_length=64)] = None,
                         limit: Annotated[int, Query(ge=1, le=100)] = 10,
                         min_meetings: Annotated[int, Query(ge=1, le=1000)] = 3,
                         fmt: Format = "json",
                         table: Annotated[Literal["attendees", "meetings"], Query()] = "attendees") -> Response:
    first, last, max_days = _bounds(request, start, end, tz)
    report = await reports.low_attendance(reads(request), principal=user, start=first, end=last, max_days=max_days,
                                          limit=limit, min_meetings=min_meetings, now=clock_now(request))
    if fmt == "json":
        return json_response(LowAttendance.model_validate(report))
    return await _export(fmt, "low-attendance", [
        ("Attendees", ("user_id", "display_name", "expected", "attended", "excused", "attendance_rate"),
         report["attendees"]),
        ("Meetings", ("meeting_id", "title", "start_time", "expected", "attended", "attendance_rate"),
         report["meetings"]),
    ], table=table)


# --- audit log -------------------------------------------------------------------------------------------

AUDIT_KEYSET = SqlKeyset(("l.id",), (int,), descending=True)
AUDIT_SQL = """
    SELECT l.id, l.occurred_at, l.action, l.resource, l.resource_id, l.meeting_id, l.series_id, l.actor_type,
           l.actor_id, l.request_id, l.changes
      FROM meeting_attendance.audit_logs l
     WHERE {filters} AND {after} ORDER BY {order} LIMIT %(limit)s
"""


@router.get("/audit-logs", response_model=Page[AuditLogRead], summary="The meeting-attendance audit log",
            description="Newest first. `resource` and `action` are the constants of the log (an unknown one is "
                        "422, not an empty page).", responses=problem_responses(400, 422))
async def audit_logs(
    user: AuditReader, request: Request, params: Annotated[PageParams, Depends(page_params)],
    resource: Resource | None = None, action: AuditAction | None = None,
    meeting_id: Annotated[str | None, Query(pattern="^[0-9A-Za-z]{1,32}$")] = None,
    series_id: uuid.UUID | None = None,
    actor_id: Annotated[str | None, Query(pattern="^[0-9A-Za-z_.:-]{1,64}$")] = None,
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
) -> Response:
    if any(v is not None and v.tzinfo is None for v in (start, end)):
        raise errors.ReportRangeInvalid("from and to must carry an offset")
    reports.check_window(start, end)
    if start is not None and end is not None and end <= start:
        raise errors.ReportRangeInvalid("to must be after from")
    filters, values = ["TRUE"], {}
    for name, value, clause in (
        ("resource", resource.value if resource else None, "l.resource = %(resource)s"),
        ("action", action.value if action else None, "l.action = %(action)s"),
        ("meeting_id", meeting_id, "l.meeting_id = %(meeting_id)s"),
        ("series_id", series_id, "l.series_id = %(series_id)s"),
        ("actor_id", actor_id, "l.actor_id = %(actor_id)s"),
        ("from", start, "l.occurred_at >= %(from)s"),
        ("to", end, "l.occurred_at < %(to)s"),
    ):
        if value is not None:
            filters.append(clause)
            values[name] = value
    after, after_params = AUDIT_KEYSET.after(params)
    rows = await reads(request).all(AUDIT_SQL.format(filters=" AND ".join(filters), after=after,
                                                     order=AUDIT_KEYSET.order_by),
                                    {**values, **after_params, "limit": AUDIT_KEYSET.fetch_limit(params)})
    items, cursor = AUDIT_KEYSET.page(rows, params, key=lambda r: (r["id"],))
    return json_response(Page[AuditLogRead](items=[AuditLogRead.model_validate({**r, "id": str(r["id"])})
                                                   for r in items], next_cursor=cursor))
