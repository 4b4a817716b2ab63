"""Create and edit a meeting in the console (issue 18): one form, validated by the API's own request models
(`MeetingCreate`, `MeetingUpdate`) and run by the API's own commands (`service.create_meeting`, `update_meeting`).
Times are typed as local times of the meeting's zone. A refusal is said next to the field it concerns; an edit of
a meeting someone else changed meanwhile (the form carries the version it showed) answers 412 with the new state."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings import codes, queries, service
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import MeetingCreate, MeetingUpdate
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
TEXT_FIELDS = ("title", "location", "city", "online_link", "description")
NUMBER_FIELDS = ("late_grace_minutes", "checkin_opens_minutes_before")
FLAGS = ("offline_checkin_enabled", "rotating_online_code")
# A service's refusal -> the field it concerns (the rest are said above the form).
FIELD_OF_CODE = {"MEETING_TIME_INVALID": "end", "TIMEZONE_INVALID": "timezone"}
_LOCAL = "%Y-%m-%dT%H:%M"


class FormProblems(Exception):
    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(problems)
        self.problems = problems


def _values_of(meeting: dict[str, Any]) -> dict[str, Any]:
    """The form's values for a meeting as its GET shows it (times local to its zone)."""
    zone = ZoneInfo(meeting["timezone"])
    values = {name: meeting.get(name) or "" for name in TEXT_FIELDS}
    values.update({name: str(meeting[name]) for name in NUMBER_FIELDS})
    values.update({name: bool(meeting[name]) for name in FLAGS})
    values.update(timezone=meeting["timezone"], start=meeting["start_time"].astimezone(zone).strftime(_LOCAL),
                  end=meeting["end_time"].astimezone(zone).strftime(_LOCAL))
    return values


def _posted_values(form: Any) -> dict[str, Any]:
    values: dict[str, Any] = {name: str(form.get(name, ""))[:2000].strip() for name in (
        *TEXT_FIELDS, *NUMBER_FIELDS, "timezone", "start", "end")}
    values.update({name: form.get(name) == "on" for name in FLAGS})
    return values


def _instant(local: str, zone: str, field: str) -> datetime:
    try:
        return datetime.strptime(local, _LOCAL).replace(tzinfo=ZoneInfo(zone))
    except ValueError:
        raise FormProblems({field: "VALIDATION_FAILED"}) from None


def _body(values: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The API request body the form means: empty texts absent (create) or cleared (edit), local times made
    instants of the meeting's zone."""
    zone = values["timezone"]
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise FormProblems({"timezone": "TIMEZONE_INVALID"}) from None
    body: dict[str, Any] = {"timezone": zone, "start_time": _instant(values["start"], zone, "start"),
                            "end_time": _instant(values["end"], zone, "end")}
    for name in (*TEXT_FIELDS, *NUMBER_FIELDS):
        if values[name] or name == "title":  # the form has no template to give a title: an empty one is refused
            body[name] = values[name]
        elif not creating and name in TEXT_FIELDS and name != "title":
            body[name] = None
    body.update({name: values[name] for name in FLAGS})
    return body


def _validated(model: type[MeetingCreate] | type[MeetingUpdate], body: dict[str, Any]) -> dict[str, Any]:
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        problems = {}
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "form"
            problems[{"start_time": "start", "end_time": "end"}.get(name, name)] = "VALIDATION_FAILED"
        raise FormProblems(problems) from None
    return parsed.model_dump(exclude_unset=True)


def _form(request: Request, viewer: Viewer, *, values: dict[str, Any], meeting: dict[str, Any] | None = None,
          problems: dict[str, str] | None = None, status_code: int = 200, notice: str | None = None) -> Response:
    return console.render(request, viewer, "meetings/meeting_form.html", status_code=status_code, active="meetings",
                          values=values, meeting=meeting, problems=problems or {}, notice=notice)


def _refusal(exc: DomainError) -> dict[str, str]:
    return {FIELD_OF_CODE.get(str(exc.code), "form"): str(exc.code)}


@router.get("/meetings/new")
async def new_meeting_form(request: Request) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.CREATE)
    settings: KernelSettings = request.app.state.settings
    values: dict[str, Any] = {name: "" for name in (*TEXT_FIELDS, *NUMBER_FIELDS, "start", "end")}
    values.update(timezone=viewer.zone or settings.default_timezone, offline_checkin_enabled=True,
                  rotating_online_code=False)
    return _form(request, viewer, values=values)


@router.post("/meetings/new")
async def create_meeting(request: Request) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    viewer.require(Permission.CREATE)
    assert viewer.principal is not None
    values = _posted_values(form)
    try:
        fields = _validated(MeetingCreate, _body(values, creating=True))
        fields.pop("required_attendee_ids", None)
        async with request.app.state.db.unit_of_work() as session:
            meeting, _ = await service.create_meeting(
                session, principal_id=viewer.principal.id, fields=fields, attendee_ids=[], template_id=None,
                policy=service.MeetingPolicy.from_settings(request.app.state.settings), now=console.now(request))
    except FormProblems as exc:
        return _form(request, viewer, values=values, problems=exc.problems, status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403):
            raise
        return _form(request, viewer, values=values, problems=_refusal(exc), status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{meeting.id}")


async def _meeting(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    assert viewer.principal is not None
    state = request.app.state
    return await queries.meeting(reads(request), meeting_id=meeting_id, principal=viewer.principal,
                                 now=console.now(request), signer=codes.signer(state),
                                 base_url=section(state.settings, KernelSettings).public_base_url)


@router.get("/meetings/{meeting_id}/edit")
async def edit_meeting_form(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.UPDATE)
    meeting = await _meeting(request, viewer, meeting_id)
    return _form(request, viewer, values=_values_of(meeting), meeting=meeting)


@router.post("/meetings/{meeting_id}/edit")
async def edit_meeting(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    viewer.require(Permission.UPDATE)
    assert viewer.principal is not None
    values = _posted_values(form)
    version = str(form.get("version", ""))
    try:
        changes = _validated(MeetingUpdate, _body(values, creating=False))
        async with request.app.state.db.unit_of_work() as session:
            await service.update_meeting(session, meeting_id=queries.valid_meeting_id(meeting_id),
                                         principal_id=viewer.principal.id, changes=changes,
                                         expected_version=int(version) if version.isdigit() else None,
                                         now=console.now(request))
    except FormProblems as exc:
        meeting = await _meeting(request, viewer, meeting_id)
        return _form(request, viewer, values=values, meeting=meeting, problems=exc.problems, status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        meeting = await _meeting(request, viewer, meeting_id)
        if str(exc.code) in ("PRECONDITION_FAILED", "VERSION_CONFLICT"):  # the new state, and what was typed
            return _form(request, viewer, values=_values_of(meeting), meeting=meeting, status_code=exc.status,
                         notice=str(exc.code))
        return _form(request, viewer, values=values, meeting=meeting, problems=_refusal(exc),
                     status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}")
