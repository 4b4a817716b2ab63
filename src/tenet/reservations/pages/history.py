"""Where a task came from and what happened to it, on the desk (issue 19): the AI's view (the batch and source
message of the item, the raw item exactly as received, pretty-printed for reading and as the exact bytes to
download, the batch's extraction warnings) and the audit timeline of the task and of its order (GET /audit-logs'
own query: actor, action, before and after as the API shows them, which stores them redacted)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.pagination import PageParams
from tenet.reservations import queries
from tenet.reservations.pages.common import DESK, reader, require, short_time
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.schemas import MAX_ID
from tenet.web import console
from tenet.web.console import ConsoleRoute

router = APIRouter(prefix=DESK, include_in_schema=False, route_class=ConsoleRoute)
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
AUDIT_ROWS = 100


def pretty(text: str | None) -> str:
    """JSON text indented for reading (numbers as Python reads them: the download keeps the exact bytes)."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


@router.get("/tasks/{task_id}/ai")
async def ai_view(request: Request, task_id: TaskId) -> Response:
    viewer = await console.signed_in(request)
    row = await queries.ai_item(reads(request), task_id=task_id, viewer=reader(viewer))
    zone = viewer.zone or request.app.state.settings.default_timezone
    return console.render(request, viewer, "desk/ai.html", active="desk", item=row,
                          pretty_item=pretty(row["ai_payload_json"]),
                          warnings=pretty(row["extraction_warnings_json"]), short=short_time(zone))


@router.get("/tasks/{task_id}/ai/raw")
async def ai_raw(request: Request, task_id: TaskId) -> Response:
    """The item's exact text as received (the bytes of its slice of the batch), to download."""
    viewer = await console.signed_in(request)
    row = await queries.ai_item(reads(request), task_id=task_id, viewer=reader(viewer))
    return Response(row["ai_payload_json"].encode("utf-8"), media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="task-{task_id}-ai-item.json"',
        "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


@router.get("/tasks/{task_id}/audit")
async def audit_view(request: Request, task_id: TaskId,
                     only: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None) -> Response:
    """The order's timeline (its own events and each of its tasks'), newest first, or one task's alone (`only`: a
    task of this order; GET /audit-logs' order_id and task_id filters together). reservation:audit:read, as the
    API route."""
    viewer = await console.signed_in(request)
    caller = require(viewer, P.AUDIT_READ)
    task = await queries.task(reads(request), task_id=task_id, viewer=caller)
    page = PageParams(limit=AUDIT_ROWS)
    order_rows, _ = await queries.audit_logs(reads(request), viewer=caller, hotel_id=None, order_id=task["order_id"],
                                            task_id=only, action=None, page=page)
    zone = viewer.zone or request.app.state.settings.default_timezone
    timeline: list[dict[str, Any]] = [
        {**row, "before": json.dumps(row["before_snapshot"], ensure_ascii=False, default=str)
         if row["before_snapshot"] else "",
         "after": json.dumps(row["after_snapshot"], ensure_ascii=False, default=str) if row["after_snapshot"] else ""}
        for row in order_rows]
    return console.render(request, viewer, "desk/audit.html", active="desk", task=task, timeline=timeline,
                          only=only, short=short_time(zone), audit_rows=AUDIT_ROWS)
