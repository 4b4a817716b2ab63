"""Legal rows written with raw SQL, past every service: the starting points of bypass tests and of the
detectors' planted violations. Hashes and keys are computed the documented way, so what these write passes
every CHECK and trigger; each test then breaks one rule on purpose."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

S = "reservation"
US = "\x1f"
NOW = "2026-01-05T09:00:00+00"


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


async def hotel(s: AsyncSession, hotel_id: str = "H1") -> str:
    await s.execute(text(f"INSERT INTO {S}.hotel (hotel_id, created_at, updated_at) VALUES (:h, :n, :n) "
                         "ON CONFLICT DO NOTHING"), {"h": hotel_id, "n": NOW})
    return hotel_id


async def batch(s: AsyncSession, hotel_id: str, items: list[str], *, request_id: str | None = None,
                source_message_id: int = 1, client_id: uuid.UUID | None = None,
                mapping: dict[str, Any] | None = None) -> tuple[int, list[int]]:
    """A batch of `items` (raw JSON texts) in `ai_task_results`, with one transition each."""
    client_id = client_id or uuid.uuid4()
    prefix = '{"ai_task_results":['
    body = prefix + ",".join(items) + "]}"
    raw = body.encode()
    body_sha = sha(raw)
    basis = "REQUEST_ID" if request_id else "BODY"
    key = sha(US.join(["rsv-batch-v1", "request", hotel_id, str(client_id), request_id]) if request_id
              else US.join(["rsv-batch-v1", "body", hotel_id, body_sha]))
    batch_id = (await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_ai_batch (hotel_id, source_message_id, request_payload_sha256, "
        "batch_idempotency_key, idempotency_basis, client_id, request_id, received_at, item_count, request_body, "
        "ai_contract_version, response_items_json, created_at, updated_at) VALUES (:h, :m, :sha, :key, :basis, :c, "
        ":r, :n, :count, :body, '20260711-p0', '[]', :n, :n) RETURNING id"),
        {"h": hotel_id, "m": source_message_id, "sha": body_sha, "key": key, "basis": basis, "c": client_id,
         "r": request_id, "n": NOW, "count": len(items), "body": raw})).scalar_one()
    transition_ids = []
    offset = len(prefix.encode())
    values = {"system_process_category": "BUSINESS_TASK", "system_task_type": "UPDATE_BOOKING",
              "task_card_type": "UPDATE_BOOKING", "route_code": "UPDATE_BOOKING", **(mapping or {})}
    for index, item in enumerate(items, start=1):
        encoded = item.encode()
        transition_ids.append((await s.execute(text(
            f"INSERT INTO {S}.workflow_reservation_ai_transition (hotel_id, batch_id, source_message_id, source_list, "
            "array_index, execution_order, route_code, system_process_category, system_task_type, task_card_type, "
            "item_payload_sha256, item_idempotency_key, ai_payload_json, raw_byte_offset, raw_byte_length, "
            "adapter_error_code, adapter_error_message, created_at, updated_at) "
            "VALUES (:h, :b, :m, 'ai_task_results', :i, :i, :route, :cat, :stt, :card, :sha, :key, :item, :off, :len, "
            ":err, :msg, :n, :n) RETURNING id"),
            {"h": hotel_id, "b": batch_id, "m": source_message_id, "i": index, "route": values["route_code"],
             "cat": values["system_process_category"], "stt": values["system_task_type"],
             "card": values["task_card_type"], "sha": sha(encoded),
             "key": sha(US.join(["rsv-item-v1", key, "ai_task_results", str(index)])), "item": item, "off": offset,
             "len": len(encoded), "err": values.get("adapter_error_code"), "msg": values.get("adapter_error_message"),
             "n": NOW})).scalar_one())
        offset += len(encoded) + 1
    return batch_id, transition_ids


async def order(s: AsyncSession, hotel_id: str, *, status: str = "ACTIVE", key: str | None = "CNF1",
                key_type: str = "CONFIRMATION_NUMBER") -> int:
    if status == "TEMPORARY":
        order_id = (await s.execute(text(f"SELECT nextval(pg_get_serial_sequence('{S}.workflow_reservation_order', "
                                         "'id'))"))).scalar_one()
        await s.execute(text(
            f"INSERT INTO {S}.workflow_reservation_order (id, hotel_id, order_key_type, temporary_order_code, "
            "order_status, created_at, updated_at) VALUES (:id, :h, 'TEMPORARY', :code, 'TEMPORARY', :n, :n)"),
            {"id": order_id, "h": hotel_id, "code": f"TMP-{order_id}", "n": NOW})
        return order_id
    return (await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_order (hotel_id, order_key_type, order_business_key, order_status, "
        "business_key_source, created_at, updated_at) VALUES (:h, :t, :k, :st, 'USER_CONFIRMED', :n, :n) RETURNING id"),
        {"h": hotel_id, "t": key_type, "k": key, "st": status, "n": NOW})).scalar_one()


async def task(s: AsyncSession, hotel_id: str, order_id: int, transition_id: int, *,
               system_task_type: str = "UPDATE_BOOKING", card: str = "UPDATE_BOOKING", parent: int | None = None,
               wait_for_parent: bool = False) -> int:
    """A PENDING_CONFIRM queue task (COMPLETED when informational) at the end of its order, with its card."""
    queue = system_task_type != "INFORMATIONAL_MESSAGE"
    position = (await s.execute(text(
        f"UPDATE {S}.workflow_reservation_order SET last_execution_order = last_execution_order + 1 "
        "WHERE hotel_id = :h AND id = :o RETURNING last_execution_order"), {"h": hotel_id, "o": order_id})).scalar_one()
    task_id = (await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_task (hotel_id, order_id, source_message_id, ai_transition_id, "
        "system_task_type, task_card_type, task_status, queue_participation, execution_order, parent_task_id, "
        "blocked_until_parent_completed, completed_at, created_at, updated_at) VALUES (:h, :o, 1, :t, :stt, :card, "
        ":status, :q, :pos, :parent, :wait, :done, :n, :n) RETURNING id"),
        {"h": hotel_id, "o": order_id, "t": transition_id, "stt": system_task_type, "card": card,
         "status": "PENDING_CONFIRM" if queue else "COMPLETED", "q": queue, "pos": position, "parent": parent,
         "wait": wait_for_parent, "done": None if queue else NOW, "n": NOW})).scalar_one()
    await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_task_card (hotel_id, task_id, task_card_type, field_contract_version, "
        f"ai_payload_json, created_at, updated_at) SELECT CAST(:h AS varchar), :k, :card, '20260711-p0', "
        "ai_payload_json, CAST(:n AS timestamptz), CAST(:n AS timestamptz) "
        f"FROM {S}.workflow_reservation_ai_transition WHERE hotel_id = :h AND id = :t"),
        {"h": hotel_id, "k": task_id, "card": card, "t": transition_id, "n": NOW})
    return task_id


async def confirm(s: AsyncSession, hotel_id: str, task_id: int, payload: dict | None = None) -> None:
    await s.execute(text(
        f"UPDATE {S}.workflow_reservation_task_card SET confirmed_payload_json = :p, confirmed_by = :u, "
        "confirmed_at = :n WHERE hotel_id = :h AND task_id = :k"),
        {"p": json.dumps(payload or {"confirmation_number": "CNF1", "room_type": "KING"}), "u": uuid.uuid4(),
         "n": NOW, "h": hotel_id, "k": task_id})
    await s.execute(text(
        f"UPDATE {S}.workflow_reservation_task SET task_status = 'READY', confirmed_at = :n, version = version + 1 "
        "WHERE hotel_id = :h AND id = :k"), {"n": NOW, "h": hotel_id, "k": task_id})


async def set_status(s: AsyncSession, hotel_id: str, task_id: int, status: str, **extra: object) -> None:
    sets = "".join(f", {column} = :{column}" for column in extra)
    await s.execute(text(
        f"UPDATE {S}.workflow_reservation_task SET task_status = :st, version = version + 1{sets} "
        "WHERE hotel_id = :h AND id = :k"), {"st": status, "h": hotel_id, "k": task_id, **extra})


async def operation(s: AsyncSession, hotel_id: str, order_id: int, task_id: int, sequence: int,
                    code: str = "SIMULATE_PRECHECK") -> int:
    return (await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_opera_operation (hotel_id, order_id, task_id, operation_sequence, "
        "operation_code, operation_name, adapter_name, external_reference, request_payload_json, created_at, "
        "updated_at) VALUES (:h, :o, :k, :seq, :code, :code, 'opera-simulator', :ref, '{}', :n, :n) RETURNING id"),
        {"h": hotel_id, "o": order_id, "k": task_id, "seq": sequence, "code": code,
         "ref": f"ref-{uuid.uuid4().hex}", "n": NOW})).scalar_one()


async def attempt(s: AsyncSession, hotel_id: str, order_id: int, task_id: int, operation_id: int, number: int,
                  status: str = "SUCCEEDED") -> int:
    failed = status == "FAILED"
    attempt_id = (await s.execute(text(
        f"INSERT INTO {S}.workflow_reservation_opera_operation_attempt (hotel_id, order_id, task_id, operation_id, "
        "attempt_number, attempt_status, request_payload_json, error_code, error_message, started_at, finished_at, "
        "created_at) VALUES (:h, :o, :k, :op, :num, :st, '{}', :code, :msg, :n, :n, :n) RETURNING id"),
        {"h": hotel_id, "o": order_id, "k": task_id, "op": operation_id, "num": number, "st": status,
         "code": "X" if failed else None, "msg": "failed" if failed else None, "n": NOW})).scalar_one()
    await s.execute(text(
        f"UPDATE {S}.workflow_reservation_opera_operation SET operation_status = :st, attempt_count = :num, "
        "last_attempt_id = :a, last_error_message = CASE WHEN CAST(:st AS varchar) = 'FAILED' THEN 'failed' END "
        "WHERE hotel_id = :h AND id = :op"), {"st": status, "num": number, "a": attempt_id, "h": hotel_id,
                                             "op": operation_id})
    return attempt_id


async def graph(s: AsyncSession, hotel_id: str = "H1", *, tasks: int = 1, key: str = "CNF1",
                order_status: str = "ACTIVE") -> tuple[int, list[int]]:
    """A hotel, an order and `tasks` PENDING_CONFIRM update tasks from one batch: (order id, task ids)."""
    await hotel(s, hotel_id)
    batch_tag = uuid.uuid4().hex[:8]
    _, transitions = await batch(s, hotel_id, [f'{{"n":{i},"g":"{batch_tag}"}}' for i in range(tasks)])
    order_id = await order(s, hotel_id, status=order_status, key=None if order_status == "TEMPORARY" else key)
    return order_id, [await task(s, hotel_id, order_id, t) for t in transitions]
