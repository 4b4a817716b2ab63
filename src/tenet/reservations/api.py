"""Routes of the reservation workflow: /api/v1/reservations (API.md "Reservation workflow").

Routes parse, authorise (one dependency each), call one service function and shape the answer. Reads run on
the transaction-free read path; a command answers through the query function its GET uses, run on the unit of
work's statements (`kernel.statements`), so it reads its own writes and answers what the GET answers. Rows of
hotels the caller may not see answer 404. Changes to a task name the version the caller read: If-Match
(or `expected_version`); a stale one is 412 (409 for the body field), none at all 428.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentPrincipal, require, require_scope
from tenet.iam.principal import Principal
from tenet.kernel.errors import UnsupportedMediaType
from tenet.kernel.http import API_PREFIX, TenetRoute, etag, expected_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.settings import section
from tenet.kernel.statements import statements
from tenet.reservations import errors, execution, ingest, queries, service
from tenet.reservations import pages as desk_pages
from tenet.reservations.cards import definitions_api
from tenet.reservations.keys import UnusableKey, normalize_key
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.permissions import ReservationScope, Viewer, require_batch_read, require_read
from tenet.reservations.schemas import (
    MAX_ID,
    AiBatchIngested,
    AiBatchRead,
    AuditLogRead,
    HotelCreate,
    HotelRead,
    HotelStaffRead,
    OperationList,
    OperationRetry,
    OrderCreate,
    OrderDetail,
    OrderEnd,
    OrderLogicDelete,
    OrderStatus,
    OrderSummary,
    TaskAbandon,
    TaskCardDefinitionList,
    TaskCardDefinitionRead,
    TaskCardDraft,
    TaskConfirm,
    TaskConvert,
    TaskExecution,
    TaskMove,
    TaskRead,
)
from tenet.reservations.settings import ReservationSettings

TAG = "reservations"
PREFIX = API_PREFIX + "/reservations"
INGEST_MAX_BYTES = 2 * 1024 * 1024
CARD_MAX_BYTES = 256 * 1024

TAG_DESCRIPTION = (
    "Reservation workflow (spec 003): SuperAgent's AI results come in as batches (API clients with the scope "
    "`reservations:ingest`, limited to their hotels); each item becomes a task on an order's queue. Agents "
    "(`ReservationAgent`, their assigned hotels) confirm task cards and execute them against OPERA (simulated "
    "in this phase). A queue task is `blocked` while an earlier task of its order is unfinished; blocked tasks "
    "can only be viewed. Nobody can force-complete a task or skip a failed OPERA operation.\n\n"
    "Task changes need the version read: `If-Match: \"<version>\"` (from `ETag`) or `expected_version` in the "
    "body; stale -> 412 `PRECONDITION_FAILED` (409 `VERSION_CONFLICT` for the body field), missing -> 428 "
    "`PRECONDITION_REQUIRED`. A retry names the operation's `attempt_count` the same way."
)

router = APIRouter(prefix=PREFIX, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403))

PageDep = Annotated[PageParams, Depends(page_params)]
TaskId = Annotated[int, Path(ge=1, le=MAX_ID, description="A task id")]
OrderId = Annotated[int, Path(ge=1, le=MAX_ID, description="An order id")]
# Free text in queries and paths: printable, no NUL (PostgreSQL text cannot hold it; a 422, never a 500).
_TEXT = r"^[^\x00-\x1f\x7f]+$"
HotelQuery = Annotated[str, Query(min_length=1, max_length=64, pattern=_TEXT)]
HotelPath = Annotated[str, Path(min_length=1, max_length=64, pattern=_TEXT)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The version read, as its ETag: "3"',
                                       max_length=64)]
Ingester = Annotated[Principal, Depends(require_scope(ReservationScope.INGEST))]
Editor = Annotated[Principal, Depends(require(P.TASK_EDIT))]
Confirmer = Annotated[Principal, Depends(require(P.TASK_CONFIRM))]
Mover = Annotated[Principal, Depends(require(P.TASK_MOVE))]
Executor = Annotated[Principal, Depends(require(P.TASK_EXECUTE))]
Manager = Annotated[Principal, Depends(require(P.ORDER_MANAGE))]
Auditor = Annotated[Principal, Depends(require(P.AUDIT_READ))]
HotelManager = Annotated[Principal, Depends(require(P.HOTEL_MANAGE))]


async def _task_answer(session: AsyncSession, task_id: int, viewer: Viewer, *, status_code: int = 200) -> Response:
    """The task as the command left it, read in the command's own unit of work."""
    task = TaskRead.model_validate(await queries.task(await statements(session), task_id=task_id, viewer=viewer))
    return json_response(task, status_code=status_code, headers={"ETag": etag(task.version)})


