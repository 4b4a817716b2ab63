"""Series and template routes: /series, /templates (API.md "Meeting attendance")."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response, status

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, SqlKeyset, page_params
from tenet.kernel.reads import BoundReads, Reads
from tenet.meetings import errors, queries, series, service, times
from tenet.meetings.http import router
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import (
    RescheduleResult,
    SeriesChange,
    SeriesCreate,
    SeriesRead,
    SeriesReschedule,
    SeriesUpdate,
    TemplateCreate,
    TemplateRead,
    TemplateUpdate,
)

Reader = Annotated[Principal, Depends(require(Permission.READ))]
SeriesManager = Annotated[Principal, Depends(require(Permission.SERIES_MANAGE))]
TemplateManager = Annotated[Principal, Depends(require(Permission.TEMPLATE_MANAGE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match")]

SERIES_COLUMNS = """s.id, s.title, s.description, s.location, s.online_link, s.city, s.timezone, s.rrule, s.start_date,
       s.start_local_time, s.duration_minutes, s.exdates, s.organizer_id, s.late_grace_minutes,
       s.checkin_opens_minutes_before, s.rotating_online_code, s.offline_checkin_enabled, s.template_id, s.status,
       s.created_by_id, s.created_at, s.updated_at, s.version,
       ARRAY(SELECT user_id FROM meeting_attendance.series_required_attendees r WHERE r.series_id = s.id
             ORDER BY user_id) AS required_attendee_ids"""
SERIES_SQL = f"""
    SELECT {SERIES_COLUMNS},
           (SELECT coalesce(json_agg(json_build_object('meeting_id', m.id, 'occurrence_date', m.series_occurrence_date,
                                                       'start_time', m.start_time, 'end_time', m.end_time,
                                                       'status', m.status, 'is_exception', m.is_exception)
                                     ORDER BY m.series_occurrence_date), '[]')
              FROM meeting_attendance.meetings m WHERE m.series_id = s.id AND m.status <> 'DELETED') AS occurrences
      FROM meeting_attendance.meeting_series s WHERE s.id = %(id)s AND s.status = 'ACTIVE'
"""  # noqa: S608  (constants of this module)
SERIES_KEYSET = SqlKeyset(("s.created_at", "s.id"), (datetime, uuid.UUID))
SERIES_LIST_SQL = f"""
    SELECT {SERIES_COLUMNS} FROM meeting_attendance.meeting_series s
     WHERE s.status = 'ACTIVE' AND {{scope}} AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)


