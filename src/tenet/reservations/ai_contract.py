"""The AI contract adapter, version `20260711-p0`: what one AI item becomes (spec 003 §6, API.md).

`map_item` reads an item's known members (everything else is kept in its raw text and ignored), keeps the
AI's raw triple (result_type, ai_task_type, task_subtype) as sent, and derives the system's processing
category, task type, card type, queue participation and route code from the mapping table below (first
matching row wins). It never raises for item content: an item it cannot map is an adapter contract error
(RSV-INV-06) whose message is built only from a template, JSON pointers made of contract member names and
expected types — never from a value or an unknown member name, which could carry guest data.

1. item invalid -> ADAPTER_CONTRACT_ERROR, MANUAL_REVIEW / FALLBACK_REVIEW, in the queue;
2. list `message_events` -> INFORMATIONAL_MESSAGE / MESSAGE_NOTIFICATION, outside the queue;
3. list `unhandled_current_intents`, or result_type `unhandled_current_intent` -> UNHANDLED_CURRENT_INTENT,
   MANUAL_REVIEW / FALLBACK_REVIEW;
4. result_type `source_message_review_notification` (its `route_code` required: S10, S99, ...) ->
   SOURCE_MESSAGE_NOTIFICATION, a notification;
5. `current_or_history` = history -> a notification (route HISTORY_EVENT);
6. `normal_task` with ai_task_type MESSAGE_NOTIFICATION -> a notification;
7-11. `normal_task` or `manual_review` with a known ai_task_type -> that type and card (the five update
   cards by ai_task_type, or by task_subtype under UPDATE_BOOKING), in the queue;
12. `manual_review` with no or an unknown type -> MANUAL_REVIEW / FALLBACK_REVIEW;
13. anything else -> an adapter error (UNKNOWN_RESULT_TYPE, UNKNOWN_TASK_TYPE, RESERVED_RESULT_TYPE, ...).

Type-known manual reviews keep their type and card with `manual_review = true` (released by confirming the
same card); history items never become actionable tasks (they describe what already happened).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tenet.kernel.text import storable
from tenet.reservations.keys import UnusableKey, normalize_key
from tenet.reservations.models import UPDATE_CARDS
from tenet.reservations.rawjson import Element, JsonObject

AI_CONTRACT_VERSION = "20260711-p0"
LISTS = ("ai_task_results", "message_events", "unhandled_current_intents")
RESULT_TYPES = ("normal_task", "manual_review", "source_message_review_notification", "unhandled_current_intent")
INT32 = 2**31 - 1

ERROR_TEMPLATES = {
    "ITEM_NOT_OBJECT": "ITEM_NOT_OBJECT: the item must be a JSON object",
    "DUPLICATE_MEMBER": "DUPLICATE_MEMBER: {pointer} appears more than once",
    "MISSING_FIELD": "MISSING_FIELD: {pointer} is required",
    "WRONG_TYPE": "WRONG_TYPE: {pointer} must be {expected}",
    "VALUE_TOO_LONG": "VALUE_TOO_LONG: {pointer} exceeds {limit} characters",
    "VALUE_OUT_OF_RANGE": "VALUE_OUT_OF_RANGE: {pointer} is out of range",
    "UNKNOWN_RESULT_TYPE": "UNKNOWN_RESULT_TYPE: /result_type is not a known result type",
    "RESERVED_RESULT_TYPE": "RESERVED_RESULT_TYPE: /result_type is reserved for the system",
    "UNKNOWN_TASK_TYPE": "UNKNOWN_TASK_TYPE: /ai_task_type is not a known task type",
    "INVALID_CURRENT_OR_HISTORY": "INVALID_CURRENT_OR_HISTORY: /current_or_history must be current or history",
    "INVALID_BUSINESS_KEY": "INVALID_BUSINESS_KEY: {pointer} is not a usable key",
    "PARENT_NOT_FOUND": "PARENT_NOT_FOUND: no task for /parent_source_event_index",
    "PARENT_CYCLE": "PARENT_CYCLE: /parent_source_event_index forms a cycle",
}

# Known string members and their column limits; integer members; object members (raw slices kept).
_STRINGS = {"result_type": 64, "ai_task_type": 64, "task_subtype": 128, "catalog_code": 32, "skill_id": 128,
            "route_code": 64, "linked_task_group_id": 128, "current_or_history": 32}
_INTEGERS = ("source_event_index", "parent_source_event_index")
_SLICES = {"case_keys": "case_keys_json", "extracted_fields": "extracted_fields_json",
           "manual_review": "manual_review_json", "informational_message": "informational_message_json",
           "attachments": "attachments_json", "context_used": "context_used_json"}
_OBJECTS = ("case_keys", "extracted_fields", "manual_review", "informational_message")
_KNOWN = (*_STRINGS, *_INTEGERS, *_SLICES, "blocked_until_parent_completed")


class ContractError(Exception):
    def __init__(self, code: str, **facts: object) -> None:
        super().__init__(code)
        self.code = code
        self.message = ERROR_TEMPLATES[code].format(**facts)


@dataclass(frozen=True)
class MappedItem:
    source_list: str
    array_index: int
    start: int
    end: int
    text: str
    category: str
    system_task_type: str
    task_card_type: str
    queue: bool
    route_code: str
    manual_review: bool = False
    result_type: str | None = None
    ai_task_type: str | None = None
    task_subtype: str | None = None
    catalog_code: str | None = None
    skill_id: str | None = None
    current_or_history: str | None = None
    source_event_index: int | None = None
    parent_source_event_index: int | None = None
    linked_task_group_id: str | None = None
    blocked_until_parent_completed: bool = False
    group_code: str | None = None
    confirmation_number: str | None = None
    manual_reason_code: str | None = None
    adapter_error_code: str | None = None
    adapter_error_message: str | None = None
    slices: tuple[tuple[str, str], ...] = ()

    @property
    def is_error(self) -> bool:
        return self.adapter_error_code is not None

    def failed(self, error: ContractError) -> MappedItem:
        """The same item as an adapter contract error (a fallback review task on a temporary order)."""
        return replace(self, category="ADAPTER_CONTRACT_ERROR", system_task_type="MANUAL_REVIEW",
                       task_card_type="FALLBACK_REVIEW", queue=True, route_code="ADAPTER_CONTRACT_ERROR",
                       manual_review=True, blocked_until_parent_completed=False, group_code=None,
                       confirmation_number=None, adapter_error_code=error.code, adapter_error_message=error.message)


def _string(members: JsonObject, name: str, limit: int) -> str | None:
    value = members.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not storable(value):
        raise ContractError("WRONG_TYPE", pointer=f"/{name}", expected="a string")
    if len(value) > limit:
        raise ContractError("VALUE_TOO_LONG", pointer=f"/{name}", limit=limit)
    return value


def _integer(members: JsonObject, name: str) -> int | None:
    value = members.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContractError("WRONG_TYPE", pointer=f"/{name}", expected="an integer")
    if not 0 <= value <= INT32:
        raise ContractError("VALUE_OUT_OF_RANGE", pointer=f"/{name}")
    return value


def _keys(members: JsonObject) -> tuple[str | None, str | None]:
    case_keys = members.get("case_keys")
    if case_keys is None:
        return None, None
    if not isinstance(case_keys, dict):
        raise ContractError("WRONG_TYPE", pointer="/case_keys", expected="an object")
    duplicated = sorted(set(getattr(case_keys, "duplicates", ())) & {"group_code", "confirmation_number"})
    if duplicated:
        raise ContractError("DUPLICATE_MEMBER", pointer=f"/case_keys/{duplicated[0]}")
    found: list[str | None] = []
    for name in ("group_code", "confirmation_number"):
        raw = case_keys.get(name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            found.append(None)  # absent and empty are the same thing to an extractor
            continue
        if not isinstance(raw, str):
            raise ContractError("WRONG_TYPE", pointer=f"/case_keys/{name}", expected="a string")
        if len(raw) > 128:
            raise ContractError("VALUE_TOO_LONG", pointer=f"/case_keys/{name}", limit=128)
        try:
            found.append(normalize_key(raw))
        except UnusableKey:
            raise ContractError("INVALID_BUSINESS_KEY", pointer=f"/case_keys/{name}") from None
    return found[0], found[1]


def _classify(source_list: str, result_type: str | None, ai_task_type: str | None, subtype: str | None,
              history: bool, route_code: str | None) -> dict[str, Any]:
    notification = {"system_task_type": "INFORMATIONAL_MESSAGE", "task_card_type": "MESSAGE_NOTIFICATION",
                    "queue": False}
    review = {"system_task_type": "MANUAL_REVIEW", "task_card_type": "FALLBACK_REVIEW", "queue": True,
              "manual_review": True}
    if source_list == "message_events":
        return {"category": "BUSINESS_TASK", "route_code": "MESSAGE_EVENT", **notification}
    if source_list == "unhandled_current_intents" or result_type == "unhandled_current_intent":
        return {"category": "UNHANDLED_CURRENT_INTENT", "route_code": "UNHANDLED_CURRENT_INTENT", **review}
    if result_type is None:
        raise ContractError("MISSING_FIELD", pointer="/result_type")
    if result_type == "adapter_contract_error":
        raise ContractError("RESERVED_RESULT_TYPE")
    if result_type not in RESULT_TYPES:
        raise ContractError("UNKNOWN_RESULT_TYPE")
    if result_type == "source_message_review_notification":
        if route_code is None:
            raise ContractError("MISSING_FIELD", pointer="/route_code")
        return {"category": "SOURCE_MESSAGE_NOTIFICATION", "route_code": route_code, **notification}
    if history:
        return {"category": "BUSINESS_TASK", "route_code": "HISTORY_EVENT", **notification}
    manual = result_type == "manual_review"
    if result_type == "normal_task" and ai_task_type is None:
        raise ContractError("MISSING_FIELD", pointer="/ai_task_type")
    if ai_task_type == "MESSAGE_NOTIFICATION" and not manual:
        return {"category": "BUSINESS_TASK", "route_code": "INFORMATIONAL_MESSAGE", **notification}
    queue = {"category": "BUSINESS_TASK", "queue": True, "manual_review": manual}
    if ai_task_type in ("NEW_BOOKING", "CANCEL_BOOKING"):
        return {**queue, "system_task_type": ai_task_type, "task_card_type": ai_task_type, "route_code": ai_task_type}
    if ai_task_type in UPDATE_CARDS:
        return {**queue, "system_task_type": "UPDATE_BOOKING", "task_card_type": ai_task_type,
                "route_code": f"UPDATE_BOOKING.{ai_task_type}"}
    if ai_task_type == "UPDATE_BOOKING":
        card = subtype if subtype in UPDATE_CARDS else "UPDATE_BOOKING"
        return {**queue, "system_task_type": "UPDATE_BOOKING", "task_card_type": card,
                "route_code": "UPDATE_BOOKING" if card == "UPDATE_BOOKING" else f"UPDATE_BOOKING.{card}"}
    if manual:
        return {"category": "BUSINESS_TASK", "route_code": "MANUAL_REVIEW", **review}
    raise ContractError("UNKNOWN_TASK_TYPE")


def _raw(members: JsonObject, name: str, limit: int) -> str | None:
    """The AI's value as sent when it fits its column, else NULL (the item's text keeps it anyway)."""
    value = members.get(name)
    return value if isinstance(value, str) and len(value) <= limit and storable(value) else None


def map_item(source_list: str, array_index: int, element: Element, text: str) -> MappedItem:
    base = MappedItem(source_list=source_list, array_index=array_index, start=element.start, end=element.end,
                      text=text[element.start:element.end], category="ADAPTER_CONTRACT_ERROR",
                      system_task_type="MANUAL_REVIEW", task_card_type="FALLBACK_REVIEW", queue=True,
                      route_code="ADAPTER_CONTRACT_ERROR", manual_review=True)
    walked = element.object
    if walked is None:
        return base.failed(ContractError("ITEM_NOT_OBJECT"))
    members: JsonObject = element.value
    base = replace(base, result_type=_raw(members, "result_type", 64), ai_task_type=_raw(members, "ai_task_type", 64),
                   task_subtype=_raw(members, "task_subtype", 128),
                   slices=tuple((column, text[walked.members[name].start:walked.members[name].end])
                                for name, column in _SLICES.items() if name in walked.members))
    try:
        duplicated = sorted(walked.duplicates & set(_KNOWN))
        if duplicated:
            raise ContractError("DUPLICATE_MEMBER", pointer=f"/{duplicated[0]}")
        strings = {name: _string(members, name, limit) for name, limit in _STRINGS.items()}
        integers = {name: _integer(members, name) for name in _INTEGERS}
        for name in _OBJECTS:
            if members.get(name) is not None and not isinstance(members[name], dict):
                raise ContractError("WRONG_TYPE", pointer=f"/{name}", expected="an object")
        if members.get("attachments") is not None and not isinstance(members["attachments"], list):
            raise ContractError("WRONG_TYPE", pointer="/attachments", expected="an array")
        blocked = members.get("blocked_until_parent_completed")
        if blocked is not None and not isinstance(blocked, bool):
            raise ContractError("WRONG_TYPE", pointer="/blocked_until_parent_completed", expected="a boolean")
        current = strings["current_or_history"]
        if current is not None and current not in ("current", "history"):
            raise ContractError("INVALID_CURRENT_OR_HISTORY")
        group_code, confirmation_number = _keys(members)
        reason = (members.get("manual_review") or {}).get("reason_code")
        reason_code = reason if isinstance(reason, str) and 0 < len(reason) <= 128 and storable(reason) else None
        mapped = _classify(source_list, strings["result_type"], strings["ai_task_type"], strings["task_subtype"],
                           current == "history", strings["route_code"])
    except ContractError as error:
        return base.failed(error)
    manual = mapped.pop("manual_review", False)
    return replace(
        base, adapter_error_code=None, adapter_error_message=None, manual_review=manual,
        manual_reason_code=reason_code if manual else None,
        catalog_code=strings["catalog_code"], skill_id=strings["skill_id"], current_or_history=current,
        source_event_index=integers["source_event_index"],
        parent_source_event_index=integers["parent_source_event_index"],
        linked_task_group_id=strings["linked_task_group_id"], blocked_until_parent_completed=bool(blocked),
        group_code=group_code, confirmation_number=confirmation_number, **mapped,
    )
