"""A task card on the desk (issue 19): the form generated from the card's field contract, with the AI's prefill
and its issues, the contract version, drafts saved as the agent types (htmx, after a pause: PUT /card/draft), the
card's 422 on its fields, and the version read sent with every change: a stale one (412) shows "changed by someone
else" with their values beside the agent's. Confirm, move to another order, convert a manual review, abandon.

Every change runs the service the API route runs, with the version the page was rendered with as its If-Match."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.datastructures import FormData

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.kernel.pagination import PageParams
from tenet.reservations import errors, queries, service
from tenet.reservations.cards import definitions_api
from tenet.reservations.pages import card_form
from tenet.reservations.pages.common import (
    DESK,
    parsed,
    principal,
    reader,
    require,
    search_key,
    text,
    version_read,
)
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.schemas import MAX_ID, TaskAbandon, TaskConvert, TaskMove
from tenet.web import console
from tenet.web.console import ConsoleRoute, Viewer

router = APIRouter(prefix=DESK, include_in_schema=False, route_class=ConsoleRoute)
TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
CONVERTIBLE = ("NEW_BOOKING", "UPDATE_BOOKING", "CANCEL_BOOKING", "VOUCHER_RECEIVED", "ROOMING_LIST",
               "AMEND_GROUP_CODE", "TRACE_RESERVATION_NOTES", "TA_RECORDER")
STALE = ("PRECONDITION_FAILED", "VERSION_CONFLICT")


def current_values(task: dict[str, Any]) -> dict[str, Any]:
    """What the card holds now: the confirmed payload, else the draft, else the AI's prefill."""
    card = task["card"]
    return card["confirmed_payload"] or card["draft_payload"] or card["prefill"]


async def card_context(request: Request, viewer: Viewer, task_id: int, *, values: dict[str, Any] | None = None,
                       field_errors: dict[str, str] | None = None, target: str = "") -> dict[str, Any]:
    """What the card page shows: the task (GET /tasks/{id}), its contract, its operations and, for a move, the
    orders found for the target search."""
    caller = reader(viewer)
    task = await queries.task(reads(request), task_id=task_id, viewer=caller)
    card = task["card"]
    definition = definitions_api.read(task["task_card_type"], card["field_contract_version"])
    issues = {str(i["field"]): str(i["code"]) for i in card["prefill_issues"]}
    shown = card_form.inputs(definition, current_values(task) if values is None else values, field_errors or {},
                             issues)
    operations = await queries.operations(reads(request), task_id=task_id, viewer=caller)
    targets: list[dict[str, Any]] = []
    if task["can_move"]:
        found, _ = await queries.orders(reads(request), hotel_id=task["hotel_id"], statuses=["ACTIVE", "TEMPORARY"],
                                        business_key=search_key(target), viewer=caller, page=PageParams(limit=20))
        targets = [o for o in found if o["id"] != task["order_id"]]
    return {"task": task, "definition": definition, "inputs": shown, "issues": issues, "operations": operations,
            "error_slots": card_form.error_paths(shown), "targets": targets, "target": target,
            "convertible": CONVERTIBLE, "error": None, "conflict": None,
            "draft_saved": False, "zone": viewer.zone or request.app.state.settings.default_timezone}


@router.get("/tasks/{task_id}")
async def card_page(request: Request, task_id: TaskId, target: Annotated[str, Query(max_length=128)] = "") -> Response:
    viewer = await console.signed_in(request)
    context = await card_context(request, viewer, task_id, target=target)
    return console.render(request, viewer, "desk/card.html", active="desk", **context)


def _conflict(mine: dict[str, Any], fresh: dict[str, Any], definition: Any) -> dict[str, Any]:
    """Their values beside mine, field by field (the fields where the two differ first)."""
    theirs = current_values(fresh)
    rows = [{"key": f.key, "label": f.label, "mine": mine.get(f.key), "theirs": theirs.get(f.key),
             "differs": mine.get(f.key) != theirs.get(f.key)} for f in definition.fields]
    return {"version": fresh["version"], "state": fresh["task_status"], "fields": rows,
            "by": fresh["card"]["confirmed_by"] or fresh["card"]["draft_updated_by"]}