# --- ingest --------------------------------------------------------------------------------------------------

_ITEM_SCHEMA = {
    "type": "object", "additionalProperties": True,
    "description": "An AI item: its text is kept exactly as sent; unknown members are kept, never rejected.",
    "properties": {
        "result_type": {"type": "string"}, "ai_task_type": {"type": "string"}, "task_subtype": {"type": "string"},
        "catalog_code": {"type": "string"}, "skill_id": {"type": "string"},
        "source_event_index": {"type": "integer"}, "current_or_history": {"type": "string"},
        "route_code": {"type": "string"},
        "case_keys": {"type": "object", "properties": {"group_code": {"type": "string"},
                                                       "confirmation_number": {"type": "string"}}},
        "extracted_fields": {"type": "object"}, "manual_review": {"type": "object"},
        "informational_message": {"type": "object"}, "attachments": {"type": "array"}, "context_used": {},
        "parent_source_event_index": {"type": "integer"}, "linked_task_group_id": {"type": "string"},
        "blocked_until_parent_completed": {"type": "boolean"},
    },
}
_INGEST_BODY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "title": "AiBatchCreate", "type": "object", "additionalProperties": True,
        "required": ["hotel_id", "source_message_id", "ai_task_results"],
        "properties": {
            "hotel_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "source_message_id": {"oneOf": [{"type": "integer", "minimum": 1},
                                            {"type": "string", "pattern": "^[0-9]{1,19}$"}]},
            "request_id": {"type": "string", "minLength": 1, "maxLength": 128},
            "ai_task_results": {"type": "array", "items": _ITEM_SCHEMA},
            "message_events": {"type": "array", "items": _ITEM_SCHEMA},
            "unhandled_current_intents": {"type": "array", "items": _ITEM_SCHEMA},
            "extraction_warnings": {},
        },
    }}}},
}


def _ingested(row: dict[str, Any], *, replayed: bool) -> AiBatchIngested:
    return AiBatchIngested.model_validate({
        "batch_id": row["id"] if "id" in row else row["batch_id"], "replayed": replayed, "hotel_id": row["hotel_id"],
        "source_message_id": row["source_message_id"], "request_id": row["request_id"],
        "request_payload_sha256": row["request_payload_sha256"],
        "batch_idempotency_key": row["batch_idempotency_key"], "item_count": row["item_count"],
        "items": row["response_items_json"] if "response_items_json" in row else row["items"],
    })


def _replay_or_conflict(row: dict[str, Any], prepared: ingest.Prepared) -> Response:
    if row["request_payload_sha256"] != prepared.body_sha or row["response_items_json"] is None:
        raise errors.AiBatchRequestIdReused(batch_id=str(row["id"]), request_id=row["request_id"])
    return json_response(_ingested(row, replayed=True), status_code=200,
                         headers={"Location": f"{PREFIX}/ai-batches/{row['id']}"})


@router.post(
    "/ai-batches", status_code=status.HTTP_201_CREATED, response_model=AiBatchIngested,
    summary="Ingest an AI batch (API clients with reservations:ingest)", openapi_extra=_INGEST_BODY,
    max_body_size=INGEST_MAX_BYTES,
    description="The body is kept byte for byte; each item becomes a transition and a task. The same batch "
                "again (the same `request_id`, or without one the same bytes) answers 200 with the first answer "
                "and `replayed: true`; a `request_id` reused with another body is 409 "
                "`AI_BATCH_REQUEST_ID_REUSED`. Items the contract cannot map become fallback review tasks "
                "(`adapter_error_code`), never dropped. 403 `RESERVATION_HOTEL_FORBIDDEN` for a hotel outside "
                "the client's `hotel_ids`.",
    responses={200: {"model": AiBatchIngested, "description": "A replay of the first answer"},
               **problem_responses(400, 409, 413, 415, 422)})
