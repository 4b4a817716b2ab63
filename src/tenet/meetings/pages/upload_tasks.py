""""My upload tasks" (issue 18): what is due for the person looking (soonest first, undated last: the API's
`GET /me/upload-tasks` query), and an upload in place on each pending task's agenda item, with a progress bar.

The upload is the API's own (`agenda.api.upload_to_item`: who may, the body streamed, stored, recorded, the caller's
oldest PENDING task on the item completed). With JavaScript (`/static/upload-tasks.js`, served by Tenet, no inline
script) the file goes by XMLHttpRequest with the CSRF token as `X-CSRF-Token`, and the answer is the task list
(re-read through the same query) that replaces the page's; without it the form posts with its `csrf_token` field
and the page comes back. A refusal is the error page in words (413, 415, 403...), whose sentence the script shows."""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import PermissionDenied
from tenet.kernel.idempotency import streams_body
from tenet.kernel.pagination import PageParams
from tenet.meetings.agenda import api as agenda_api
from tenet.meetings.agenda import queries as agenda_queries
from tenet.meetings.permissions import Permission
from tenet.web import console
from tenet.web.console import CSRF_FIELD, CSRF_HEADER, PREFIX, ConsoleRoute, CsrfRefused, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
LIMIT = 100


def _principal(viewer: Viewer) -> Any:
    if not viewer.can(Permission.READ):
        raise PermissionDenied(f"Requires the permission {Permission.READ}", permission=Permission.READ.value)
    return viewer.principal


async def _tasks(request: Request, viewer: Viewer) -> dict[str, Any]:
    rows, cursor = await agenda_queries.my_tasks(reads(request), principal=_principal(viewer), status=None,
                                                 page=PageParams(limit=LIMIT))
    return {"tasks": rows, "tasks_more": cursor is not None}


@router.get("/upload-tasks")
async def my_upload_tasks(request: Request) -> Response:
    viewer = await console.signed_in(request)
    return console.render(request, viewer, "meetings/upload_tasks.html", active="uploads",
                          **await _tasks(request, viewer))


def _same(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given, expected)


def upload_guard(request: Request, viewer: Viewer) -> tuple[bool, Callable[[Any], None]]:
    """The CSRF check of a streamed upload (this page's and the meeting's files page): the script's
    `X-CSRF-Token` header is checked before the body is read; the plain form's `csrf_token` field by the returned
    check, after the body and before anything is stored. The flag says whether the script sent it."""
    header = request.headers.get(CSRF_HEADER)
    if header is not None and not _same(header, viewer.csrf):
        raise CsrfRefused()  # before the body is read

    def check(received: Any) -> None:
        if header is None and not _same(received.fields.get(CSRF_FIELD), viewer.csrf):
            raise CsrfRefused()

    return header is not None, check


@router.post("/agenda-items/{item_id}/upload", max_body_size=agenda_api.BODY_CEILING)
@streams_body
async def upload(request: Request, item_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    principal = _principal(viewer)
    scripted, check = upload_guard(request, viewer)
    await agenda_api.upload_to_item(request, principal, item_id, fields=(CSRF_FIELD,), check=check)
    if not scripted:
        return console.see_other(f"{PREFIX}/upload-tasks")
    return console.render(request, viewer, "meetings/upload_tasks_list.html", **await _tasks(request, viewer))
