"""Tables of the reservation workflow (schema `reservation`): the spec's eight `workflow_reservation_*`
tables, plus the hotel registry and staff assignments (visibility) and the OPERA simulator's own store.

Tenant key everywhere (RSV-INV-01): every table has `hotel_id`, every primary key and unique index
includes it, and every reference between these tables is composite `(id, hotel_id)`, so a row can never
point at another hotel's row. Primary keys are `(id, hotel_id)`: ids are globally unique BIGINT
identities, so the key's leading `id` also serves the routes that address a row by id alone.

AI input is stored as text and the request as bytes, never as jsonb (RSV-INV-03): jsonb would reorder
keys, drop duplicate members and respell numbers. What the system or a user writes (drafts, confirmed
payloads, audit summaries, adapter payloads) is jsonb.

Constraint names are explicit (`conv`) with a short stem per table: the spec's long table names would
push the naming convention's names past PostgreSQL's 63 bytes, and the invariant catalog cites them.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from tenet.db.base import Base

SCHEMA = "reservation"

ORDER_STATUSES = ("TEMPORARY", "ACTIVE", "ENDED", "LOGIC_DELETED")
ORDER_KEY_TYPES = ("GROUP_CODE", "CONFIRMATION_NUMBER", "TEMPORARY")
KEY_SOURCES = ("AI_CANDIDATE", "USER_CONFIRMED", "OPERA_SIMULATION_RESULT")
TASK_STATUSES = ("PENDING_CONFIRM", "READY", "EXECUTING", "COMPLETED", "FAILED")
SYSTEM_TASK_TYPES = ("NEW_BOOKING", "UPDATE_BOOKING", "CANCEL_BOOKING", "MANUAL_REVIEW", "INFORMATIONAL_MESSAGE")
UPDATE_CARDS = ("VOUCHER_RECEIVED", "ROOMING_LIST", "AMEND_GROUP_CODE", "TRACE_RESERVATION_NOTES", "TA_RECORDER")
CARD_TYPES = ("NEW_BOOKING", "UPDATE_BOOKING", "CANCEL_BOOKING", *UPDATE_CARDS, "MESSAGE_NOTIFICATION",
              "FALLBACK_REVIEW")
# Which card types each system task type may carry (spec §3.3/§3.4).
CARDS_OF_TYPE: dict[str, tuple[str, ...]] = {
    "NEW_BOOKING": ("NEW_BOOKING",),
    "UPDATE_BOOKING": ("UPDATE_BOOKING", *UPDATE_CARDS),
    "CANCEL_BOOKING": ("CANCEL_BOOKING",),
    "MANUAL_REVIEW": ("FALLBACK_REVIEW",),
    "INFORMATIONAL_MESSAGE": ("MESSAGE_NOTIFICATION",),
}
CATEGORIES = ("BUSINESS_TASK", "SOURCE_MESSAGE_NOTIFICATION", "UNHANDLED_CURRENT_INTENT", "ADAPTER_CONTRACT_ERROR")
SOURCE_LISTS = ("ai_task_results", "message_events", "unhandled_current_intents")
ADAPTER_ERROR_CODES = (
    "ITEM_NOT_OBJECT", "DUPLICATE_MEMBER", "MISSING_FIELD", "WRONG_TYPE", "VALUE_TOO_LONG", "VALUE_OUT_OF_RANGE",
    "UNKNOWN_RESULT_TYPE", "RESERVED_RESULT_TYPE", "UNKNOWN_TASK_TYPE", "INVALID_CURRENT_OR_HISTORY",
    "INVALID_BUSINESS_KEY", "PARENT_NOT_FOUND", "PARENT_CYCLE",
)
OPERATION_STATUSES = ("PENDING", "SUCCEEDED", "FAILED")
ACTOR_TYPES = ("SYSTEM", "USER", "SUPERAGENT")

# Names the invariant catalog, the error mapping and the bypass tests refer to.
ORDER_ACTIVE_KEY_INDEX = "uq_rsv_order_active_key"
TASK_EXECUTION_ORDER_INDEX = "uq_rsv_task_execution_order"
TASK_ONE_EXECUTING_INDEX = "uq_rsv_task_one_executing"
BATCH_KEY_INDEX = "uq_rsv_batch_idempotency_key"
HOTEL_STAFF_PK = "pk_hotel_staff"

TRIGGERS = {
    "batch_immutable": "rsv_batch_immutable",
    "transition_immutable": "rsv_transition_immutable",
    "order_guard": "rsv_order_guard",
    "order_closed_has_no_open_tasks": "rsv_order_closed_has_no_open_tasks",
    "task_guard": "rsv_task_guard",
    "task_queue_respected": "rsv_task_queue_respected",
    "task_completion_earned": "rsv_task_completion_earned",
    "card_guard": "rsv_card_guard",
    "op_guard": "rsv_op_guard",
    "attempt_append_only": "rsv_attempt_append_only",
    "attempt_in_sequence": "rsv_attempt_in_sequence",
    "audit_append_only": "rsv_audit_append_only",
    "audit_no_truncate": "rsv_audit_no_truncate",
}

_HEX64 = "~ '^[0-9a-f]{64}$'"
_KEY_NORMALIZED = "= upper({c}) AND {c} !~ '[[:space:][:cntrl:]]' AND length({c}) BETWEEN 1 AND 128"


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _ck(sql: str, name: str) -> CheckConstraint:
    return CheckConstraint(sql, name=conv(name))


def _pk(table: str) -> PrimaryKeyConstraint:
    return PrimaryKeyConstraint("id", "hotel_id", name=conv(f"pk_{table}"))


def _fk(columns: list[str], target: str, name: str, *, target_columns: tuple[str, str] = ("id", "hotel_id")
        ) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(columns, [f"{SCHEMA}.{target}.{c}" for c in target_columns], name=conv(name),
                                ondelete="RESTRICT")


def _hotel_fk(table_stem: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["hotel_id"], [f"{SCHEMA}.hotel.hotel_id"], name=conv(f"fk_{table_stem}_hotel"),
                                ondelete="RESTRICT")


class Hotel(Base):
    """A hotel (the tenant). Registered by an administrator or by the first ingest of a client allowed
    for it; never deleted."""

    __tablename__ = "hotel"
    __table_args__ = (
        _ck("hotel_id <> '' AND hotel_id = btrim(hotel_id) AND hotel_id !~ '[[:cntrl:]]'", "ck_hotel_hotel_id_safe"),
        _ck("display_name IS NULL OR length(display_name) BETWEEN 1 AND 256", "ck_hotel_display_name_length"),
        {"schema": SCHEMA},
    )

    hotel_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    display_name: Mapped[str | None] = mapped_column(String(256))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class HotelStaff(Base):
    """An access grant: this account works this hotel's queue. Revoking deletes the row (audited)."""

    __tablename__ = "hotel_staff"
    __table_args__ = (
        PrimaryKeyConstraint("hotel_id", "user_id", name=conv(HOTEL_STAFF_PK)),
        ForeignKeyConstraint(["hotel_id"], [f"{SCHEMA}.hotel.hotel_id"], name=conv("fk_hotel_staff_hotel"),
                             ondelete="RESTRICT"),
        Index("ix_hotel_staff_user_id", "user_id"),
        {"schema": SCHEMA},
    )

    hotel_id: Mapped[str] = mapped_column(String(64))
    # iam.user_account.id; no foreign key leaves the schema (the account-deleted handler removes grants).
    user_id: Mapped[uuid.UUID]
    granted_at: Mapped[datetime]
    granted_by: Mapped[uuid.UUID | None]