async def ingest_batch(request: Request, principal: Ingester, session: SessionDep, now: NowDep,
                       settings: SettingsDep) -> Response:
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        raise UnsupportedMediaType("This route reads application/json")
    body = await request.body()
    prepared = ingest.prepare(body, principal=principal,
                              max_items=section(settings, ReservationSettings).reservation_ingest_max_items)
    found = await queries.batch_by_key(reads(request), hotel_id=prepared.hotel_id, key=prepared.key)
    if found is not None:
        return _replay_or_conflict(found, prepared)
    try:
        answer = await ingest.ingest(session, prepared, principal=principal, now=now)
    except ingest.BatchExists:
        # A concurrent identical post won the key while we parsed; its answer is committed now.
        found = await queries.batch_by_key(reads(request), hotel_id=prepared.hotel_id, key=prepared.key)
        if found is None:
            raise errors.AiBatchRequestIdReused() from None
        return _replay_or_conflict(found, prepared)
    return json_response(_ingested(answer, replayed=False), status_code=201,
                         headers={"Location": f"{PREFIX}/ai-batches/{answer['batch_id']}"})


@router.get("/ai-batches/{batch_id}", response_model=AiBatchRead, summary="A batch and what its items became",
            responses=problem_responses(404))
async def get_batch(batch_id: Annotated[int, Path(ge=1, le=MAX_ID)], principal: CurrentPrincipal,
                    request: Request) -> Response:
    viewer = require_batch_read(principal)
    row = await queries.batch(reads(request), batch_id=batch_id, viewer=viewer)
    return json_response(AiBatchRead.model_validate({**row, "batch_id": row["id"],
                                                     "items": row["response_items_json"] or []}))


# --- orders --------------------------------------------------------------------------------------------------


@router.get("/orders", response_model=Page[OrderSummary], summary="Orders of a hotel, most recently active first",
            description="`status` may repeat (default TEMPORARY and ACTIVE). `business_key` finds a key's orders "
                        "(or a temporary code) in any status unless `status` is given. 404 `HOTEL_NOT_FOUND` for a "
                        "hotel you may not see.",
            responses=problem_responses(400, 404))
async def list_orders(principal: CurrentPrincipal, request: Request, params: PageDep,
                      hotel_id: HotelQuery,
                      status_filter: Annotated[list[OrderStatus] | None, Query(alias="status")] = None,
                      business_key: Annotated[str | None, Query(min_length=1, max_length=128, pattern=_TEXT)] = None,
                      ) -> Response:
    viewer = require_read(principal)
    key = None
    if business_key is not None:
        try:
            key = normalize_key(business_key)
        except UnusableKey:
            key = business_key.strip() or business_key
    statuses: list[str] = sorted({str(s) for s in status_filter}) if status_filter else (
        ["ACTIVE", "ENDED", "LOGIC_DELETED", "TEMPORARY"] if business_key is not None else ["ACTIVE", "TEMPORARY"])
    rows, cursor = await queries.orders(reads(request), hotel_id=hotel_id, statuses=statuses, business_key=key,
                                        viewer=viewer, page=params)
    return json_response(Page[OrderSummary](items=[OrderSummary.model_validate(r) for r in rows], next_cursor=cursor))


@router.post("/orders", status_code=status.HTTP_201_CREATED, response_model=OrderDetail,
             summary="Create an ACTIVE order for a known booking (reservation:order:manage)",
             description="So that misfiled tasks have somewhere to go. 409 `ORDER_KEY_ALREADY_ACTIVE` (with its "
                         "`order_id`) when the key already has an ACTIVE order.",
             responses=problem_responses(404, 409))
async def create_order(body: OrderCreate, principal: Manager, session: SessionDep, now: NowDep) -> Response:
    viewer = Viewer(principal)
    order_id = await service.create_order(session, hotel_id=body.hotel_id, key_type=body.order_key_type,
                                          business_key=body.order_business_key, display_name=body.display_name,
                                          principal=principal, now=now)
    detail = await queries.order(await statements(session), order_id=order_id, viewer=viewer)
    return json_response(OrderDetail.model_validate(detail), status_code=201,
                         headers={"Location": f"{PREFIX}/orders/{order_id}", "ETag": etag(detail["version"])})


@router.get("/orders/{order_id}", response_model=OrderDetail, summary="An order with its tasks in queue order",
            description="Each task carries the computed `blocked`, `can_edit`, `can_confirm`, `can_execute`. Up to "
                        "200 tasks; `tasks_next_cursor` pages on (`?tasks_cursor=`).",
            responses=problem_responses(400, 404))
