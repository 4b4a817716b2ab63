"""Cancel a meeting from its page (issue 18): a confirm step (a page of its own, saying what cancelling means, with
the optional reason the API takes), then the API's own command (`service.cancel_meeting`, validated by the API's
request model `MeetingCancel`). Offered to holders of `meeting:update`, the point the API's route checks, while the
meeting is not cancelled; a refusal (already cancelled meanwhile, a reason too long) is said on the form in words."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings import codes, queries, service
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import MeetingCancel
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
REASON_MAX = 500  # MeetingCancel.reason (Text500)


async def _meeting(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    """The meeting as its page shows it (the GET's query: 404 for a meeting the caller may not see)."""
    state = request.app.state
    return await queries.meeting(reads(request), meeting_id=meeting_id, principal=viewer.require(Permission.UPDATE),
                                 now=console.now(request), signer=codes.signer(state),
                                 base_url=section(state.settings, KernelSettings).public_base_url)


def _form(request: Request, viewer: Viewer, meeting: dict[str, Any], *, reason: str = "",
          problem: str | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/cancel.html", status_code=status_code, active="meetings",
                          meeting=meeting, reason=reason, problem=problem, reason_max=REASON_MAX)


@router.get("/meetings/{meeting_id}/cancel")
async def cancel_form(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    meeting = await _meeting(request, viewer, meeting_id)
    if meeting["status"] == "CANCELLED":  # nothing to confirm: the form says so, as the API's refusal would
        return _form(request, viewer, meeting, problem="MEETING_CANCELLED", status_code=409)
    return _form(request, viewer, meeting)


@router.post("/meetings/{meeting_id}/cancel")
async def cancel(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.UPDATE)
    reason = str(form.get("reason", "")).strip()
    try:
        body = MeetingCancel.model_validate({"reason": reason or None})
    except ValidationError:
        meeting = await _meeting(request, viewer, meeting_id)
        return _form(request, viewer, meeting, reason=reason, problem="VALIDATION_FAILED", status_code=422)
    try:
        async with request.app.state.db.unit_of_work() as session:
            await service.cancel_meeting(session, meeting_id=queries.valid_meeting_id(meeting_id),
                                         principal_id=principal.id, reason=body.reason, now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        meeting = await _meeting(request, viewer, meeting_id)
        return _form(request, viewer, meeting, reason=reason, problem=str(exc.code), status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}")
