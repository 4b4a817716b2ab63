"""Series routes: /series (API.md "Meeting attendance"). Commands are tenet.meetings.series'; a command's answer is
read back through the query its GET uses (`queries.series`), in the command's transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.statements import statements
from tenet.meetings import queries, series, service
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import (
    RescheduleResult,
    SeriesChange,
    SeriesCreate,
    SeriesRead,
    SeriesReschedule,
    SeriesUpdate,
)

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
Reader = Annotated[Principal, Depends(require(Permission.READ))]
SeriesManager = Annotated[Principal, Depends(require(Permission.SERIES_MANAGE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match")]


async def _written(session: AsyncSession, series_id: uuid.UUID, principal: Principal, now: datetime) -> SeriesRead:
    """The series just written, read by the GET's query inside the writing transaction."""
    await session.flush()
    return SeriesRead.model_validate(await queries.series(await statements(session), series_id=series_id,
                                                          principal=principal, now=now))


@router.post("/series", status_code=status.HTTP_201_CREATED, response_model=SeriesChange,
             summary="Create a series: every occurrence becomes a meeting with its attendees",
             description="`rrule` is an RFC 5545 RRULE with COUNT or UNTIL (at most `TENET_SERIES_MAX_OCCURRENCES` "
                         "occurrences within 3 years); the time of day is `start_local_time` in the series' zone, "
                         "kept across DST.", responses=problem_responses(409, 422))
async def create_series(body: SeriesCreate, principal: SeriesManager, session: SessionDep, now: NowDep,
                        settings: SettingsDep) -> Response:
    made, created, _skipped = await series.create_series(
        session, principal_id=principal.id, fields=body.model_dump(exclude={"template_id"}),
        template_id=body.template_id, policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await _written(session, made.id, principal, now)
    answer = SeriesChange(series=read, created_meeting_ids=created, updated_meeting_ids=[], deleted_meeting_ids=[])
    return json_response(answer, status_code=201, headers={"Location": f"{queries.BASE}/series/{made.id}",
                                                           "ETag": etag(made.version)})


@router.get("/series", response_model=Page[SeriesRead], summary="Series (managers: all; others: organized)",
            responses=problem_responses(400))
async def list_series(principal: Reader, request: Request, params: PageDep) -> Response:
    items, cursor = await queries.series_page(reads(request), principal=principal, page=params)
    return json_response(Page[SeriesRead](items=[SeriesRead.model_validate(r) for r in items], next_cursor=cursor))


@router.get("/series/{series_id}", response_model=SeriesRead, summary="A series with its occurrences")
async def get_series(series_id: uuid.UUID, principal: Reader, request: Request) -> Response:
    read = SeriesRead.model_validate(await queries.series(reads(request), series_id=series_id, principal=principal,
                                                          now=clock_now(request)))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.patch("/series/{series_id}", response_model=SeriesChange, summary="Change a series and its future occurrences",
              description="Fields and attendees reach occurrences that have not started and were not edited alone "
                          "(`apply_to_exceptions` to include those). `rrule` may change only in COUNT or UNTIL: "
                          "extension generates the new dates, truncation deletes future ones beyond the new end; "
                          "a deleted occurrence never comes back. Another pattern answers 422 "
                          "`RECURRENCE_CHANGE_UNSUPPORTED` (truncate this series and start a new one). A series "
                          "managed by the Outlook sync refuses its title, description, location, online link and rule "
                          "(409 `OUTLOOK_MANAGED`).",
              responses=problem_responses(409, 412, 422))
async def update_series(series_id: uuid.UUID, body: SeriesUpdate, principal: SeriesManager, session: SessionDep,
                        now: NowDep, settings: SettingsDep, if_match: IfMatch = None) -> Response:
    made, created, updated, deleted = await series.update_series(
        session, series_id=series_id, principal_id=principal.id,
        changes=body.model_dump(exclude_unset=True, exclude={"apply_to_exceptions"}),
        apply_to_exceptions=body.apply_to_exceptions, expected_version=if_match_version(if_match),
        policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await _written(session, made.id, principal, now)
    return json_response(SeriesChange(series=read, created_meeting_ids=created, updated_meeting_ids=updated,
                                      deleted_meeting_ids=deleted), headers={"ETag": etag(read.version)})


@router.post("/series/{series_id}/reschedule", response_model=RescheduleResult,
             summary="Move an occurrence and the later ones (not started) by a shift or to a new time",
             description="`shift_minutes` moves each by wall-clock minutes (09:00 stays 09:00 local across DST); "
                         "`start_local_time` (and `duration_minutes`) sets a new local time of day. Occurrences "
                         "edited alone are skipped unless `include_exceptions`. Check-ins already made are judged "
                         "again for lateness. A series managed by the Outlook sync moves in Outlook only (409 "
                         "`OUTLOOK_MANAGED`).", responses=problem_responses(409, 422))
async def reschedule_series(series_id: uuid.UUID, body: SeriesReschedule, principal: SeriesManager, session: SessionDep,
                            now: NowDep) -> RescheduleResult:
    moved, skipped = await series.reschedule_series(
        session, series_id=series_id, from_meeting_id=queries.valid_meeting_id(body.from_meeting_id),
        principal_id=principal.id, shift_minutes=body.shift_minutes, start_local_time=body.start_local_time,
        duration_minutes=body.duration_minutes, include_exceptions=body.include_exceptions, now=now)
    return RescheduleResult(moved=moved, skipped=skipped)


@router.delete("/series/{series_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete a series and its meetings that have not started",
               description="Started and past occurrences stay as history (their reports still work).")
async def delete_series(series_id: uuid.UUID, principal: SeriesManager, session: SessionDep, now: NowDep) -> None:
    await series.delete_series(session, series_id=series_id, principal_id=principal.id, now=now)