async def get_order(order_id: OrderId, principal: CurrentPrincipal, request: Request,
                    tasks_cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,9}$")] = None) -> Response:
    viewer = require_read(principal)
    detail = await queries.order(reads(request), order_id=order_id, viewer=viewer,
                                 after=int(tasks_cursor) if tasks_cursor else 0)
    return json_response(OrderDetail.model_validate(detail), headers={"ETag": etag(detail["version"])})


async def _order_closed(session: AsyncSession, order_id: int, viewer: Viewer) -> Response:
    detail = await queries.order(await statements(session), order_id=order_id, viewer=viewer)
    return json_response(OrderDetail.model_validate(detail), headers={"ETag": etag(detail["version"])})


@router.post("/orders/{order_id}/end", response_model=OrderDetail, summary="End an order (reservation:order:manage)",
             description="Only when none of its tasks is open (409 `ORDER_HAS_UNFINISHED_TASKS` with their ids); "
                         "ENDED is final (409 `ORDER_NOT_OPEN`) and frees the business key. If-Match optional.",
             responses=problem_responses(404, 409, 412))
async def end_order(order_id: OrderId, principal: Manager, session: SessionDep, now: NowDep,
                    if_match: IfMatch = None, body: OrderEnd | None = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version if body else None, required=False)
    await service.close_order(session, order_id=order_id, to="ENDED", reason=body.reason if body else None,
                              want=want, principal=principal, now=now)
    return await _order_closed(session, order_id, viewer)


@router.post("/orders/{order_id}/logic-delete", response_model=OrderDetail,
             summary="Logically delete an order (reservation:order:manage)",
             description="With a reason (no email addresses or links: it is audited). Only when none of its tasks "
                         "is open; LOGIC_DELETED is final and never takes a task again.",
             responses=problem_responses(404, 409, 412))
async def logic_delete_order(order_id: OrderId, body: OrderLogicDelete, principal: Manager, session: SessionDep,
                             now: NowDep, if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version, required=False)
    await service.close_order(session, order_id=order_id, to="LOGIC_DELETED", reason=body.reason, want=want,
                              principal=principal, now=now)
    return await _order_closed(session, order_id, viewer)


# --- tasks ---------------------------------------------------------------------------------------------------


@router.get("/tasks/{task_id}", response_model=TaskRead, summary="A task with its card, order and operations",
            description="`card.ai_payload_json` is the AI item's exact text. `ETag` is the task's version: send it "
                        "as If-Match with the next change.",
            responses=problem_responses(404))
async def get_task(task_id: TaskId, principal: CurrentPrincipal, request: Request) -> Response:
    viewer = require_read(principal)
    task = TaskRead.model_validate(await queries.task(reads(request), task_id=task_id, viewer=viewer))
    return json_response(task, headers={"ETag": etag(task.version)})


_CHANGE = problem_responses(404, 409, 412, 422, 428)


@router.put("/tasks/{task_id}/card/draft", response_model=TaskRead, summary="Save a card draft (reservation:task:edit)",
            description="Checked leniently (known fields, types, limits; anything may be missing): 422 "
                        "`TASK_CARD_PAYLOAD_INVALID` names each bad field. Only while PENDING_CONFIRM and not "
                        "blocked.", responses=_CHANGE, max_body_size=CARD_MAX_BYTES)
async def save_draft(task_id: TaskId, body: TaskCardDraft, principal: Editor, session: SessionDep, now: NowDep,
                     if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version)
    await service.save_draft(session, task_id=task_id, payload=body.payload, want=want, principal=principal, now=now)
    return await _task_answer(session, task_id, viewer)


@router.post("/tasks/{task_id}/confirm", response_model=TaskRead, summary="Confirm a task (reservation:task:confirm)",
             description="The complete card as confirmed (required fields and the card's rules are checked; 422 "
                         "names each bad field) becomes `confirmed_payload`, what OPERA receives; the task becomes "
                         "READY. Only while PENDING_CONFIRM and not blocked (409 `TASK_BLOCKED`).",
             responses=_CHANGE, max_body_size=CARD_MAX_BYTES)
async def confirm_task(task_id: TaskId, body: TaskConfirm, principal: Confirmer, session: SessionDep, now: NowDep,
                       if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version)
    await service.confirm_task(session, task_id=task_id, payload=body.payload, want=want, principal=principal, now=now)
    return await _task_answer(session, task_id, viewer)


@router.post("/tasks/{task_id}/move", response_model=TaskRead, summary="Move a task to another order",
             description="reservation:task:move. Only a PENDING_CONFIRM task; it joins the end of the target's "
                         "queue. An emptied temporary order is logically deleted.", responses=_CHANGE)
