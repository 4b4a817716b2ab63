"""What a task looks like to its caller: `blocked` and the `can_*` flags, computed on every read (spec §8:
BLOCKED is never stored; "when an earlier queue task is unfinished, this task can only be viewed").

A queue task is blocked while an earlier queue task of its order is open (EARLIER_TASK; FAILED counts as
finished, spec §2), or while it waits for a parent that has not COMPLETED (PARENT; a FAILED parent does not
release it). The flags add the caller's permission points: an API client reading with `reservations:read`
may do nothing.
"""

from __future__ import annotations

from typing import Any

from tenet.reservations.cards import validation
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.lifecycles import OPEN_TASK_STATES
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.permissions import Viewer

Row = dict[str, Any]


def blocked(row: Row) -> tuple[str | None, int | None]:
    """(reason, blocking task id) from the task's row, its order's first open queue position and its
    parent's status; (None, None) when the task is free."""
    if not row["queue_participation"] or row["task_status"] not in OPEN_TASK_STATES:
        return None, None
    first_order = row.get("first_open_order")
    if first_order is not None and first_order < row["execution_order"]:
        return "EARLIER_TASK", row.get("first_open_id")
    if row["blocked_until_parent_completed"] and row.get("parent_status") != "COMPLETED":
        return "PARENT", row["parent_task_id"]
    return None, None


def task_summary(row: Row, viewer: Viewer) -> dict[str, Any]:
    reason, blocking = blocked(row)
    is_blocked = reason is not None
    status, queue = row["task_status"], row["queue_participation"]
    pending = status == "PENDING_CONFIRM"
    return {
        **{key: row[key] for key in (
            "hotel_id", "order_id", "system_task_type", "task_card_type", "task_subtype", "result_type",
            "ai_task_type", "task_status", "queue_participation", "execution_order", "parent_task_id",
            "parent_source_event_index", "linked_task_group_id", "blocked_until_parent_completed", "manual_review",
            "manual_reason_code", "last_failure_reason", "source_message_id", "ai_transition_id", "confirmed_at",
            "completed_at", "failed_at", "version", "created_at", "updated_at")},
        "id": row["task_id"],
        "blocked": is_blocked, "blocked_reason": reason, "blocking_task_id": blocking,
        "can_edit": viewer.can(P.TASK_EDIT) and pending and not is_blocked
        and row["task_card_type"] != "MESSAGE_NOTIFICATION",
        "can_confirm": viewer.can(P.TASK_CONFIRM) and pending and not is_blocked and queue,
        "can_execute": viewer.can(P.TASK_EXECUTE) and status == "READY" and not is_blocked,
        "can_move": viewer.can(P.TASK_MOVE) and pending,
        "can_convert": viewer.can(P.TASK_EDIT) and pending and not is_blocked
        and row["system_task_type"] == "MANUAL_REVIEW",
        "can_abandon": viewer.can(P.ORDER_MANAGE) and queue and status in OPEN_TASK_STATES,
    }


def task_read(row: Row, viewer: Viewer) -> dict[str, Any]:
    definition = PROVIDER.definition(row["task_card_type"], row["field_contract_version"])
    prefill, prefill_issues = validation.prefill(definition, row["card_ai_payload_json"])
    return {
        **task_summary(row, viewer),
        "system_process_category": row["system_process_category"], "route_code": row["route_code"],
        "adapter_error_code": row["adapter_error_code"], "adapter_error_message": row["adapter_error_message"],
        "item_payload_sha256": row["item_payload_sha256"],
        "order": {"id": row["order_id"], "order_status": row["order_status"], "order_key_type": row["order_key_type"],
                  "order_business_key": row["order_business_key"], "temporary_order_code": row["temporary_order_code"],
                  "display_name": row["order_display_name"], "version": row["order_version"]},
        "card": {"id": row["card_id"], "task_card_type": row["task_card_type"],
                 "field_contract_version": row["field_contract_version"],
                 "current_contract_version": PROVIDER.current_version(row["task_card_type"]),
                 "ai_payload_json": row["card_ai_payload_json"], "prefill": prefill,
                 "prefill_issues": prefill_issues, "draft_payload": row["draft_payload_json"],
                 "draft_updated_by": row["draft_updated_by"], "draft_updated_at": row["draft_updated_at"],
                 "confirmed_payload": row["confirmed_payload_json"], "confirmed_by": row["confirmed_by"],
                 "confirmed_at": row["card_confirmed_at"], "updated_at": row["card_updated_at"]},
        "operations_summary": {"total": row["ops_total"], "succeeded": row["ops_succeeded"],
                               "failed": row["ops_failed"], "pending": row["ops_pending"],
                               "failed_operation_id": row["failed_operation_id"]},
    }


def operation_read(row: Row, viewer: Viewer) -> dict[str, Any]:
    return {
        **{key: row[key] for key in (
            "id", "task_id", "order_id", "operation_sequence", "operation_code", "operation_name",
            "operation_status", "adapter_name", "external_reference", "attempt_count", "last_attempt_id",
            "last_error_message", "created_at", "updated_at")},
        "request_payload": row["request_payload_json"],
        "can_retry": viewer.can(P.TASK_EXECUTE) and row["operation_status"] == "FAILED"
        and row["task_status"] == "EXECUTING",
        "attempts": row["attempts"],
    }
