"""Meeting templates in the console (issue 18): the list (the query of `GET /templates`, by label, with its cursor),
"save as a template" from a meeting (its fields, its length and its required attendees, through the API's model and
command, `TemplateCreate` and `templates.create_template`), and a new meeting from a template (only the start is
asked: `service.create_meeting` with `template_id` fills the rest and copies the attendees, as `POST /meetings` with
`template_id` does). For holders of `meeting:template:manage` (the list and saving, the points their API routes
check) and `meeting:create` (a meeting from one)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Query, Request, Response
from pydantic import ValidationError

from tenet.deps import reads
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings import codes, queries, service, templates
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import MeetingCreate, TemplateCreate
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
_LOCAL = "%Y-%m-%dT%H:%M"
COPIED = ("title", "description", "location", "online_link", "city", "timezone", "late_grace_minutes",
          "checkin_opens_minutes_before", "rotating_online_code", "offline_checkin_enabled")


def parse_template_id(value: str) -> uuid.UUID:
    """A template id from a URL (the console's pages of templates); a 422 in words when it is none."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationFailed("This is not a template id", field="template_id") from None


@router.get("/templates")
async def templates_list(request: Request, cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.TEMPLATE_MANAGE)
    rows, next_cursor = await queries.templates(reads(request), page=PageParams(limit=50, cursor=cursor or None))
    return console.render(request, viewer, "meetings/templates.html", active="meetings", rows=rows,
                          next_cursor=next_cursor)


# --- save a meeting as a template ---------------------------------------------------------------------

async def _meeting(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    state = request.app.state
    assert viewer.principal is not None
    return await queries.meeting(reads(request), meeting_id=meeting_id, principal=viewer.principal,
                                 now=console.now(request), signer=codes.signer(state),
                                 base_url=section(state.settings, KernelSettings).public_base_url)


def _save_form(request: Request, viewer: Viewer, meeting: dict[str, Any], *, label: str, problem: str | None = None,
               status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/save_template.html", status_code=status_code,
                          active="meetings", meeting=meeting, label=label, problem=problem)


@router.get("/meetings/{meeting_id}/template")
async def save_template_form(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.TEMPLATE_MANAGE)
    meeting = await _meeting(request, viewer, meeting_id)
    return _save_form(request, viewer, meeting, label=meeting["title"])


@router.post("/meetings/{meeting_id}/template")
async def save_template(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.TEMPLATE_MANAGE)
    meeting = await _meeting(request, viewer, meeting_id)
    label = str(form.get("label", "")).strip()[:300]
    minutes = int((meeting["end_time"] - meeting["start_time"]).total_seconds() // 60)
    try:
        async with request.app.state.db.unit_of_work() as session:
            attendees = await queries.all_required_ids(await statements(session), meeting_id=meeting["id"],
                                                       principal=principal)
            try:
                fields = TemplateCreate.model_validate({
                    **{name: meeting[name] for name in COPIED}, "label": label,
                    "duration_minutes": max(1, min(minutes, 10080)),
                    "attendee_user_ids": [str(a) for a in attendees]}).model_dump()
            except ValidationError:
                raise ValidationFailed("The label is not valid", field="label") from None
            await templates.create_template(session, principal_id=principal.id, fields=fields,
                                            policy=service.MeetingPolicy.from_settings(request.app.state.settings),
                                            now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        return _save_form(request, viewer, meeting, label=label, problem=str(exc.code), status_code=exc.status)
    return console.see_other(f"{PREFIX}/templates")


# --- a new meeting from a template ----------------------------------------------------------------------

def _apply_form(request: Request, viewer: Viewer, template: dict[str, Any], *, values: dict[str, str],
                problems: dict[str, str] | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/apply_template.html", status_code=status_code,
                          active="meetings", meeting_template=template, values=values, problems=problems or {})


@router.get("/templates/{template_id}/meeting")
async def apply_template_form(request: Request, template_id: str) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.CREATE)
    template = await queries.template(reads(request), template_id=parse_template_id(template_id))
    settings: KernelSettings = request.app.state.settings
    zone = template["timezone"] or viewer.zone or settings.default_timezone
    return _apply_form(request, viewer, template, values={"start": "", "timezone": zone})


@router.post("/templates/{template_id}/meeting")
async def apply_template(request: Request, template_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.CREATE)
    template = await queries.template(reads(request), template_id=parse_template_id(template_id))
    values = {"start": str(form.get("start", "")).strip()[:20], "timezone": str(form.get("timezone", "")).strip()[:64]}
    try:
        zone = ZoneInfo(values["timezone"])
    except (ZoneInfoNotFoundError, ValueError):
        return _apply_form(request, viewer, template, values=values, problems={"timezone": "TIMEZONE_INVALID"},
                           status_code=422)
    try:
        start = datetime.strptime(values["start"], _LOCAL).replace(tzinfo=zone)
    except ValueError:
        return _apply_form(request, viewer, template, values=values, problems={"start": "VALIDATION_FAILED"},
                           status_code=422)
    try:
        body = MeetingCreate.model_validate({"start_time": start, "timezone": values["timezone"],
                                             "template_id": template["id"]}).model_dump(exclude_unset=True)
        body.pop("template_id")
        async with request.app.state.db.unit_of_work() as session:
            meeting, _ = await service.create_meeting(
                session, principal_id=principal.id, fields=body, attendee_ids=[], template_id=template["id"],
                policy=service.MeetingPolicy.from_settings(request.app.state.settings), now=console.now(request))
    except ValidationError:
        return _apply_form(request, viewer, template, values=values, problems={"start": "VALIDATION_FAILED"},
                           status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403):
            raise
        field = {"MEETING_TIME_INVALID": "start", "TIMEZONE_INVALID": "timezone"}.get(str(exc.code), "form")
        return _apply_form(request, viewer, template, values=values, problems={field: str(exc.code)},
                           status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{meeting.id}")