async def move_task(task_id: TaskId, body: TaskMove, principal: Mover, session: SessionDep, now: NowDep,
                    if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version)
    await service.move_task(session, task_id=task_id, target_order_id=int(body.order_id), want=want,
                            principal=principal, now=now)
    return await _task_answer(session, task_id, viewer)


@router.post("/tasks/{task_id}/convert", response_model=TaskRead, summary="Convert a manual review to a task type",
             description="reservation:task:edit. A MANUAL_REVIEW task takes the card type (and its system task "
                         "type); its draft is cleared.", responses=_CHANGE)
async def convert_task(task_id: TaskId, body: TaskConvert, principal: Editor, session: SessionDep, now: NowDep,
                       if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version)
    await service.convert_task(session, task_id=task_id, task_card_type=body.task_card_type, want=want,
                               principal=principal, now=now)
    return await _task_answer(session, task_id, viewer)


@router.post("/tasks/{task_id}/abandon", response_model=TaskRead, summary="Abandon a task: it ends FAILED",
             description="reservation:order:manage, with a reason. Nothing is written to OPERA; the queue behind it "
                         "moves on. There is no way to force a task COMPLETED.", responses=_CHANGE)
async def abandon_task(task_id: TaskId, body: TaskAbandon, principal: Manager, session: SessionDep, now: NowDep,
                       if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_version)
    await service.abandon_task(session, task_id=task_id, reason=body.reason, want=want, principal=principal, now=now)
    return await _task_answer(session, task_id, viewer)


async def _execution_answer(session: AsyncSession, task_id: int, viewer: Viewer) -> Response:
    bound = await statements(session)
    task = TaskRead.model_validate(await queries.task(bound, task_id=task_id, viewer=viewer))
    operations = await queries.operations(bound, task_id=task_id, viewer=viewer)
    return json_response(TaskExecution.model_validate({"task": task, "operations": operations}),
                         headers={"ETag": etag(task.version)})


@router.post("/tasks/{task_id}/execute", response_model=TaskExecution, summary="Execute a READY task against OPERA",
             description="reservation:task:execute. Runs the operations in sequence; every attempt is recorded. A "
                         "failed operation is an outcome (200, the task stays EXECUTING until a retry succeeds or "
                         "it is abandoned). If-Match optional. 409 `ORDER_BUSY` (retry) when the back-fill of a new "
                         "booking needs an order another request holds.",
             responses=problem_responses(404, 409, 412))
async def execute_task(task_id: TaskId, principal: Executor, session: SessionDep, now: NowDep,
                       if_match: IfMatch = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, None, required=False)
    await execution.execute_task(session, task_id=task_id, want=want, principal=principal, now=now)
    return await _execution_answer(session, task_id, viewer)


@router.get("/tasks/{task_id}/operations", response_model=OperationList, summary="A task's operations and attempts",
            responses=problem_responses(404))
async def list_operations(task_id: TaskId, principal: CurrentPrincipal, request: Request) -> Response:
    viewer = require_read(principal)
    return json_response(OperationList.model_validate(
        {"items": await queries.operations(reads(request), task_id=task_id, viewer=viewer)}))


@router.post("/operations/{operation_id}/retry", response_model=TaskExecution,
             summary="Retry a failed operation (reservation:task:execute)",
             description="A new attempt (never an overwrite); for a write, OPERA is first asked whether an earlier "
                         "attempt went through. Name the operation's `attempt_count` (If-Match or "
                         "`expected_attempt_count`). Only the FAILED operation of an EXECUTING task.",
             responses=problem_responses(404, 409, 412, 428))
async def retry_operation(operation_id: Annotated[int, Path(ge=1, le=MAX_ID)], principal: Executor,
                          session: SessionDep, now: NowDep, if_match: IfMatch = None,
                          body: OperationRetry | None = None) -> Response:
    viewer = Viewer(principal)
    want = expected_version(if_match, body.expected_attempt_count if body else None)
    assert want is not None
    task_id = await execution.retry_operation(session, operation_id=operation_id, want=want, principal=principal,
                                              now=now)
    return await _execution_answer(session, task_id, viewer)


# --- card definitions, audit, hotels --------------------------------------------------------------------------


@router.get("/task-card-definitions", response_model=TaskCardDefinitionList, summary="Every task card type")
async def list_definitions(principal: CurrentPrincipal) -> Response:
    require_read(principal)
    return json_response(definitions_api.listing())


