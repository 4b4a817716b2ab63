"""A series in the console (issue 18): its rule and occurrences (the query of `GET /series/{id}`, for the people it
answers: managers, and the organizer), and the bulk reschedule from an occurrence on (`POST /series/{id}/reschedule`'s
request model and command, `SeriesReschedule` and `series.reschedule_series`): by a shift of wall-clock minutes, or
to a new local time of day (and duration); occurrences edited alone are skipped unless asked; and the edit of its
fields (`PATCH /series/{id}`'s `SeriesUpdate` and `series.update_series`). Offered to holders of
`meeting:series:manage`, the point the API's routes check (the reschedule for occurrences that have not started)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ValidationError

from tenet.deps import reads
from tenet.kernel.errors import DomainError, PermissionDenied, ValidationFailed
from tenet.meetings import queries, series, service
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import SeriesReschedule, SeriesUpdate
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
# A service's refusal -> the field of the reschedule form it concerns (the rest are said above the form).
FIELD_OF_CODE = {"MEETING_TIME_INVALID": "how"}


def _series_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationFailed("This is not a series id", field="series_id") from None


async def _series(request: Request, viewer: Viewer, series_id: str) -> dict[str, Any]:
    if not viewer.can(Permission.READ):
        raise PermissionDenied(f"Requires the permission {Permission.READ}", permission=Permission.READ.value)
    assert viewer.principal is not None
    return await queries.series(reads(request), series_id=_series_id(series_id), principal=viewer.principal,
                                now=console.now(request))


def _may_reschedule(viewer: Viewer) -> bool:
    return viewer.can(Permission.SERIES_MANAGE)


@router.get("/series/{series_id}")
async def series_page(request: Request, series_id: str,
                      moved: Annotated[int | None, Query(ge=0, le=100_000)] = None,
                      skipped: Annotated[int | None, Query(ge=0, le=100_000)] = None,
                      updated: Annotated[int | None, Query(ge=0, le=100_000)] = None) -> Response:
    viewer = await console.signed_in(request)
    found = await _series(request, viewer, series_id)
    return console.render(request, viewer, "meetings/series.html", active="meetings", series=found,
                          may_reschedule=_may_reschedule(viewer), moved=moved, skipped=skipped, updated=updated,
                          problem=None)


def _occurrence(found: dict[str, Any], meeting_id: str) -> dict[str, Any]:
    for item in found["occurrences"]:
        if item["meeting_id"] == meeting_id:
            return dict(item)
    raise ValidationFailed("This meeting is not an occurrence of the series", field="from")


def _form(request: Request, viewer: Viewer, found: dict[str, Any], first: dict[str, Any], *,
          values: dict[str, Any], problems: dict[str, str] | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/reschedule.html", status_code=status_code, active="meetings",
                          series=found, first=first, values=values, problems=problems or {},
                          later=[o for o in found["occurrences"]
                                 if o["occurrence_date"] >= first["occurrence_date"] and o["status"] == "SCHEDULED"])


@router.get("/series/{series_id}/reschedule")
async def reschedule_form(request: Request, series_id: str,
                          first_id: Annotated[str, Query(alias="from", max_length=32)] = "") -> Response:
    viewer = await console.signed_in(request)
    found = await _series(request, viewer, series_id)
    if not _may_reschedule(viewer):
        raise PermissionDenied(f"Requires the permission {Permission.SERIES_MANAGE}",
                               permission=Permission.SERIES_MANAGE.value)
    values = {"how": "shift", "shift_minutes": "", "start_local_time": found["start_local_time"].strftime("%H:%M"),
              "duration_minutes": str(found["duration_minutes"]), "include_exceptions": False}
    return _form(request, viewer, found, _occurrence(found, first_id), values=values)


def _body(values: dict[str, Any], first_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {"from_meeting_id": first_id, "include_exceptions": values["include_exceptions"]}
    if values["how"] == "time":
        body["start_local_time"] = values["start_local_time"]
        if values["duration_minutes"]:
            body["duration_minutes"] = values["duration_minutes"]
    else:
        body["shift_minutes"] = values["shift_minutes"]
    try:
        return SeriesReschedule.model_validate(body).model_dump()
    except ValidationError as exc:
        names = {str(e["loc"][0]) if e["loc"] else "how" for e in exc.errors()}
        raise _Problems({name: "VALIDATION_FAILED" for name in names}) from None


class _Problems(Exception):
    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(problems)
        self.problems = problems


@router.post("/series/{series_id}/reschedule")
async def reschedule(request: Request, series_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    if not _may_reschedule(viewer):
        raise PermissionDenied(f"Requires the permission {Permission.SERIES_MANAGE}",
                               permission=Permission.SERIES_MANAGE.value)
    assert viewer.principal is not None
    first_id = str(form.get("from", ""))[:32]
    values = {"how": "time" if form.get("how") == "time" else "shift",
              "shift_minutes": str(form.get("shift_minutes", "")).strip()[:10],
              "start_local_time": str(form.get("start_local_time", "")).strip()[:8],
              "duration_minutes": str(form.get("duration_minutes", "")).strip()[:10],
              "include_exceptions": form.get("include_exceptions") == "on"}
    try:
        body = _body(values, first_id)
        if body["shift_minutes"] == 0:
            raise _Problems({"shift_minutes": "VALIDATION_FAILED"})  # moving by nothing is not a reschedule
        async with request.app.state.db.unit_of_work() as session:
            moved, skipped = await series.reschedule_series(
                session, series_id=_series_id(series_id), from_meeting_id=queries.valid_meeting_id(first_id),
                principal_id=viewer.principal.id, shift_minutes=body["shift_minutes"],
                start_local_time=body["start_local_time"], duration_minutes=body["duration_minutes"],
                include_exceptions=body["include_exceptions"], now=console.now(request))
    except (_Problems, DomainError) as exc:
        if isinstance(exc, DomainError) and (exc.status >= 500 or exc.status in (401, 403)):
            raise
        found = await _series(request, viewer, series_id)
        problems = exc.problems if isinstance(exc, _Problems) else {
            FIELD_OF_CODE.get(str(exc.code), "form"): str(exc.code)}
        status_code = 422 if isinstance(exc, _Problems) else exc.status
        first = next((dict(o) for o in found["occurrences"] if o["meeting_id"] == first_id), None)
        if first is None:  # no such occurrence (any more): the series page says so
            return console.render(request, viewer, "meetings/series.html", status_code=status_code,
                                  active="meetings", series=found, may_reschedule=True, moved=None, skipped=None,
                                  updated=None, problem=problems.get("form", "SERIES_OCCURRENCE_NOT_FOUND"))
        return _form(request, viewer, found, first, values=values, problems=problems, status_code=status_code)
    return console.see_other(f"{PREFIX}/series/{series_id}?moved={len(moved)}&skipped={len(skipped)}")


# --- the series' fields -----------------------------------------------------------------------------------

EDIT_TEXTS = ("title", "description", "location", "city")
EDIT_NUMBERS = ("late_grace_minutes", "checkin_opens_minutes_before")


def _edit_values(found: dict[str, Any]) -> dict[str, Any]:
    return {**{name: found[name] or "" for name in EDIT_TEXTS}, **{name: str(found[name]) for name in EDIT_NUMBERS},
            "apply_to_exceptions": False}


def _edit_form(request: Request, viewer: Viewer, found: dict[str, Any], *, values: dict[str, Any],
               problems: dict[str, str] | None = None, notice: str | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/series_edit.html", status_code=status_code, active="meetings",
                          series=found, values=values, problems=problems or {}, notice=notice)


@router.get("/series/{series_id}/edit")
async def edit_series_form(request: Request, series_id: str) -> Response:
    viewer = await console.signed_in(request)
    found = await _series(request, viewer, series_id)
    if not _may_reschedule(viewer):
        raise PermissionDenied(f"Requires the permission {Permission.SERIES_MANAGE}",
                               permission=Permission.SERIES_MANAGE.value)
    return _edit_form(request, viewer, found, values=_edit_values(found))


@router.post("/series/{series_id}/edit")
async def edit_series(request: Request, series_id: str) -> Response:
    """`PATCH /series/{id}`'s model and command: the fields reach the occurrences that have not started (and those
    edited alone when asked); the form's version makes it conditional (412: someone else changed the series)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    if not _may_reschedule(viewer):
        raise PermissionDenied(f"Requires the permission {Permission.SERIES_MANAGE}",
                               permission=Permission.SERIES_MANAGE.value)
    assert viewer.principal is not None
    values: dict[str, Any] = {name: str(form.get(name, "")).strip()[:2000] for name in (*EDIT_TEXTS, *EDIT_NUMBERS)}
    values["apply_to_exceptions"] = form.get("apply_to_exceptions") == "on"
    version = str(form.get("version", ""))
    changes: dict[str, Any] = {name: values[name] or None for name in EDIT_TEXTS}
    changes.update({name: values[name] for name in EDIT_NUMBERS if values[name]})
    try:
        try:
            body = SeriesUpdate.model_validate(changes).model_dump(exclude_unset=True)
        except ValidationError as exc:
            raise _Problems({str(e["loc"][0]) if e["loc"] else "form": "VALIDATION_FAILED"
                             for e in exc.errors()}) from None
        if not body.get("title"):
            raise _Problems({"title": "VALIDATION_FAILED"})
        async with request.app.state.db.unit_of_work() as session:
            _, _, updated, _ = await series.update_series(
                session, series_id=_series_id(series_id), principal_id=viewer.principal.id, changes=body,
                apply_to_exceptions=values["apply_to_exceptions"],
                expected_version=int(version) if version.isdigit() else None,
                policy=service.MeetingPolicy.from_settings(request.app.state.settings), now=console.now(request))
    except _Problems as exc:
        found = await _series(request, viewer, series_id)
        return _edit_form(request, viewer, found, values=values, problems=exc.problems, status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        found = await _series(request, viewer, series_id)
        if str(exc.code) in ("PRECONDITION_FAILED", "VERSION_CONFLICT"):  # the new state, said so
            return _edit_form(request, viewer, found, values=_edit_values(found), notice=str(exc.code),
                              status_code=exc.status)
        return _edit_form(request, viewer, found, values=values, problems={"form": str(exc.code)},
                          status_code=exc.status)
    return console.see_other(f"{PREFIX}/series/{series_id}?updated={len(updated)}")
