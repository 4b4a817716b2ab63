"""Stable error codes of the reservation workflow. Values never change (ARCHITECTURE.md "Conventions").

A problem document's extra members are machine-readable facts (ids, states, counts), never payload values:
a card validation error names the field and a fixed code, not what was typed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from tenet.kernel.errors import DomainError


class ReservationErrorCode(StrEnum):
    RESERVATION_HOTEL_FORBIDDEN = "RESERVATION_HOTEL_FORBIDDEN"
    HOTEL_NOT_FOUND = "HOTEL_NOT_FOUND"
    HOTEL_ALREADY_EXISTS = "HOTEL_ALREADY_EXISTS"
    HOTEL_STAFF_NOT_FOUND = "HOTEL_STAFF_NOT_FOUND"
    AI_BATCH_INVALID = "AI_BATCH_INVALID"
    AI_BATCH_REQUEST_ID_REUSED = "AI_BATCH_REQUEST_ID_REUSED"
    AI_BATCH_NOT_FOUND = "AI_BATCH_NOT_FOUND"
    ORDER_NOT_FOUND = "ORDER_NOT_FOUND"
    ORDER_NOT_OPEN = "ORDER_NOT_OPEN"
    ORDER_HAS_UNFINISHED_TASKS = "ORDER_HAS_UNFINISHED_TASKS"
    ORDER_NOT_ACCEPTING_TASKS = "ORDER_NOT_ACCEPTING_TASKS"
    ORDER_KEY_ALREADY_ACTIVE = "ORDER_KEY_ALREADY_ACTIVE"
    ORDER_BUSY = "ORDER_BUSY"
    TASK_NOT_FOUND = "TASK_NOT_FOUND"
    TASK_NOT_EDITABLE = "TASK_NOT_EDITABLE"
    TASK_BLOCKED = "TASK_BLOCKED"
    TASK_NOT_READY = "TASK_NOT_READY"
    TASK_NOT_MOVABLE = "TASK_NOT_MOVABLE"
    TASK_MOVE_CROSS_HOTEL = "TASK_MOVE_CROSS_HOTEL"
    TASK_NOT_CONVERTIBLE = "TASK_NOT_CONVERTIBLE"
    TASK_ALREADY_FINISHED = "TASK_ALREADY_FINISHED"
    TASK_CARD_PAYLOAD_INVALID = "TASK_CARD_PAYLOAD_INVALID"
    TASK_CARD_TYPE_UNKNOWN = "TASK_CARD_TYPE_UNKNOWN"
    TASK_CARD_CONTRACT_VERSION_UNKNOWN = "TASK_CARD_CONTRACT_VERSION_UNKNOWN"
    OPERATION_NOT_FOUND = "OPERATION_NOT_FOUND"
    OPERATION_NOT_FAILED = "OPERATION_NOT_FAILED"


E = ReservationErrorCode


class HotelForbidden(DomainError):
    """An ingest for a hotel outside the API client's `hotel_ids` (the client names the hotel itself, so
    refusing says nothing about stored rows)."""

    status, code, title = 403, E.RESERVATION_HOTEL_FORBIDDEN, "This API client may not act for this hotel"


class HotelNotFound(DomainError):
    status, code, title = 404, E.HOTEL_NOT_FOUND, "No such hotel"


class HotelAlreadyExists(DomainError):
    status, code, title = 409, E.HOTEL_ALREADY_EXISTS, "This hotel is already registered"


class HotelStaffNotFound(DomainError):
    status, code, title = 404, E.HOTEL_STAFF_NOT_FOUND, "This person is not assigned to this hotel"


class AiBatchInvalid(DomainError):
    """The ingest envelope does not match the contract; `errors` names each member (never its value)."""

    status, code, title = 422, E.AI_BATCH_INVALID, "The AI batch does not match the ingest contract"


class AiBatchRequestIdReused(DomainError):
    """RSV-INV-02: one request id of one client names one body."""

    status, code, title = (409, E.AI_BATCH_REQUEST_ID_REUSED,
                           "This request id was already used for a different body")


class AiBatchNotFound(DomainError):
    status, code, title = 404, E.AI_BATCH_NOT_FOUND, "No such AI batch"


class OrderNotFound(DomainError):
    status, code, title = 404, E.ORDER_NOT_FOUND, "No such order"


class OrderNotOpen(DomainError):
    """RSV-INV-08: ENDED and LOGIC_DELETED are final."""

    status, code, title = 409, E.ORDER_NOT_OPEN, "The order is ended or logically deleted"


class OrderHasUnfinishedTasks(DomainError):
    """RSV-INV-09: an order is closed only when none of its tasks is open."""

    status, code, title = 409, E.ORDER_HAS_UNFINISHED_TASKS, "The order still has unfinished tasks"


class OrderNotAcceptingTasks(DomainError):
    """RSV-INV-09: ENDED and LOGIC_DELETED orders never take a task."""

    status, code, title = 409, E.ORDER_NOT_ACCEPTING_TASKS, "The order does not accept tasks"


class OrderKeyAlreadyActive(DomainError):
    """RSV-INV-07: at most one ACTIVE order per (hotel, key type, key)."""

    status, code, title = 409, E.ORDER_KEY_ALREADY_ACTIVE, "An ACTIVE order with this business key exists"


class OrderBusy(DomainError):
    """A back-fill needed an order another request holds; nothing was recorded. Retry."""

    status, code, title = 409, E.ORDER_BUSY, "Another request is working on an order this one needs; retry"

    def __init__(self, detail: str | None = None, **data: Any) -> None:
        super().__init__(detail, headers={"Retry-After": "1"}, **data)


class TaskNotFound(DomainError):
    status, code, title = 404, E.TASK_NOT_FOUND, "No such task"


class TaskNotEditable(DomainError):
    status, code, title = 409, E.TASK_NOT_EDITABLE, "The task is not waiting for confirmation"


class TaskBlocked(DomainError):
    """RSV-INV-10/11: an earlier queue task, or the parent, is not finished; the task can only be viewed."""

    status, code, title = 409, E.TASK_BLOCKED, "An earlier task of this order is not finished yet"


class TaskNotReady(DomainError):
    status, code, title = 409, E.TASK_NOT_READY, "Only a READY task can be executed"


class TaskNotMovable(DomainError):
    """RSV-INV-18: only PENDING_CONFIRM tasks change order."""

    status, code, title = 409, E.TASK_NOT_MOVABLE, "Only a task waiting for confirmation can be moved"


class TaskMoveCrossHotel(DomainError):
    status, code, title = 409, E.TASK_MOVE_CROSS_HOTEL, "A task cannot move to another hotel's order"


class TaskNotConvertible(DomainError):
    status, code, title = 409, E.TASK_NOT_CONVERTIBLE, "Only a manual review can be converted to a task card type"


class TaskAlreadyFinished(DomainError):
    status, code, title = 409, E.TASK_ALREADY_FINISHED, "The task is already COMPLETED or FAILED"


class TaskCardPayloadInvalid(DomainError):
    """RSV-INV-16: `errors` lists every bad field with a fixed code; values are never echoed."""

    status, code, title = 422, E.TASK_CARD_PAYLOAD_INVALID, "The task card payload does not match its definition"


class TaskCardTypeUnknown(DomainError):
    status, code, title = 404, E.TASK_CARD_TYPE_UNKNOWN, "No such task card type"


class TaskCardContractVersionUnknown(DomainError):
    status, code, title = 404, E.TASK_CARD_CONTRACT_VERSION_UNKNOWN, "No such field contract version for this card"


class OperationNotFound(DomainError):
    status, code, title = 404, E.OPERATION_NOT_FOUND, "No such OPERA operation"


class OperationNotFailed(DomainError):
    """Only a FAILED operation of an EXECUTING task can be retried (RSV-INV-14: no skipping)."""

    status, code, title = 409, E.OPERATION_NOT_FAILED, "Only a failed operation can be retried"
