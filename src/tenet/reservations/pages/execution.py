"""Execution on the desk (issue 19): execute a READY task (POST /tasks/{id}/execute) and retry a failed operation
(POST /operations/{id}/retry: a new attempt, never an overwrite). The card page shows each operation with every
attempt in order; nothing here can force a task COMPLETED or skip an operation (no such service exists)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from tenet.kernel.errors import DomainError
from tenet.kernel.http import ExpectedVersion
from tenet.reservations import execution
from tenet.reservations.pages.cards import refused_card
from tenet.reservations.pages.common import DESK, principal, require, version_read
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.schemas import MAX_ID
from tenet.web import console

router = APIRouter(prefix=DESK, include_in_schema=False, route_class=console.ConsoleRoute)
Id = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.post("/tasks/{task_id}/execute")
async def execute_task(request: Request, task_id: Id) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.TASK_EXECUTE)
    try:
        want = version_read(form)
        async with request.app.state.db.unit_of_work() as session:
            await execution.execute_task(session, task_id=task_id, want=want, principal=principal(viewer),
                                         now=console.now(request))
    except DomainError as exc:
        return await refused_card(request, viewer, task_id, exc, mine={})
    return console.see_other(f"{DESK}/tasks/{task_id}#execution")


@router.post("/operations/{operation_id}/retry")
async def retry_operation(request: Request, operation_id: Id) -> Response:
    """The operation's `attempt_count` the page showed is the version the retry names (If-Match)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.TASK_EXECUTE)
    task_id = int(str(form.get("task_id", "0"))) if str(form.get("task_id", "")).isdigit() else 0
    try:
        read = version_read(form, "attempt_count")
        async with request.app.state.db.unit_of_work() as session:
            task_id = await execution.retry_operation(session, operation_id=operation_id,
                                                      want=ExpectedVersion(read.value, True),
                                                      principal=principal(viewer), now=console.now(request))
    except DomainError as exc:
        if not 1 <= task_id <= MAX_ID:
            raise
        return await refused_card(request, viewer, task_id, exc, mine={})
    return console.see_other(f"{DESK}/tasks/{task_id}#execution")
