"""Routes of meetings: /api/v1/meeting-attendance/meetings, their required attendees and QR codes (API.md "Meeting
attendance"). Commands are tenet.meetings.service's; a command's answer is read back through the query its GET
uses (`queries.meeting`), in the command's transaction."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.reads import Row
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings import codes, errors, queries, reports, service
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import (
    AttendeeRead,
    ClockStatus,
    DisplayCode,
    MeetingCancel,
    MeetingCreate,
    MeetingExternalRead,
    MeetingRead,
    MeetingSummary,
    MeetingUpdate,
    Mode,
    PersonRead,
    QrCodesRegenerated,
    RequiredAttendees,
    RequiredAttendeesResult,
)

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
Reader = Annotated[Principal, Depends(require(Permission.READ))]
Creator = Annotated[Principal, Depends(require(Permission.CREATE))]
Updater = Annotated[Principal, Depends(require(Permission.UPDATE))]
Deleter = Annotated[Principal, Depends(require(Permission.DELETE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The meeting\'s ETag ("<version>")')]


def base_url(settings: KernelSettings) -> str:
    return section(settings, KernelSettings).public_base_url


async def meeting_answer(session: AsyncSession, meeting_id: str, principal: Principal, now: datetime,
                         request: Request, *, status_code: int = 200) -> Response:
    """The MeetingRead of a meeting just written, read by the GET's query inside the writing transaction (the read
    path would not see it before the commit)."""
    await session.flush()
    row = await queries.meeting(await statements(session), meeting_id=meeting_id, principal=principal, now=now,
                                base_url=base_url(request.app.state.settings), signer=codes.signer(request.app.state))
    return _meeting_response(row, status_code=status_code)


def _meeting_response(row: dict[str, Any], *, status_code: int = 200) -> Response:
    """The full view with its ETag, or an external attendee's restricted view (no version to name)."""
    if row.get("view") == "restricted":
        return json_response(MeetingExternalRead.model_validate(row), status_code=status_code)
    return json_response(MeetingRead.model_validate(row), status_code=status_code,
                         headers={"ETag": etag(row["version"])})


@router.post("/meetings", status_code=status.HTTP_201_CREATED, response_model=MeetingRead,
             summary="Create a meeting (managers)",
             description="With its required attendees (system users only) and both QR codes. A `template_id` "
                         "fills every absent field and adds the template's attendees (inactive ones are skipped "
                         "and listed in the `X-Skipped-Attendees` header).",
             responses=problem_responses(404, 409, 422))
async def create_meeting(body: MeetingCreate, principal: Creator, session: SessionDep, now: NowDep,
                         settings: SettingsDep, request: Request) -> Response:
    fields = body.model_dump(exclude={"required_attendee_ids", "template_id"}, exclude_unset=True)
    meeting, skipped = await service.create_meeting(
        session, principal_id=principal.id, fields=fields, attendee_ids=body.required_attendee_ids,
        template_id=body.template_id, policy=service.MeetingPolicy.from_settings(settings), now=now)
    response = await meeting_answer(session, meeting.id, principal, now, request, status_code=201)
    response.headers["Location"] = f"{queries.BASE}/meetings/{meeting.id}"
    if skipped:
        response.headers["X-Skipped-Attendees"] = ",".join(str(s) for s in skipped)
    return response


@router.get("/meetings", response_model=Page[MeetingSummary], summary="Meetings by start time",
            description="Your meetings (created, organized, required at, checked in to); managers may ask "
                        "`scope=all`. `from`/`to` bound the start time (half-open). `city` matches the city whole "
                        "(case-insensitive); `organizer` is text in the organizer's name or email. For someone who "
                        "is not a manager, `series_id` and `organizer` match only meetings whose full view they "
                        "have (a walk-in's restricted view hides both).",
            responses=problem_responses(400, 422))
