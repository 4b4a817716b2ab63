"""Check-in routes: signed-in users, and guests without login (public, rate limited). Commands are
tenet.meetings.checkin's."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from tenet.deps import NowDep, StatementsDep, client_address, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, json_response, problem_responses
from tenet.kernel.settings import section
from tenet.meetings import checkin, codes, errors, queries
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import CheckInRequest, CheckInResult, GuestCheckInRequest, PublicMeetingRead
from tenet.meetings.settings import MeetingSettings

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
CheckInUser = Annotated[Principal, Depends(require(Permission.CHECK_IN))]

_REFUSALS = (
    "Refusals answer a stable code and are recorded in the meeting's scan log: 409 `CHECK_IN_WINDOW_NOT_OPEN` "
    "(with `opens_at`), `CHECK_IN_WINDOW_CLOSED`, `MEETING_CANCELLED`, `DEVICE_ALREADY_USED` (this device checked "
    "someone else in), `CHECK_IN_MODE_DISABLED`; 403 `CHECK_IN_CODE_REQUIRED` / `_INVALID` / `_EXPIRED` (rotating "
    "online code), 403 `CHECK_IN_OFFLINE_CODE_REQUIRED` / `_INVALID` (the offline mode needs `code`, the meeting's "
    "offline code its offline QR code's address carries). Scanning again answers the existing attendance with 200 "
    "and `already_checked_in: true`.")


def _answer(outcome: checkin.CheckInOutcome) -> Response:
    return json_response(CheckInResult.model_validate(outcome.answer()),
                         status_code=200 if outcome.already_checked_in else 201)


@router.post("/meetings/{meeting_id}/check-in", status_code=201, response_model=CheckInResult,
             summary="Check yourself in (201 new, 200 already checked in)",
             description="Any meeting whose id you have (the QR code is the capability); if you are not a required "
                         "attendee you are counted as a walk-in. " + _REFUSALS,
             responses={200: {"model": CheckInResult, "description": "Already checked in"},
                        **problem_responses(403, 409, 422)})
async def check_in(meeting_id: str, body: CheckInRequest, principal: CheckInUser, session: StatementsDep, now: NowDep,
                   request: Request) -> Response:
    outcome = await checkin.check_in_user(
        session, meeting_id=queries.valid_meeting_id(meeting_id), principal_id=principal.id, mode=body.mode.value,
        device_id=body.device_id, code=body.code, now=now, codes=codes.signer(request.app.state))
    return _answer(outcome)


@router.get("/public/meetings/{meeting_id}", response_model=PublicMeetingRead,
            summary="What the check-in page shows (public)",
            description="Title, place, times (with the meeting's local rendering), status and the check-in window; "
                        "never the description, online link, organizer or counts.")
async def public_meeting(meeting_id: str, request: Request) -> Response:
    row = await queries.public_meeting(reads(request), meeting_id=meeting_id, now=clock_now(request))
    return json_response(PublicMeetingRead.model_validate(row))


@router.post("/public/meetings/{meeting_id}/check-in", status_code=201, response_model=CheckInResult,
             summary="Guest check-in without an account (public, rate limited)",
             description="A name and a device id are required; an email or phone identifies the guest (the same "
                         "guest scanning again is answered with their attendance). At most "
                         "`TENET_GUEST_CHECKIN_LIMIT` attempts per client address per meeting (429 "
                         "`GUEST_CHECKIN_LIMIT_REACHED` with `Retry-After`). " + _REFUSALS,
             responses={200: {"model": CheckInResult, "description": "Already checked in"},
                        **problem_responses(403, 409, 422, 429)})
async def guest_check_in(meeting_id: str, body: GuestCheckInRequest, session: StatementsDep, now: NowDep,
                         request: Request) -> Response:
    meeting_id = queries.valid_meeting_id(meeting_id)
    guest = checkin.Guest.clean(name=body.name, email=body.email, phone=body.phone, organization=body.organization)
    address = client_address(request)
    try:
        recorded_address: str | None = str(ipaddress.ip_address(address))
    except ValueError:
        recorded_address = None
    rate = section(request.app.state.settings, MeetingSettings).guest_checkin_limit
    # Its own short transaction, before the check-in's unit of work uses a connection: the count persists
    # whatever the check-in answers, and the request never holds two pooled connections. Only a meeting that
    # exists is counted (in the same statement): made-up ids write nothing. One that is not open still counts,
    # as each of its refusals writes a scan (MA-INV-11) and the limit is what bounds them.
    counted = await request.app.state.rate_limiter.consume(
        f"ma.guest-checkin:{meeting_id}:{address}", rate, now, "guest check-ins",
        error=lambda retry_after: errors.GuestCheckInLimitReached(retry_after_seconds=retry_after),
        only_if=checkin.meeting_exists(meeting_id))
    if counted is None:
        raise errors.MeetingNotFound()
    outcome = await checkin.check_in_guest(
        session, meeting_id=meeting_id, guest=guest, mode=body.mode.value, device_id=body.device_id, code=body.code,
        now=now, client_address=recorded_address, codes=codes.signer(request.app.state))
    return _answer(outcome)