def _occurrences(row: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    found = []
    for item in row["occurrences"]:
        start, end = datetime.fromisoformat(item["start_time"]), datetime.fromisoformat(item["end_time"])
        found.append({"meeting_id": item["meeting_id"], "occurrence_date": item["occurrence_date"],
                      "start_time": start, "is_exception": item["is_exception"],
                      "status": times.clock_status(item["status"], start, end, now)})
    return found


async def read_series(db_reads: Reads, series_id: uuid.UUID, principal: Principal, now: datetime) -> SeriesRead:
    """Managers see every series, others only the ones they organize (a Leader's team meeting); 404 otherwise."""
    row = await db_reads.one(SERIES_SQL, {"id": series_id})
    if row is None or not (queries.is_manager(principal) or row["organizer_id"] == principal.id):
        raise errors.SeriesNotFound()
    return SeriesRead.model_validate({**row, "occurrences": _occurrences(row, now)})


@router.post("/series", status_code=status.HTTP_201_CREATED, response_model=SeriesChange,
             summary="Create a series: every occurrence becomes a meeting with its attendees",
             description="`rrule` is an RFC 5545 RRULE with COUNT or UNTIL (at most `TENET_SERIES_MAX_OCCURRENCES` "
                         "occurrences within 3 years); the time of day is `start_local_time` in the series' zone, "
                         "kept across DST.", responses=problem_responses(409, 422))
async def create_series(body: SeriesCreate, user: SeriesManager, session: SessionDep, now: NowDep,
                        settings: SettingsDep) -> Response:
    made, created, _skipped = await series.create_series(
        session, actor_id=user.id, fields=body.model_dump(exclude={"template_id"}), template_id=body.template_id,
        policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await read_series(BoundReads(await session.connection()), made.id, user, now)
    answer = SeriesChange(series=read, created_meeting_ids=created, updated_meeting_ids=[], deleted_meeting_ids=[])
    return json_response(answer, status_code=201, headers={"Location": f"{queries.BASE}/series/{made.id}",
                                                           "ETag": etag(made.version)})


@router.get("/series", response_model=Page[SeriesRead], summary="Series (managers: all; others: organized)",
            responses=problem_responses(400))
async def list_series(user: Reader, request: Request, params: PageDep) -> Response:
    after, after_params = SERIES_KEYSET.after(params)
    scope = "TRUE" if queries.is_manager(user) else "s.organizer_id = %(caller)s"
    rows = await reads(request).all(SERIES_LIST_SQL.format(scope=scope, after=after, order=SERIES_KEYSET.order_by),
                                    {"caller": user.id, "limit": SERIES_KEYSET.fetch_limit(params), **after_params})
    items, cursor = SERIES_KEYSET.page(rows, params, key=lambda r: (r["created_at"], r["id"]))
    return json_response(Page[SeriesRead](items=[SeriesRead.model_validate(r) for r in items], next_cursor=cursor))


@router.get("/series/{series_id}", response_model=SeriesRead, summary="A series with its occurrences")
async def get_series(series_id: uuid.UUID, user: Reader, request: Request) -> Response:
    read = await read_series(reads(request), series_id, user, clock_now(request))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.patch("/series/{series_id}", response_model=SeriesChange, summary="Change a series and its future occurrences",
              description="Fields and attendees reach occurrences that have not started and were not edited alone "
                          "(`apply_to_exceptions` to include those). `rrule` may change only in COUNT or UNTIL: "
                          "extension generates the new dates, truncation deletes future ones beyond the new end; "
                          "a deleted occurrence never comes back. Another pattern answers 422 "
                          "`RECURRENCE_CHANGE_UNSUPPORTED` (truncate this series and start a new one).",
              responses=problem_responses(409, 412, 422))
async def update_series(series_id: uuid.UUID, body: SeriesUpdate, user: SeriesManager, session: SessionDep,
                        now: NowDep, settings: SettingsDep, if_match: IfMatch = None) -> Response:
    made, created, updated, deleted = await series.update_series(
        session, series_id=series_id, actor_id=user.id,
        changes=body.model_dump(exclude_unset=True, exclude={"apply_to_exceptions"}),
        apply_to_exceptions=body.apply_to_exceptions, expected_version=if_match_version(if_match),
        policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await read_series(BoundReads(await session.connection()), made.id, user, now)
    return json_response(SeriesChange(series=read, created_meeting_ids=created, updated_meeting_ids=updated,
                                      deleted_meeting_ids=deleted), headers={"ETag": etag(read.version)})


@router.post("/series/{series_id}/reschedule", response_model=RescheduleResult,
             summary="Move an occurrence and the later ones (not started) by a shift or to a new time",
             description="`shift_minutes` moves each by wall-clock minutes (09:00 stays 09:00 local across DST); "
                         "`start_local_time` (and `duration_minutes`) sets a new local time of day. Occurrences "
                         "edited alone are skipped unless `include_exceptions`. Check-ins already made are judged "
                         "again for lateness.", responses=problem_responses(409, 422))
async def reschedule_series(series_id: uuid.UUID, body: SeriesReschedule, user: SeriesManager, session: SessionDep,
                            now: NowDep) -> RescheduleResult:
    moved, skipped = await series.reschedule_series(
        session, series_id=series_id, from_meeting_id=queries.valid_meeting_id(body.from_meeting_id),
        actor_id=user.id, shift_minutes=body.shift_minutes, start_local_time=body.start_local_time,
        duration_minutes=body.duration_minutes, include_exceptions=body.include_exceptions, now=now)
    return RescheduleResult(moved=moved, skipped=skipped)


@router.delete("/series/{series_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete a series and its meetings that have not started",
               description="Started and past occurrences stay as history (their reports still work).")
async def delete_series(series_id: uuid.UUID, user: SeriesManager, session: SessionDep, now: NowDep) -> None:
    await series.delete_series(session, series_id=series_id, actor_id=user.id, now=now)


# --- templates -------------------------------------------------------------------------------------------

TEMPLATE_COLUMNS = """t.id, t.label, t.title, t.description, t.location, t.online_link, t.city, t.timezone,
       t.duration_minutes, t.late_grace_minutes, t.checkin_opens_minutes_before, t.rotating_online_code,
       t.offline_checkin_enabled, t.created_by_id, t.created_at, t.updated_at, t.version,
       ARRAY(SELECT user_id FROM meeting_attendance.template_attendees a WHERE a.template_id = t.id
             ORDER BY user_id) AS attendee_user_ids"""
TEMPLATE_SQL = f"SELECT {TEMPLATE_COLUMNS} FROM meeting_attendance.templates t WHERE t.id = %(id)s AND t.status = 'ACTIVE'"  # noqa: S608, E501
TEMPLATE_KEYSET = SqlKeyset(("lower(t.label)", "t.id"), (str, uuid.UUID))
TEMPLATE_LIST_SQL = f"""
    SELECT {TEMPLATE_COLUMNS}, lower(t.label) AS sort_label FROM meeting_attendance.templates t
     WHERE t.status = 'ACTIVE' AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)


async def read_template(db_reads: Reads, template_id: uuid.UUID) -> TemplateRead:
    row = await db_reads.one(TEMPLATE_SQL, {"id": template_id})
    if row is None:
        raise errors.TemplateNotFound()
    return TemplateRead.model_validate(row)


@router.post("/templates", status_code=status.HTTP_201_CREATED, response_model=TemplateRead,
             summary="Create a meeting template with its attendees", responses=problem_responses(409, 422))
async def create_template(body: TemplateCreate, user: TemplateManager, session: SessionDep, now: NowDep,
                          settings: SettingsDep) -> Response:
    made = await series.create_template(session, actor_id=user.id, fields=body.model_dump(),
                                        policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await read_template(BoundReads(await session.connection()), made.id)
    return json_response(read, status_code=201, headers={"Location": f"{queries.BASE}/templates/{made.id}",
                                                         "ETag": etag(made.version)})


@router.get("/templates", response_model=Page[TemplateRead], summary="Templates by label",
            responses=problem_responses(400))
async def list_templates(user: TemplateManager, request: Request, params: PageDep) -> Response:
    after, after_params = TEMPLATE_KEYSET.after(params)
    rows = await reads(request).all(TEMPLATE_LIST_SQL.format(after=after, order=TEMPLATE_KEYSET.order_by),
                                    {"limit": TEMPLATE_KEYSET.fetch_limit(params), **after_params})
    items, cursor = TEMPLATE_KEYSET.page(rows, params, key=lambda r: (r["sort_label"], r["id"]))
    return json_response(Page[TemplateRead](items=[TemplateRead.model_validate(r) for r in items],
                                            next_cursor=cursor))


@router.get("/templates/{template_id}", response_model=TemplateRead, summary="One template")
async def get_template(template_id: uuid.UUID, user: TemplateManager, request: Request) -> Response:
    read = await read_template(reads(request), template_id)
    return json_response(read, headers={"ETag": etag(read.version)})


@router.patch("/templates/{template_id}", response_model=TemplateRead, summary="Change a template",
              description="Meetings already made from it are unchanged.", responses=problem_responses(409, 412, 422))
async def update_template(template_id: uuid.UUID, body: TemplateUpdate, user: TemplateManager, session: SessionDep,
                          now: NowDep, if_match: IfMatch = None) -> Response:
    await series.update_template(session, template_id=template_id, actor_id=user.id,
                                 changes=body.model_dump(exclude_unset=True),
                                 expected_version=if_match_version(if_match), now=now)
    read = await read_template(BoundReads(await session.connection()), template_id)
    return json_response(read, headers={"ETag": etag(read.version)})


@router.delete("/templates/{template_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a template")
async def delete_template(template_id: uuid.UUID, user: TemplateManager, session: SessionDep, now: NowDep) -> None:
    await series.delete_template(session, template_id=template_id, actor_id=user.id, now=now)