async def list_meetings(
    principal: Reader, request: Request, params: PageDep,
    scope: Annotated[str, Query(pattern="^(mine|all)$")] = "mine",
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
    status_filter: Annotated[ClockStatus | None, Query(alias="status")] = None,
    series_id: uuid.UUID | None = None,
    city: Annotated[str | None, Query(max_length=100)] = None,
    organizer: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    for value in (start, end):
        if value is not None and value.tzinfo is None:
            raise errors.ReportRangeInvalid("from and to must carry a UTC offset")
    reports.check_window(start, end)
    if start is not None and end is not None and end <= start:
        raise errors.ReportRangeInvalid("to must be after from")
    rows, cursor = await queries.meetings(reads(request), principal=principal, scope=scope, start=start, end=end,
                                          status=status_filter.value if status_filter else None,
                                          series_id=series_id, city=city, organizer=organizer, page=params,
                                          now=clock_now(request))
    return json_response(Page[MeetingSummary](items=[MeetingSummary.model_validate(r) for r in rows],
                                              next_cursor=cursor))


@router.get("/meetings/{meeting_id}", response_model=MeetingRead | MeetingExternalRead, summary="One meeting",
            description="Managers see every meeting; others the ones they created, organize, are required at or "
                        "checked in to (404 otherwise). Counts and codes are shown to managers, the creator and "
                        "the organizer. An external attendee (a signed-in walk-in, on no list) gets the restricted "
                        "view, as for the agenda: `view: restricted`, what the public check-in page shows and their "
                        "own attendance; never the description, online link, organizer or cancel reason.")
async def get_meeting(meeting_id: str, principal: Reader, request: Request) -> Response:
    row = await queries.meeting(reads(request), meeting_id=meeting_id, principal=principal, now=clock_now(request),
                                base_url=base_url(request.app.state.settings), signer=codes.signer(request.app.state))
    return _meeting_response(row)


@router.patch("/meetings/{meeting_id}", response_model=MeetingRead, summary="Change a meeting (managers)",
              description="Absent fields are unchanged. `If-Match` (the ETag) makes the change conditional (412 "
                          "`PRECONDITION_FAILED`). Moving the start or the grace recomputes who was late; an "
                          "occurrence edited alone becomes an exception of its series. A meeting managed by the "
                          "Outlook sync refuses its title, description, location, online link, start, end and time "
                          "zone (409 `OUTLOOK_MANAGED`): they change in Outlook.",
              responses=problem_responses(409, 412, 422))
async def update_meeting(meeting_id: str, body: MeetingUpdate, principal: Updater, session: SessionDep, now: NowDep,
                         request: Request, if_match: IfMatch = None) -> Response:
    await service.update_meeting(session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id,
                                 changes=body.model_dump(exclude_unset=True),
                                 expected_version=if_match_version(if_match), now=now)
    return await meeting_answer(session, meeting_id, principal, now, request)


@router.delete("/meetings/{meeting_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a meeting",
               description="Soft delete: the meeting answers 404 from now on; its attendances stay for history.")
async def delete_meeting(meeting_id: str, principal: Deleter, session: SessionDep, now: NowDep) -> None:
    await service.delete_meeting(session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id,
                                 now=now)


@router.post("/meetings/{meeting_id}/cancel", response_model=MeetingRead, summary="Cancel a meeting (final)",
             description="Check-ins are refused from then on (409 `MEETING_CANCELLED`); a cancelled meeting can "
                         "still be deleted, not reopened. A meeting managed by the Outlook sync is cancelled in "
                         "Outlook (409 `OUTLOOK_MANAGED`).", responses=problem_responses(409, 422))
async def cancel_meeting(meeting_id: str, principal: Updater, session: SessionDep, now: NowDep, request: Request,
                         body: MeetingCancel | None = None) -> Response:
    await service.cancel_meeting(session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id,
                                 reason=body.reason if body else None, now=now)
    return await meeting_answer(session, meeting_id, principal, now, request)


@router.get("/meetings/{meeting_id}/required-attendees", response_model=Page[AttendeeRead],
            summary="Required attendees, by name", responses=problem_responses(400, 403))
async def list_required_attendees(meeting_id: str, principal: Reader, request: Request, params: PageDep) -> Response:
    rows, cursor = await queries.required_attendees(reads(request), meeting_id=meeting_id, principal=principal,
                                                    page=params)
    return json_response(Page[AttendeeRead](items=[AttendeeRead.model_validate(r) for r in rows],
                                            next_cursor=cursor))


@router.get("/people", response_model=list[PersonRead], summary="Search people to add as attendees (managers)",
            description="Active accounts whose name or email contains `q` (case-insensitive), by name; at most "
                        "`limit` (default 20). What the console's attendee picker shows.",
            responses=problem_responses(422))
async def search_people(principal: Updater, request: Request, q: Annotated[str, Query(min_length=1, max_length=100)],
                        limit: Annotated[int, Query(ge=1, le=50)] = 20) -> list[PersonRead]:
    rows = await queries.people(reads(request), text=q, limit=limit)
    return [PersonRead.model_validate(r) for r in rows]


@router.put("/meetings/{meeting_id}/required-attendees", response_model=RequiredAttendeesResult,
            summary="Replace the required attendees (system users only)",
            description="Unknown ids answer 422 `ATTENDEE_NOT_FOUND`; disabled or deleted accounts 409 "
                        "`ACCOUNT_NOT_ACTIVE`. `If-Match` takes the meeting's ETag.",
            responses=problem_responses(409, 412, 422))
async def set_required_attendees(meeting_id: str, body: RequiredAttendees, principal: Updater, session: SessionDep,
                                 now: NowDep, if_match: IfMatch = None) -> RequiredAttendeesResult:
    listed, added, removed = await service.set_required_attendees(
        session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id, user_ids=body.user_ids,
        expected_version=if_match_version(if_match), now=now)
    return RequiredAttendeesResult(user_ids=listed, added=added, removed=removed)


def _scan_url(request: Request, row: Row, mode: Mode) -> str | None:
    return codes.scan_url(row, mode.value, codes.signer(request.app.state), clock_now(request))


@router.get("/meetings/{meeting_id}/qrcode", summary="A QR code image (managers, creator, organizer)",
            description="The code of the mode, as SVG or PNG: the check-in address, with the meeting's offline "
                        "code for the offline mode (the same for the meeting's life: print it). For a meeting with "
                        "a rotating online code, the online image carries the current code (not cached).",
            responses={200: {"content": {"image/svg+xml": {}, "image/png": {}}}, **problem_responses(403)})
async def get_qr_code(meeting_id: str, principal: Reader, request: Request, mode: Mode = Mode.ONLINE,
                      image_format: Annotated[str, Query(alias="format", pattern="^(svg|png)$")] = "svg") -> Response:
    row = await queries.qr_code(reads(request), meeting_id=meeting_id, mode=mode.value, principal=principal)
    media = "image/svg+xml" if image_format == "svg" else "image/png"
    url = _scan_url(request, row, mode)
    if mode == Mode.ONLINE and url is not None:
        rendered = codes.render(url)
        body = rendered.svg.encode() if image_format == "svg" else rendered.png
        return Response(body, media_type=media, headers={"Cache-Control": "no-store"})
    if url is not None:  # offline: the image follows from the address and the key alone
        tag = f'"o-{hashlib.sha256(url.encode()).hexdigest()[:20]}-{image_format}"'
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        rendered = codes.render(url)
        body = rendered.svg.encode() if image_format == "svg" else rendered.png
        return Response(body, media_type=media, headers={"ETag": tag, "Cache-Control": "private, no-cache"})
    tag = f'"{int(row["generated_at"].timestamp() * 1000)}-{image_format}"'
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers={"ETag": tag})
    body = row["svg"].encode() if image_format == "svg" else bytes(row["png"])
    return Response(body, media_type=media, headers={"ETag": tag, "Cache-Control": "private, no-cache"})


