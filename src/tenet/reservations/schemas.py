"""Request and response DTOs of the reservation workflow (API.md "Reservation workflow").

Ids are BIGINT and travel as strings (API.md). Requests forbid unknown members, except the AI batch whose
items are kept as sent (its body is read raw by the route, never through a model). User-typed reasons are
refused when they hold an email address or a URL: they are stored in the audit log (spec §10).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)

MAX_ID = 2**63 - 1
ID_PATTERN = r"^[1-9][0-9]{0,18}$"

Id = Annotated[int, PlainSerializer(str, return_type=str),
               WithJsonSchema({"type": "string", "pattern": ID_PATTERN, "examples": ["7001"]})]


def _id_in(value: str) -> int:
    number = int(value)
    if number > MAX_ID:
        raise ValueError("an id is at most 2^63-1")
    return number


IdIn = Annotated[str, StringConstraints(pattern=ID_PATTERN), AfterValidator(_id_in),
                 WithJsonSchema({"type": "string", "pattern": ID_PATTERN, "examples": ["7001"]})]

_PERSONAL = re.compile(r"([^\s@]+@[^\s@]+\.[^\s@]+|https?://|www\.)", re.IGNORECASE)


def _no_personal_data(value: str) -> str:
    if _PERSONAL.search(value):
        raise ValueError("a reason may not contain an email address or a link (it is kept in the audit log)")
    if not value.isprintable():
        raise ValueError("a reason is one line of printable text")
    return value


Reason = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512),
                   AfterValidator(_no_personal_data)]
def _printable_id(value: str) -> str:
    # No control or format characters (U+001F separates the parts of the batch key), no outer whitespace.
    if not value.isprintable() or value != value.strip():
        raise ValueError("printable characters only, without leading or trailing whitespace")
    return value


HotelId = Annotated[str, StringConstraints(min_length=1, max_length=64), AfterValidator(_printable_id)]
ExpectedVersion = Annotated[int | None, Field(None, ge=1, le=2**53,
                                              description="The version you read (instead of If-Match)")]

OrderStatus = Literal["TEMPORARY", "ACTIVE", "ENDED", "LOGIC_DELETED"]
OrderKeyType = Literal["GROUP_CODE", "CONFIRMATION_NUMBER", "TEMPORARY"]
TaskStatus = Literal["PENDING_CONFIRM", "READY", "EXECUTING", "COMPLETED", "FAILED"]
QueueCardType = Literal["NEW_BOOKING", "UPDATE_BOOKING", "CANCEL_BOOKING", "VOUCHER_RECEIVED", "ROOMING_LIST",
                        "AMEND_GROUP_CODE", "TRACE_RESERVATION_NOTES", "TA_RECORDER"]
BlockedReason = Literal["EARLIER_TASK", "PARENT"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- ingest ------------------------------------------------------------------------------------------------


class AiBatchItemResult(BaseModel):
    """What one AI item became (the first answer; a replay answers it unchanged)."""

    source_list: str
    array_index: int
    transition_id: Id
    item_idempotency_key: str
    item_payload_sha256: str
    result_type: str | None
    ai_task_type: str | None
    task_subtype: str | None
    system_process_category: str
    system_task_type: str
    task_card_type: str
    route_code: str
    task_id: Id
    order_id: Id
    order_status: OrderStatus
    task_status: TaskStatus
    execution_order: int
    adapter_error_code: str | None
    adapter_error_message: str | None


class AiBatchIngested(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "batch_id": "7001", "replayed": False, "hotel_id": "H1", "source_message_id": "900123",
        "request_id": "sa-0001", "request_payload_sha256": "0" * 64, "batch_idempotency_key": "1" * 64,
        "item_count": 0, "items": []}]})

    batch_id: Id
    replayed: bool
    hotel_id: str
    source_message_id: Id
    request_id: str | None
    request_payload_sha256: str
    batch_idempotency_key: str
    item_count: int
    items: list[AiBatchItemResult]


class AiBatchRead(BaseModel):
    batch_id: Id
    hotel_id: str
    source_message_id: Id
    request_id: str | None
    client_id: uuid.UUID
    received_at: datetime
    item_count: int
    request_payload_sha256: str
    batch_idempotency_key: str
    ai_contract_version: str
    items: list[AiBatchItemResult]


# --- tasks -------------------------------------------------------------------------------------------------


class TaskSummary(BaseModel):
    """A task as the queue shows it. `blocked`, `blocked_reason` and the `can_*` flags are computed for the
    caller on every read (never stored): a blocked task can only be viewed."""

    id: Id
    hotel_id: str
    order_id: Id
    system_task_type: str
    task_card_type: str
    task_subtype: str | None
    result_type: str | None
    ai_task_type: str | None
    task_status: TaskStatus
    queue_participation: bool
    execution_order: int
    parent_task_id: Id | None
    parent_source_event_index: int | None
    linked_task_group_id: str | None
    blocked_until_parent_completed: bool
    blocked: bool
    blocked_reason: BlockedReason | None
    blocking_task_id: Id | None
    manual_review: bool
    manual_reason_code: str | None
    last_failure_reason: str | None
    can_edit: bool
    can_confirm: bool
    can_execute: bool
    can_move: bool
    can_convert: bool
    can_abandon: bool
    source_message_id: Id
    ai_transition_id: Id
    confirmed_at: datetime | None
    completed_at: datetime | None
    failed_at: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime


class TaskOrderRef(BaseModel):
    id: Id
    order_status: OrderStatus
    order_key_type: OrderKeyType
    order_business_key: str | None
    temporary_order_code: str | None
    display_name: str | None
    version: int


class TaskCardRead(BaseModel):
    """`ai_payload_json` is the AI item's exact text (decode the string to get it byte for byte). The UI
    shows `confirmed_payload` when set, else `draft_payload`, else `prefill` (the AI's values per field)."""

    id: Id
    task_card_type: str
    field_contract_version: str
    current_contract_version: str
    ai_payload_json: str
    prefill: dict[str, Any]
    prefill_issues: list[dict[str, str]]
    draft_payload: dict[str, Any] | None
    draft_updated_by: uuid.UUID | None
    draft_updated_at: datetime | None
    confirmed_payload: dict[str, Any] | None
    confirmed_by: uuid.UUID | None
    confirmed_at: datetime | None
    updated_at: datetime


class OperationsSummary(BaseModel):
    total: int
    succeeded: int
    failed: int
    pending: int
    failed_operation_id: Id | None


class TaskRead(TaskSummary):
    system_process_category: str
    route_code: str
    adapter_error_code: str | None
    adapter_error_message: str | None
    item_payload_sha256: str
    order: TaskOrderRef
    card: TaskCardRead
    operations_summary: OperationsSummary


class TaskCardDraft(Strict):
    payload: dict[str, Any] = Field(description="The card's fields (a partial draft is fine)")
    expected_version: ExpectedVersion = None


class TaskConfirm(Strict):
    payload: dict[str, Any] = Field(description="The complete card as confirmed; what OPERA will receive")
    expected_version: ExpectedVersion = None


class TaskMove(Strict):
    order_id: IdIn
    expected_version: ExpectedVersion = None


class TaskConvert(Strict):
    task_card_type: QueueCardType
    expected_version: ExpectedVersion = None


class TaskAbandon(Strict):
    reason: Reason
    expected_version: ExpectedVersion = None


class AttemptRead(BaseModel):
    id: Id
    attempt_number: int
    attempt_status: Literal["SUCCEEDED", "FAILED"]
    request_payload: dict[str, Any]
    response_payload: dict[str, Any] | None
    error_code: str | None
    error_message: str | None
    via_lookup: bool
    outcome_unknown: bool
    started_at: datetime
    finished_at: datetime


class OperationRead(BaseModel):
    """`attempt_count` is the operation's version: send it as If-Match (or `expected_attempt_count`) to retry."""

    id: Id
    task_id: Id
    order_id: Id
    operation_sequence: int
    operation_code: str
    operation_name: str
    operation_status: Literal["PENDING", "SUCCEEDED", "FAILED"]
    adapter_name: str
    external_reference: str
    request_payload: dict[str, Any]
    attempt_count: int
    last_attempt_id: Id | None
    last_error_message: str | None
    can_retry: bool
    created_at: datetime
    updated_at: datetime
    attempts: list[AttemptRead]


class OperationList(BaseModel):
    items: list[OperationRead]


class TaskExecution(BaseModel):
    """The task after execution or retry, and its operations. A failed attempt is an outcome, not an error:
    it is recorded and shown here (the task stays EXECUTING until a retry succeeds or it is abandoned)."""

    task: TaskRead
    operations: list[OperationRead]


class OperationRetry(Strict):
    expected_attempt_count: Annotated[int | None, Field(None, ge=0, le=1_000_000)] = None


# --- orders ------------------------------------------------------------------------------------------------


class TaskCounts(BaseModel):
    pending_confirm: int
    ready: int
    executing: int
    completed: int
    failed: int


class OrderSummary(BaseModel):
    id: Id
    hotel_id: str
    order_key_type: OrderKeyType
    order_business_key: str | None
    temporary_order_code: str | None
    order_status: OrderStatus
    business_key_source: str | None
    business_key_backfilled_at: datetime | None
    display_name: str | None
    source_message_id: Id | None
    created_from_task_id: Id | None
    merged_into_order_id: Id | None
    ended_at: datetime | None
    logic_deleted_at: datetime | None
    logic_deleted_reason: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    task_counts: TaskCounts
    next_task_id: Id | None


class OrderDetail(OrderSummary):
    """The order with its tasks in queue order (notifications interleaved where they arrived)."""

    tasks: list[TaskSummary]
    tasks_next_cursor: str | None


class OrderCreate(Strict):
    hotel_id: HotelId
    order_key_type: Literal["GROUP_CODE", "CONFIRMATION_NUMBER"]
    order_business_key: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    display_name: Annotated[str | None, StringConstraints(strip_whitespace=True, min_length=1, max_length=256,
                                                          pattern=r"^[^\x00-\x1f\x7f]+$")] = None


class OrderEnd(Strict):
    reason: Reason | None = None
    expected_version: ExpectedVersion = None


class OrderLogicDelete(Strict):
    reason: Reason
    expected_version: ExpectedVersion = None


# --- card definitions ----------------------------------------------------------------------------------------


class FieldDefinitionRead(BaseModel):
    key: str
    label: str
    type: str
    required: bool
    editable: bool
    max_length: int | None
    min: str | None
    max: str | None
    pattern: str | None
    enum_values: list[str]
    item_fields: list[FieldDefinitionRead]
    min_items: int | None
    max_items: int | None
    source_path: str | None
    default: Any
    description: str


class CardRuleRead(BaseModel):
    code: str
    fields: list[str]
    description: str


class TaskCardDefinitionRead(BaseModel):
    task_card_type: str
    field_contract_version: str
    current: bool
    confirmable: bool
    fields: list[FieldDefinitionRead]
    rules: list[CardRuleRead]


class TaskCardDefinitionSummary(BaseModel):
    task_card_type: str
    field_contract_version: str
    versions: list[str]
    confirmable: bool


class TaskCardDefinitionList(BaseModel):
    items: list[TaskCardDefinitionSummary]


# --- audit and hotels ----------------------------------------------------------------------------------------


class AuditLogRead(BaseModel):
    id: Id
    hotel_id: str
    order_id: Id | None
    task_id: Id | None
    operation_id: Id | None
    batch_id: Id | None
    actor_type: Literal["SYSTEM", "USER", "SUPERAGENT"]
    actor_id: str | None
    action: str
    reason: str | None
    before_snapshot: dict[str, Any] | None
    after_snapshot: dict[str, Any] | None
    request_id: str | None
    occurred_at: datetime


class HotelRead(BaseModel):
    hotel_id: str
    display_name: str | None
    created_at: datetime
    assigned: bool


class HotelCreate(Strict):
    hotel_id: HotelId
    display_name: Annotated[str | None, StringConstraints(strip_whitespace=True, min_length=1, max_length=256,
                                                          pattern=r"^[^\x00-\x1f\x7f]+$")] = None


class HotelStaffRead(BaseModel):
    hotel_id: str
    user_id: uuid.UUID
    display_name: str
    email: str
    granted_at: datetime
    granted_by: uuid.UUID | None