@router.get("/task-card-definitions/{task_card_type}", response_model=TaskCardDefinitionRead,
            summary="A card type's field contract", responses=problem_responses(404),
            description="The current contract version unless `version` names an older one (cards keep the version "
                        "they were drafted or confirmed under).")
async def get_definition(task_card_type: Annotated[str, Path(max_length=64, pattern=_TEXT)],
                         principal: CurrentPrincipal,
                         version: Annotated[str | None, Query(max_length=64, pattern=_TEXT)] = None) -> Response:
    require_read(principal)
    definition = definitions_api.read(task_card_type, version)
    return json_response(definition, headers={
        "ETag": f'"{definition.task_card_type}:{definition.field_contract_version}"',
        "Cache-Control": "private, max-age=300"})


@router.get("/audit-logs", response_model=Page[AuditLogRead], summary="The reservation audit log, newest first",
            description="reservation:audit:read. Give `hotel_id`, `order_id` or `task_id` (the hotel then comes "
                        "from that row).", responses=problem_responses(400, 404))
async def list_audit_logs(principal: Auditor, request: Request, params: PageDep,
                          hotel_id: Annotated[str | None, Query(min_length=1, max_length=64, pattern=_TEXT)] = None,
                          order_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                          task_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                          action: Annotated[str | None, Query(max_length=128, pattern=_TEXT)] = None) -> Response:
    rows, cursor = await queries.audit_logs(reads(request), viewer=Viewer(principal), hotel_id=hotel_id,
                                           order_id=order_id, task_id=task_id, action=action, page=params)
    return json_response(Page[AuditLogRead](items=[AuditLogRead.model_validate(r) for r in rows], next_cursor=cursor))


@router.get("/hotels", response_model=Page[HotelRead], summary="The hotels you may see",
            responses=problem_responses(400))
async def list_hotels(principal: CurrentPrincipal, request: Request, params: PageDep) -> Response:
    viewer = require_read(principal)
    rows, cursor = await queries.hotels(reads(request), viewer=viewer, page=params)
    return json_response(Page[HotelRead](items=[HotelRead.model_validate(r) for r in rows], next_cursor=cursor))


@router.post("/hotels", status_code=status.HTTP_201_CREATED, response_model=HotelRead,
             summary="Register a hotel (reservation:hotel:manage)", responses=problem_responses(409))
async def register_hotel(body: HotelCreate, principal: HotelManager, session: SessionDep, now: NowDep) -> Response:
    viewer = Viewer(principal)
    await service.register_hotel(session, hotel_id=body.hotel_id, display_name=body.display_name, principal=principal,
                                 now=now)
    hotel = await queries.hotel(await statements(session), hotel_id=body.hotel_id, viewer=viewer)
    return json_response(HotelRead.model_validate(hotel), status_code=201)


@router.get("/hotels/{hotel_id}/staff", response_model=Page[HotelStaffRead], summary="A hotel's assigned staff",
            responses=problem_responses(400, 404))
async def list_staff(hotel_id: HotelPath, principal: HotelManager,
                     request: Request, params: PageDep) -> Response:
    rows, cursor = await queries.staff(reads(request), hotel_id=hotel_id, page=params)
    return json_response(Page[HotelStaffRead](items=[HotelStaffRead.model_validate(r) for r in rows],
                                              next_cursor=cursor))


@router.put("/hotels/{hotel_id}/staff/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
            summary="Assign an account to a hotel (reservation:hotel:manage)", responses=problem_responses(404, 409))
async def grant_staff(hotel_id: HotelPath, user_id: uuid.UUID,
                      principal: HotelManager, session: SessionDep, now: NowDep) -> Response:
    await service.grant_staff(session, hotel_id=hotel_id, user_id=user_id, principal=principal, now=now)
    return Response(status_code=204)


@router.delete("/hotels/{hotel_id}/staff/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove an account from a hotel (reservation:hotel:manage)", responses=problem_responses(404))
async def revoke_staff(hotel_id: HotelPath, user_id: uuid.UUID,
                       principal: HotelManager, session: SessionDep, now: NowDep) -> Response:
    await service.revoke_staff(session, hotel_id=hotel_id, user_id=user_id, principal=principal, now=now)
    return Response(status_code=204)


# The desk's pages (issue 19) after the API's routes, like the meeting console's.
ROUTERS = (router, *desk_pages.ROUTERS)
OPENAPI_TAGS = ({"name": TAG, "description": TAG_DESCRIPTION},)