@router.get("/meetings/{meeting_id}/display-code", response_model=DisplayCode,
            summary="The code the display page shows (managers, creator, organizer)",
            description="The address to show and its image: for the offline mode with the meeting's offline code; "
                        "for a rotating online code, the current address with its signed code, when it expires and "
                        "when to ask again.", responses=problem_responses(403))
async def get_display_code(meeting_id: str, principal: Reader, request: Request, mode: Mode = Mode.ONLINE) -> Response:
    row = await queries.qr_code(reads(request), meeting_id=meeting_id, mode=mode.value, principal=principal)
    url = _scan_url(request, row, mode)
    if mode == Mode.ONLINE and url is not None:
        signer, now = codes.signer(request.app.state), clock_now(request)
        answer = DisplayCode(mode=mode, url=url, svg=codes.render(url).svg, expires_at=signer.expires_at(now),
                             refresh_after_seconds=max(1, int((signer.expires_at(now) - now).total_seconds())))
    elif url is not None:
        answer = DisplayCode(mode=mode, url=url, svg=codes.render(url).svg, expires_at=None,
                             refresh_after_seconds=None)
    else:
        answer = DisplayCode(mode=mode, url=row["payload"], svg=row["svg"], expires_at=None,
                             refresh_after_seconds=None)
    return json_response(answer, headers={"Cache-Control": "no-store"})


@router.post("/meetings/{meeting_id}/qrcode/regenerate", response_model=QrCodesRegenerated,
             summary="Regenerate both stored codes from the current TENET_PUBLIC_BASE_URL",
             description="The addresses never change path (printed codes keep working); this rewrites the images "
                         "after a change of the public base URL (spec: regenerate after migration).")
async def regenerate_codes(meeting_id: str, principal: Updater, session: SessionDep, now: NowDep,
                           settings: SettingsDep, request: Request) -> QrCodesRegenerated:
    url = base_url(settings)
    await service.regenerate_codes(session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id,
                                   base_url=url, now=now)
    offline_code = codes.signer(request.app.state).offline_code(meeting_id)
    refs = queries.code_refs(meeting_id, now, url, offline_code=offline_code)
    return QrCodesRegenerated.model_validate(refs)