class AiBatch(Base):
    """One ingest request (spec §5). Written once with its transitions; only the stored first answer is
    filled in at the end of the same transaction (trigger `rsv_batch_immutable`)."""

    __tablename__ = "workflow_reservation_ai_batch"
    __table_args__ = (
        _pk("workflow_reservation_ai_batch"),
        _hotel_fk("rsv_batch"),
        Index(BATCH_KEY_INDEX, "hotel_id", "batch_idempotency_key", unique=True),
        Index("ix_rsv_batch_source_message", "hotel_id", "source_message_id"),
        Index("ix_rsv_batch_received_at", "hotel_id", "received_at"),
        _ck(f"request_payload_sha256 {_HEX64}", "ck_rsv_batch_sha256_hex"),
        _ck(f"batch_idempotency_key {_HEX64}", "ck_rsv_batch_key_hex"),
        _ck("request_payload_sha256 = encode(sha256(request_body), 'hex')", "ck_rsv_batch_body_matches_sha256"),
        _ck("idempotency_basis IN ('REQUEST_ID', 'BODY') "
            "AND (idempotency_basis = 'REQUEST_ID') = (request_id IS NOT NULL)", "ck_rsv_batch_basis"),
        _ck("request_id IS NULL OR (length(request_id) BETWEEN 1 AND 128 AND request_id !~ '[[:cntrl:]]')",
            "ck_rsv_batch_request_id_safe"),
        _ck("item_count >= 0", "ck_rsv_batch_item_count"),
        _ck("source_message_id > 0", "ck_rsv_batch_source_message"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    source_message_id: Mapped[int] = mapped_column(BigInteger)
    request_payload_sha256: Mapped[str] = mapped_column(String(64))
    batch_idempotency_key: Mapped[str] = mapped_column(String(64))
    idempotency_basis: Mapped[str] = mapped_column(String(16))
    client_id: Mapped[uuid.UUID]
    request_id: Mapped[str | None] = mapped_column(String(128))
    received_at: Mapped[datetime]
    item_count: Mapped[int] = mapped_column(Integer)
    request_body: Mapped[bytes] = mapped_column(LargeBinary)
    extraction_warnings_json: Mapped[str | None] = mapped_column(Text)
    ai_contract_version: Mapped[str] = mapped_column(String(64))
    response_items_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AiTransition(Base):
    """One AI item (spec §6): its exact text, the AI's raw triple, and the system's mapping. Immutable."""

    __tablename__ = "workflow_reservation_ai_transition"
    __table_args__ = (
        _pk("workflow_reservation_ai_transition"),
        _fk(["batch_id", "hotel_id"], "workflow_reservation_ai_batch", "fk_rsv_transition_batch"),
        Index("uq_rsv_transition_item_key", "hotel_id", "item_idempotency_key", unique=True),
        Index("uq_rsv_transition_position", "hotel_id", "batch_id", "source_list", "array_index", unique=True),
        Index("ix_rsv_transition_source_event", "hotel_id", "source_message_id", "source_event_index"),
        Index("ix_rsv_transition_result_type", "hotel_id", "result_type", "ai_task_type"),
        Index("ix_rsv_transition_route_code", "hotel_id", "route_code"),
        Index("ix_rsv_transition_adapter_errors", "hotel_id", "id",
              postgresql_where=text("system_process_category = 'ADAPTER_CONTRACT_ERROR'")),
        Index("ix_rsv_transition_group_code", "hotel_id", "group_code",
              postgresql_where=text("group_code IS NOT NULL")),
        Index("ix_rsv_transition_confirmation_number", "hotel_id", "confirmation_number",
              postgresql_where=text("confirmation_number IS NOT NULL")),
        _ck(_in("source_list", SOURCE_LISTS), "ck_rsv_transition_source_list"),
        _ck("array_index >= 1", "ck_rsv_transition_array_index"),
        _ck(_in("system_process_category", CATEGORIES), "ck_rsv_transition_category"),
        _ck(_in("system_task_type", SYSTEM_TASK_TYPES), "ck_rsv_transition_system_task_type"),
        _ck(_in("task_card_type", CARD_TYPES), "ck_rsv_transition_card_type"),
        _ck(f"item_payload_sha256 {_HEX64}", "ck_rsv_transition_sha256_hex"),
        _ck(f"item_idempotency_key {_HEX64}", "ck_rsv_transition_key_hex"),
        _ck("item_payload_sha256 = encode(sha256(convert_to(ai_payload_json, 'UTF8')), 'hex')",
            "ck_rsv_transition_payload_matches_sha256"),
        _ck("raw_byte_offset >= 0 AND raw_byte_length = octet_length(convert_to(ai_payload_json, 'UTF8'))",
            "ck_rsv_transition_raw_span"),
        _ck("(system_process_category = 'ADAPTER_CONTRACT_ERROR') = (adapter_error_code IS NOT NULL) "
            "AND (adapter_error_code IS NULL) = (adapter_error_message IS NULL)", "ck_rsv_transition_adapter_error"),
        _ck(f"adapter_error_code IS NULL OR {_in('adapter_error_code', ADAPTER_ERROR_CODES)}",
            "ck_rsv_transition_adapter_error_code"),
        _ck("(group_code IS NULL OR group_code " + _KEY_NORMALIZED.format(c="group_code") + ") AND "
            "(confirmation_number IS NULL OR confirmation_number "
            + _KEY_NORMALIZED.format(c="confirmation_number") + ")", "ck_rsv_transition_keys_normalized"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    batch_id: Mapped[int] = mapped_column(BigInteger)
    source_message_id: Mapped[int] = mapped_column(BigInteger)
    source_list: Mapped[str] = mapped_column(String(32))
    array_index: Mapped[int] = mapped_column(Integer)
    source_event_index: Mapped[int | None] = mapped_column(Integer)
    execution_order: Mapped[int] = mapped_column(Integer)
    catalog_code: Mapped[str | None] = mapped_column(String(32))
    skill_id: Mapped[str | None] = mapped_column(String(128))
    result_type: Mapped[str | None] = mapped_column(String(64))
    ai_task_type: Mapped[str | None] = mapped_column(String(64))
    route_code: Mapped[str] = mapped_column(String(64))
    system_process_category: Mapped[str] = mapped_column(String(64))
    system_task_type: Mapped[str] = mapped_column(String(64))
    task_card_type: Mapped[str] = mapped_column(String(64))
    task_subtype: Mapped[str | None] = mapped_column(String(128))
    current_or_history: Mapped[str | None] = mapped_column(String(32))
    group_code: Mapped[str | None] = mapped_column(String(128))
    confirmation_number: Mapped[str | None] = mapped_column(String(128))
    item_payload_sha256: Mapped[str] = mapped_column(String(64))
    item_idempotency_key: Mapped[str] = mapped_column(String(64))
    manual_reason_code: Mapped[str | None] = mapped_column(String(128))
    parent_source_event_index: Mapped[int | None] = mapped_column(Integer)
    linked_task_group_id: Mapped[str | None] = mapped_column(String(128))
    blocked_until_parent_completed: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    ai_payload_json: Mapped[str] = mapped_column(Text)
    raw_byte_offset: Mapped[int] = mapped_column(Integer)
    raw_byte_length: Mapped[int] = mapped_column(Integer)
    case_keys_json: Mapped[str | None] = mapped_column(Text)
    extracted_fields_json: Mapped[str | None] = mapped_column(Text)
    manual_review_json: Mapped[str | None] = mapped_column(Text)
    informational_message_json: Mapped[str | None] = mapped_column(Text)
    attachments_json: Mapped[str | None] = mapped_column(Text)
    context_used_json: Mapped[str | None] = mapped_column(Text)
    adapter_error_code: Mapped[str | None] = mapped_column(String(128))
    adapter_error_message: Mapped[str | None] = mapped_column(String(512))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Order(Base):
    """A task container (spec §7): TEMPORARY -> ACTIVE | ENDED | LOGIC_DELETED (lifecycles.ORDER).

    The row is the serialisation point of its queue: every command that changes its tasks' statuses or
    appends to it holds the row lock first. `last_execution_order` allocates queue positions under that
    lock. The spec's MySQL helper column `active_business_key` is replaced by the partial unique index
    `uq_rsv_order_active_key` (RSV-INV-07)."""

    __tablename__ = "workflow_reservation_order"
    __table_args__ = (
        _pk("workflow_reservation_order"),
        _hotel_fk("rsv_order"),
        _fk(["merged_into_order_id", "hotel_id"], "workflow_reservation_order", "fk_rsv_order_merged_into"),
        Index(ORDER_ACTIVE_KEY_INDEX, "hotel_id", "order_key_type", "order_business_key", unique=True,
              postgresql_where=text("order_status = 'ACTIVE'")),
        Index("uq_rsv_order_temporary_code", "hotel_id", "temporary_order_code", unique=True),
        Index("ix_rsv_order_status_updated", "hotel_id", "order_status", "updated_at", "id"),
        Index("ix_rsv_order_business_key", "hotel_id", "order_key_type", "order_business_key"),
        _ck(_in("order_status", ORDER_STATUSES), "ck_rsv_order_status"),
        _ck(_in("order_key_type", ORDER_KEY_TYPES), "ck_rsv_order_key_type"),
        _ck("(order_key_type = 'TEMPORARY') = (order_business_key IS NULL)", "ck_rsv_order_key_present"),
        _ck("order_business_key IS NULL OR order_business_key " + _KEY_NORMALIZED.format(c="order_business_key"),
            "ck_rsv_order_key_normalized"),
        _ck("order_status <> 'TEMPORARY' OR order_key_type = 'TEMPORARY'", "ck_rsv_order_temporary_is_unkeyed"),
        _ck("order_status <> 'ACTIVE' OR order_key_type <> 'TEMPORARY'", "ck_rsv_order_active_is_keyed"),
        _ck("order_key_type <> 'TEMPORARY' OR temporary_order_code IS NOT NULL", "ck_rsv_order_temporary_has_code"),
        _ck("(order_business_key IS NULL) = (business_key_source IS NULL) AND "
            f"(business_key_source IS NULL OR {_in('business_key_source', KEY_SOURCES)})", "ck_rsv_order_key_source"),
        _ck("business_key_backfilled_at IS NULL OR (temporary_order_code IS NOT NULL "
            "AND order_business_key IS NOT NULL "
            "AND business_key_source IN ('USER_CONFIRMED', 'OPERA_SIMULATION_RESULT'))",
            "ck_rsv_order_backfill"),
        _ck("merged_into_order_id IS NULL OR (order_status = 'LOGIC_DELETED' AND merged_into_order_id <> id)",
            "ck_rsv_order_merged"),
        _ck("(order_status = 'ENDED') = (ended_at IS NOT NULL)", "ck_rsv_order_ended_has_time"),
        _ck("(order_status = 'LOGIC_DELETED') = (logic_deleted_at IS NOT NULL AND logic_deleted_reason IS NOT NULL)",
            "ck_rsv_order_deleted_has_time"),
        _ck("version > 0", "ck_rsv_order_version"),
        _ck("last_execution_order >= 0", "ck_rsv_order_last_execution_order"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    order_key_type: Mapped[str] = mapped_column(String(32))
    order_business_key: Mapped[str | None] = mapped_column(String(128))
    temporary_order_code: Mapped[str | None] = mapped_column(String(128))
    order_status: Mapped[str] = mapped_column(String(32))
    business_key_source: Mapped[str | None] = mapped_column(String(64))
    business_key_backfilled_at: Mapped[datetime | None]
    display_name: Mapped[str | None] = mapped_column(String(256))
    source_message_id: Mapped[int | None] = mapped_column(BigInteger)
    created_from_task_id: Mapped[int | None] = mapped_column(BigInteger)
    merged_into_order_id: Mapped[int | None] = mapped_column(BigInteger)
    last_execution_order: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    ended_at: Mapped[datetime | None]
    logic_deleted_at: Mapped[datetime | None]
    logic_deleted_reason: Mapped[str | None] = mapped_column(String(512))
    version: Mapped[int] = mapped_column(BigInteger, server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Task(Base):
    """One unit of work on an order (spec §8): PENDING_CONFIRM -> READY -> EXECUTING -> COMPLETED, or FAILED
    by an explicit abandon (lifecycles.TASK). `blocked` is computed, never stored."""

    __tablename__ = "workflow_reservation_task"
    __table_args__ = (
        _pk("workflow_reservation_task"),
        _fk(["order_id", "hotel_id"], "workflow_reservation_order", "fk_rsv_task_order"),
        _fk(["ai_transition_id", "hotel_id"], "workflow_reservation_ai_transition", "fk_rsv_task_transition"),
        _fk(["parent_task_id", "hotel_id"], "workflow_reservation_task", "fk_rsv_task_parent"),
        Index(TASK_EXECUTION_ORDER_INDEX, "hotel_id", "order_id", "execution_order", unique=True),
        Index("uq_rsv_task_transition", "hotel_id", "ai_transition_id", unique=True),
        Index(TASK_ONE_EXECUTING_INDEX, "hotel_id", "order_id", unique=True,
              postgresql_where=text("task_status = 'EXECUTING'")),
        Index("ix_rsv_task_open_queue", "hotel_id", "order_id", "execution_order",
              postgresql_where=text(
                  "queue_participation AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING')")),
        Index("ix_rsv_task_open_by_age", "hotel_id", "created_at", "id",
              postgresql_where=text(
                  "queue_participation AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING')")),
        Index("ix_rsv_task_status_updated", "hotel_id", "task_status", "updated_at"),
        Index("ix_rsv_task_source_message", "hotel_id", "source_message_id"),
        Index("ix_rsv_task_parent", "hotel_id", "parent_task_id", postgresql_where=text("parent_task_id IS NOT NULL")),
        _ck(_in("task_status", TASK_STATUSES), "ck_rsv_task_status"),
        _ck(_in("system_task_type", SYSTEM_TASK_TYPES), "ck_rsv_task_system_task_type"),
        _ck(" OR ".join(f"(system_task_type = '{t}' AND {_in('task_card_type', cards)})"
                        for t, cards in CARDS_OF_TYPE.items()), "ck_rsv_task_card_matches_type"),
        _ck("(NOT queue_participation) = (system_task_type = 'INFORMATIONAL_MESSAGE')", "ck_rsv_task_queue_type"),
        _ck("queue_participation OR task_status = 'COMPLETED'", "ck_rsv_task_notification_completed"),
        _ck("NOT queue_participation OR task_status NOT IN ('READY', 'EXECUTING', 'COMPLETED') "
            "OR confirmed_at IS NOT NULL", "ck_rsv_task_confirmed_has_time"),
        _ck("(task_status = 'COMPLETED') = (completed_at IS NOT NULL)", "ck_rsv_task_completed_has_time"),
        _ck("(task_status = 'FAILED') = (failed_at IS NOT NULL) "
            "AND (task_status <> 'FAILED' OR last_failure_reason IS NOT NULL)", "ck_rsv_task_failed_has_time"),
        _ck("parent_task_id IS NULL OR parent_task_id < id", "ck_rsv_task_parent_before_child"),
        _ck("NOT blocked_until_parent_completed OR parent_task_id IS NOT NULL", "ck_rsv_task_blocked_needs_parent"),
        _ck("execution_order >= 1", "ck_rsv_task_execution_order"),
        _ck("version > 0", "ck_rsv_task_version"),
        _ck("manual_reason_code IS NULL OR manual_review", "ck_rsv_task_manual_reason"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[int] = mapped_column(BigInteger)
    source_message_id: Mapped[int] = mapped_column(BigInteger)
    ai_transition_id: Mapped[int] = mapped_column(BigInteger)
    result_type: Mapped[str | None] = mapped_column(String(64))
    ai_task_type: Mapped[str | None] = mapped_column(String(64))
    system_task_type: Mapped[str] = mapped_column(String(64))
    task_card_type: Mapped[str] = mapped_column(String(64))
    task_subtype: Mapped[str | None] = mapped_column(String(128))
    task_status: Mapped[str] = mapped_column(String(32))
    queue_participation: Mapped[bool] = mapped_column(Boolean)
    execution_order: Mapped[int] = mapped_column(Integer)
    parent_task_id: Mapped[int | None] = mapped_column(BigInteger)
    parent_source_event_index: Mapped[int | None] = mapped_column(Integer)
    linked_task_group_id: Mapped[str | None] = mapped_column(String(128))
    blocked_until_parent_completed: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    manual_review: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    manual_reason_code: Mapped[str | None] = mapped_column(String(128))
    last_failure_reason: Mapped[str | None] = mapped_column(String(512))
    confirmed_at: Mapped[datetime | None]
    completed_at: Mapped[datetime | None]
    failed_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column(BigInteger, server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class TaskCard(Base):
    """The task's card (spec §9): the AI's exact item text, the user's draft, and — once confirmed — the
    payload OPERA reads, with who and when. A confirmed card is frozen (trigger `rsv_card_guard`)."""

    __tablename__ = "workflow_reservation_task_card"
    __table_args__ = (
        _pk("workflow_reservation_task_card"),
        _fk(["task_id", "hotel_id"], "workflow_reservation_task", "fk_rsv_card_task"),
        Index("uq_rsv_card_task", "hotel_id", "task_id", unique=True),
        Index("ix_rsv_card_type", "hotel_id", "task_card_type"),
        # The contract migration (spec §9) runs across hotels and only ever touches these cards.
        Index("ix_rsv_card_contract_pending", "task_card_type", "field_contract_version",
              postgresql_where=text("draft_payload_json IS NULL AND confirmed_payload_json IS NULL")),
        _ck(_in("task_card_type", CARD_TYPES), "ck_rsv_card_type"),
        _ck("(confirmed_payload_json IS NULL) = (confirmed_by IS NULL) "
            "AND (confirmed_payload_json IS NULL) = (confirmed_at IS NULL)", "ck_rsv_card_confirmed_complete"),
        _ck("(draft_payload_json IS NULL) = (draft_updated_at IS NULL)", "ck_rsv_card_draft_complete"),
        _ck("(draft_payload_json IS NULL OR jsonb_typeof(draft_payload_json) = 'object') AND "
            "(confirmed_payload_json IS NULL OR jsonb_typeof(confirmed_payload_json) = 'object')",
            "ck_rsv_card_payload_objects"),
        _ck("field_contract_version ~ '^[0-9A-Za-z._-]{1,64}$'", "ck_rsv_card_contract_version"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[int] = mapped_column(BigInteger)
    task_card_type: Mapped[str] = mapped_column(String(64))
    field_contract_version: Mapped[str] = mapped_column(String(64))
    ai_payload_json: Mapped[str] = mapped_column(Text)
    draft_payload_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    draft_updated_by: Mapped[uuid.UUID | None]
    draft_updated_at: Mapped[datetime | None]
    confirmed_payload_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    confirmed_by: Mapped[uuid.UUID | None]
    confirmed_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AuditLog(Base):
    """The spec's own audit table (§10): append-only, actor typed, allow-listed summaries only."""

    __tablename__ = "workflow_reservation_audit_log"
    __table_args__ = (
        _pk("workflow_reservation_audit_log"),
        Index("ix_rsv_audit_order", "hotel_id", "order_id", "occurred_at", "id",
              postgresql_where=text("order_id IS NOT NULL")),
        Index("ix_rsv_audit_task", "hotel_id", "task_id", "occurred_at", "id",
              postgresql_where=text("task_id IS NOT NULL")),
        Index("ix_rsv_audit_action", "hotel_id", "action", "occurred_at", "id"),
        Index("ix_rsv_audit_hotel", "hotel_id", "occurred_at", "id"),
        _ck(_in("actor_type", ACTOR_TYPES), "ck_rsv_audit_actor_type"),
        _ck("actor_type = 'SYSTEM' OR actor_id IS NOT NULL", "ck_rsv_audit_actor_named"),
        _ck("(before_snapshot_json IS NULL OR jsonb_typeof(before_snapshot_json) = 'object') AND "
            "(after_snapshot_json IS NULL OR jsonb_typeof(after_snapshot_json) = 'object')",
            "ck_rsv_audit_snapshots_objects"),
        _ck(r"action ~ '^reservation\.[a-z_]+(\.[a-z_]+)+$'", "ck_rsv_audit_action"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[int | None] = mapped_column(BigInteger)
    task_id: Mapped[int | None] = mapped_column(BigInteger)
    operation_id: Mapped[int | None] = mapped_column(BigInteger)
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    actor_type: Mapped[str] = mapped_column(String(32))
    actor_id: Mapped[str | None] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str | None] = mapped_column(String(512))
    before_snapshot_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    after_snapshot_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    request_id: Mapped[str | None] = mapped_column(String(128))
    occurred_at: Mapped[datetime]
    created_at: Mapped[datetime]


class OperaOperation(Base):
    """A logical OPERA operation of a task (spec §11): PENDING -> SUCCEEDED | FAILED (lifecycles.OPERATION);
    FAILED waits for a retry, SUCCEEDED is final. `attempt_count` is also the retry's If-Match token."""

    __tablename__ = "workflow_reservation_opera_operation"
    __table_args__ = (
        _pk("workflow_reservation_opera_operation"),
        _fk(["task_id", "hotel_id"], "workflow_reservation_task", "fk_rsv_op_task"),
        _fk(["order_id", "hotel_id"], "workflow_reservation_order", "fk_rsv_op_order"),
        Index("uq_rsv_op_sequence", "hotel_id", "task_id", "operation_sequence", unique=True),
        Index("uq_rsv_op_external_reference", "hotel_id", "external_reference", unique=True),
        Index("ix_rsv_op_task_status", "hotel_id", "task_id", "operation_status"),
        Index("ix_rsv_op_order_sequence", "hotel_id", "order_id", "operation_sequence"),
        _ck(_in("operation_status", OPERATION_STATUSES), "ck_rsv_op_status"),
        _ck("operation_code IN ('SIMULATE_PRECHECK', 'SIMULATE_WRITE')", "ck_rsv_op_code"),
        _ck("operation_sequence >= 1", "ck_rsv_op_sequence"),
        _ck("(attempt_count = 0) = (last_attempt_id IS NULL) AND (attempt_count = 0) = (operation_status = 'PENDING')",
            "ck_rsv_op_attempts"),
        _ck("operation_status <> 'FAILED' OR last_error_message IS NOT NULL", "ck_rsv_op_failed_has_error"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[int] = mapped_column(BigInteger)
    task_id: Mapped[int] = mapped_column(BigInteger)
    operation_sequence: Mapped[int] = mapped_column(Integer)
    operation_code: Mapped[str] = mapped_column(String(64))
    operation_name: Mapped[str] = mapped_column(String(128))
    operation_status: Mapped[str] = mapped_column(String(32), server_default=text("'PENDING'"))
    adapter_name: Mapped[str] = mapped_column(String(64))
    external_reference: Mapped[str] = mapped_column(String(128))
    request_payload_json: Mapped[Any] = mapped_column(JSONB)
    attempt_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    last_attempt_id: Mapped[int | None] = mapped_column(BigInteger)
    last_error_message: Mapped[str | None] = mapped_column(String(512))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class OperaOperationAttempt(Base):
    """One execution or retry of an operation (spec §12): a new row each time, never updated."""

    __tablename__ = "workflow_reservation_opera_operation_attempt"
    __table_args__ = (
        _pk("workflow_reservation_opera_operation_attempt"),
        _fk(["operation_id", "hotel_id"], "workflow_reservation_opera_operation", "fk_rsv_attempt_operation"),
        _fk(["task_id", "hotel_id"], "workflow_reservation_task", "fk_rsv_attempt_task"),
        _fk(["order_id", "hotel_id"], "workflow_reservation_order", "fk_rsv_attempt_order"),
        Index("uq_rsv_attempt_number", "hotel_id", "operation_id", "attempt_number", unique=True),
        Index("ix_rsv_attempt_task_created", "hotel_id", "task_id", "created_at"),
        _ck("attempt_status IN ('SUCCEEDED', 'FAILED')", "ck_rsv_attempt_status"),
        _ck("attempt_number >= 1", "ck_rsv_attempt_number"),
        _ck("(attempt_status = 'FAILED') = (error_code IS NOT NULL AND error_message IS NOT NULL)",
            "ck_rsv_attempt_failed_has_error"),
        _ck("finished_at >= started_at", "ck_rsv_attempt_times"),
        _ck("NOT via_lookup OR attempt_status = 'SUCCEEDED'", "ck_rsv_attempt_lookup_succeeded"),
        _ck("NOT outcome_unknown OR attempt_status = 'FAILED'", "ck_rsv_attempt_unknown_failed"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[int] = mapped_column(BigInteger)
    task_id: Mapped[int] = mapped_column(BigInteger)
    operation_id: Mapped[int] = mapped_column(BigInteger)
    attempt_number: Mapped[int] = mapped_column(Integer)
    attempt_status: Mapped[str] = mapped_column(String(32))
    request_payload_json: Mapped[Any] = mapped_column(JSONB)
    response_payload_json: Mapped[Any | None] = mapped_column(JSONB(none_as_null=True))
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(String(512))
    via_lookup: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    outcome_unknown: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    created_at: Mapped[datetime]


class OperaSimulatorWrite(Base):
    """The simulated OPERA's own store (not in the spec): what its writes "booked", so that a lookup by
    external reference is a real query. Written and read only by the simulator adapter."""

    __tablename__ = "opera_simulator_write"
    __table_args__ = (
        _pk("opera_simulator_write"),
        _hotel_fk("opera_simulator_write"),
        Index("uq_opera_simulator_write_reference", "hotel_id", "external_reference", unique=True),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    hotel_id: Mapped[str] = mapped_column(String(64))
    external_reference: Mapped[str] = mapped_column(String(128))
    task_card_type: Mapped[str] = mapped_column(String(64))
    business_key_type: Mapped[str | None] = mapped_column(String(32))
    business_key: Mapped[str | None] = mapped_column(String(128))
    request_payload: Mapped[Any] = mapped_column(JSONB)
    created_at: Mapped[datetime]


TABLES = [f"{SCHEMA}.{t.__tablename__}" for t in (
    Hotel, HotelStaff, AiBatch, AiTransition, Order, Task, TaskCard, AuditLog, OperaOperation,
    OperaOperationAttempt, OperaSimulatorWrite)]