async def refused_card(request: Request, viewer: Viewer, task_id: int, exc: DomainError, *, mine: dict[str, Any],
                       display: dict[str, Any] | None = None, template: str = "desk/card.html") -> Response:
    """The card again with the refusal: a 422 on its fields, a stale version as "changed by someone else" (their
    values beside mine, mine kept in the form), any other refusal in words above the form."""
    if exc.status >= 500 or exc.status in (401, 404):
        raise exc
    field_errors = card_form.errors_by_field(exc.data) if str(exc.code) == errors.E.TASK_CARD_PAYLOAD_INVALID else {}
    field_errors = card_form.shown_paths(field_errors, display if display is not None else mine)
    context = await card_context(request, viewer, task_id, values=display if display is not None else mine,
                                 field_errors=field_errors)
    context["error"] = str(exc.code)
    moved_on = str(exc.code) == errors.E.TASK_NOT_EDITABLE
    if str(exc.code) in STALE or moved_on:
        context["conflict"] = _conflict(mine, context["task"], context["definition"])
    status = 200 if request.headers.get("hx-request") else exc.status  # htmx swaps only 2xx answers
    return console.render(request, viewer, template, status_code=status, active="desk", **context)


def _override(form: FormData) -> Any:
    """The version to write at: the form's, or the newer one the agent chose to write over ("keep mine")."""
    return version_read(form, "override_version" if form.get("override_version") else "version")


@router.post("/tasks/{task_id}/draft")
async def save_draft(request: Request, task_id: TaskId) -> Response:
    """Autosave (htmx, a pause after typing): the draft status, the new version and every field's error slot,
    swapped in out of band; without htmx, the card page again."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.TASK_EDIT)
    context = await card_context(request, viewer, task_id)
    action = text(form, "rows", 200)
    add = action[4:] if action.startswith("add:") else ""
    remove = None
    if action.startswith("remove:") and action.count(":") == 2 and action.rsplit(":", 1)[1].isdigit():
        remove = (action.split(":")[1], int(action.rsplit(":", 1)[1]))
    mine, display = card_form.payload(context["definition"], form, add_row=add, remove_row=remove)
    fragment = "desk/draft_saved.html" if request.headers.get("hx-request") and not action else "desk/card.html"
    try:
        async with request.app.state.db.unit_of_work() as session:
            await service.save_draft(session, task_id=task_id, payload=mine, want=_override(form),
                                     principal=principal(viewer), now=console.now(request))
    except DomainError as exc:
        return await refused_card(request, viewer, task_id, exc, mine=mine, display=display, template=fragment)
    if fragment == "desk/card.html" and not request.headers.get("hx-request") and not action:
        return console.see_other(f"{DESK}/tasks/{task_id}#card")
    context = await card_context(request, viewer, task_id, values=display)
    context["draft_saved"] = True
    return console.render(request, viewer, fragment, active="desk", **context)


@router.post("/tasks/{task_id}/confirm")
async def confirm_task(request: Request, task_id: TaskId) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.TASK_CONFIRM)
    context = await card_context(request, viewer, task_id)
    mine, display = card_form.payload(context["definition"], form)
    try:
        async with request.app.state.db.unit_of_work() as session:
            await service.confirm_task(session, task_id=task_id, payload=mine, want=_override(form),
                                       principal=principal(viewer), now=console.now(request))
    except DomainError as exc:
        return await refused_card(request, viewer, task_id, exc, mine=mine, display=display)
    return console.see_other(f"{DESK}/tasks/{task_id}")


async def _task_change(request: Request, task_id: int, permission: P, change: Any, **values: Any) -> Response:
    """Move, convert or abandon: the service with the version read; the card again, in words, when refused."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, permission)
    try:
        want = version_read(form)
        arguments = {name: make(form) for name, make in values.items()}
        async with request.app.state.db.unit_of_work() as session:
            await change(session, task_id=task_id, want=want, principal=principal(viewer), now=console.now(request),
                         **arguments)
    except DomainError as exc:
        return await refused_card(request, viewer, task_id, exc, mine={})
    return console.see_other(f"{DESK}/tasks/{task_id}")


@router.post("/tasks/{task_id}/move")
async def move_task(request: Request, task_id: TaskId) -> Response:
    return await _task_change(request, task_id, P.TASK_MOVE, service.move_task, target_order_id=lambda form: int(
        parsed(TaskMove, {"order_id": text(form, "order_id", 40)}).order_id))


@router.post("/tasks/{task_id}/convert")
async def convert_task(request: Request, task_id: TaskId) -> Response:
    return await _task_change(request, task_id, P.TASK_EDIT, service.convert_task, task_card_type=lambda form: parsed(
        TaskConvert, {"task_card_type": text(form, "task_card_type", 64)}).task_card_type)


@router.post("/tasks/{task_id}/abandon")
async def abandon_task(request: Request, task_id: TaskId) -> Response:
    return await _task_change(request, task_id, P.ORDER_MANAGE, service.abandon_task, reason=lambda form: parsed(
        TaskAbandon, {"reason": text(form, "reason", 2000)}).reason)
