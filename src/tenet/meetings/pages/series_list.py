"""Two small console pages that were missing (issue 18):

- `/console/series`: the series (the query of `GET /series`, `queries.series_page`: managers see all, others the
  ones they organize), 50 a page with its cursor, each linking its page at `/console/series/{id}`; for holders of
  `meeting:read`, the point that route checks.
- a template's edit and delete (`/console/templates/{id}/edit`, `/console/templates/{id}/delete`): the commands of
  `PATCH` and `DELETE /templates/{id}` (`templates.update_template` with the version the form was read at, so a
  change made meanwhile is a 412 that shows the new state; `templates.delete_template`), for holders of
  `meeting:template:manage`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ValidationError

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.kernel.pagination import PageParams
from tenet.meetings import queries, templates
from tenet.meetings.pages.meeting_templates import parse_template_id
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import TemplateUpdate
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
PAGE_SIZE = 50
EDITED = ("label", "title", "duration_minutes", "location", "city", "description")


@router.get("/series")
async def series_list(request: Request, cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    viewer = await console.signed_in(request)
    principal = viewer.require(Permission.READ)
    rows, next_cursor = await queries.series_page(reads(request), principal=principal,
                                                  page=PageParams(limit=PAGE_SIZE, cursor=cursor or None))
    return console.render(request, viewer, "meetings/series_list.html", active="meetings", rows=rows,
                          next_cursor=next_cursor)


# --- a template's edit and delete ------------------------------------------------------------------------

def _edit_form(request: Request, viewer: Viewer, template: dict[str, Any], *, values: dict[str, str], version: int,
               problems: dict[str, str] | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/template_edit.html", status_code=status_code,
                          active="meetings", meeting_template=template, values=values, version=version,
                          problems=problems or {})


def _values(template: dict[str, Any]) -> dict[str, str]:
    return {name: "" if template[name] is None else str(template[name]) for name in EDITED}


@router.get("/templates/{template_id}/edit")
async def edit_template_form(request: Request, template_id: str) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.TEMPLATE_MANAGE)
    template = await queries.template(reads(request), template_id=parse_template_id(template_id))
    return _edit_form(request, viewer, template, values=_values(template), version=template["version"])


@router.post("/templates/{template_id}/edit")
async def edit_template(request: Request, template_id: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.TEMPLATE_MANAGE)
    template = await queries.template(reads(request), template_id=parse_template_id(template_id))
    values = {name: str(form.get(name, "")).strip()[:2000] for name in EDITED}
    try:
        version = int(str(form.get("version", "")))
    except ValueError:
        version = template["version"]
    if not values["duration_minutes"].isdigit():
        return _edit_form(request, viewer, template, values=values, version=version,
                          problems={"duration_minutes": "VALIDATION_FAILED"}, status_code=422)
    try:
        changes = TemplateUpdate.model_validate({
            "label": values["label"] or None, "title": values["title"] or None,
            "duration_minutes": int(values["duration_minutes"]), "location": values["location"] or None,
            "city": values["city"] or None, "description": values["description"] or None,
        }).model_dump(exclude_unset=True)
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else "label"
        return _edit_form(request, viewer, template, values=values, version=version,
                          problems={field if field in EDITED else "label": "VALIDATION_FAILED"}, status_code=422)
    try:
        async with request.app.state.db.unit_of_work() as session:
            await templates.update_template(session, template_id=template["id"], principal_id=principal.id,
                                            changes=changes, expected_version=version, now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        if exc.status == 412:  # someone else changed it: the new state, said so
            fresh = await queries.template(reads(request), template_id=template["id"])
            return _edit_form(request, viewer, fresh, values=_values(fresh), version=fresh["version"],
                              problems={"form": str(exc.code)}, status_code=412)
        field = "label" if str(exc.code) == "MEETING_TIME_INVALID" else "form"
        return _edit_form(request, viewer, template, values=values, version=version,
                          problems={field: str(exc.code)}, status_code=exc.status)
    return console.see_other(f"{PREFIX}/templates")


@router.post("/templates/{template_id}/delete")
async def delete_template(request: Request, template_id: str) -> Response:
    """Meetings and series made from it keep what they copied (it was provenance only)."""
    viewer = await console.signed_in(request)
    await console.posted(request, viewer)
    principal = viewer.require(Permission.TEMPLATE_MANAGE)
    async with request.app.state.db.unit_of_work() as session:
        await templates.delete_template(session, template_id=parse_template_id(template_id), principal_id=principal.id,
                                        now=console.now(request))
    return console.see_other(f"{PREFIX}/templates")
