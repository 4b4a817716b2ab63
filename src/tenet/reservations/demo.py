"""`tenet demo` for the reservation workflow: a hotel, its ingest client, and batches whose tasks sit in each
state, all made through the services (never raw SQL). Safe to run again: a second run finds the hotel and
keeps it.

What an agent then sees (agent@demo.example.com, assigned to the hotel):
- order CONFIRMATION_NUMBER 100200: a completed update, a READY trace note and a cancellation waiting
  (blocked) behind it;
- a new booking executed on its temporary order, which OPERA's number (SIM...) has made ACTIVE;
- an update whose OPERA write keeps failing (EXECUTING, its write FAILED after two attempts) and, behind it,
  an abandoned task (FAILED);
- a group order with a rooming list saved as a draft;
- a notification (COMPLETED, outside the queue), a fallback review from an unhandled intent, an adapter
  contract error (an item whose case_keys is a string), and a batch that was posted twice (the replay).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.iam import service as iam_service
from tenet.iam.permissions import Scope
from tenet.iam.principal import Principal
from tenet.kernel.audit import Actor
from tenet.kernel.http import ExpectedVersion
from tenet.reservations import execution, ingest, service
from tenet.reservations.cards import validation
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.models import Hotel, OperaOperation, Task, TaskCard
from tenet.reservations.permissions import POINTS, Viewer

HOTEL, HOTEL_NAME = "DEMO-HOTEL", "Demo Harbour Hotel"
AGENT_EMAIL = "agent@demo.example.com"


def _item(kind: str, event: int, *, cn: str | None = None, gc: str | None = None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"result_type": "normal_task", "ai_task_type": kind, "current_or_history": "current",
                            "source_event_index": event, **extra}
    keys = {k: v for k, v in (("confirmation_number", cn), ("group_code", gc)) if v}
    if keys:
        item["case_keys"] = keys
    return item


def _body(message: int, items: list[Any], **lists: Any) -> bytes:
    return json.dumps({"hotel_id": HOTEL, "source_message_id": message, "request_id": f"demo-{message}",
                       "ai_task_results": items, **lists}, indent=1).encode()


async def load(db: Database, *, now: datetime) -> list[str]:
    async with db.unit_of_work() as session:
        if await session.get(Hotel, HOTEL) is not None:
            return [f"kept hotel {HOTEL}"]
        agent = await iam_service.find_user_by_email(session, AGENT_EMAIL)
        agent_id = agent.id if agent is not None else None
        session.add(Hotel(hotel_id=HOTEL, display_name=HOTEL_NAME, created_at=now, updated_at=now))
        await session.flush()
        client, secret = await iam_service.create_api_client(
            session, name="SuperAgent demo", scopes=[Scope.RESERVATIONS_INGEST, Scope.RESERVATIONS_READ],
            hotel_ids=[HOTEL], now=now, actor=Actor.system())
    viewer = Viewer(Principal(kind="user", id=agent_id or client.id, permissions=frozenset(p.name for p in POINTS)))
    if agent_id is not None:
        async with db.unit_of_work() as session:
            await service.grant_staff(session, hotel_id=HOTEL, user_id=agent_id, viewer=viewer, now=now)
    ingester = Principal(kind="client", id=client.id, scopes=frozenset(client.scopes), hotel_ids=frozenset({HOTEL}))

    async def run(body: Callable[[AsyncSession], Awaitable[Any]]) -> Any:
        async with db.unit_of_work() as session:
            return await body(session)

    async def post(raw: bytes) -> list[dict[str, Any]]:
        prepared = ingest.prepare(raw, principal=ingester, max_items=500)
        return (await run(lambda s: ingest.ingest(s, prepared, principal=ingester, now=now)))["items"]

    async def task_state(task_id: int) -> tuple[int, str, dict[str, Any]]:
        async with db.read_only() as session:
            task = (await session.scalars(select(Task).where(Task.id == task_id))).one()
            card = (await session.scalars(select(TaskCard).where(TaskCard.task_id == task_id))).one()
            prefill, _ = validation.prefill(PROVIDER.definition(task.task_card_type), card.ai_payload_json)
            return task.version, task.task_card_type, prefill

    async def confirm(task_id: int, **payload: Any) -> None:
        version, _, prefill = await task_state(task_id)
        await run(lambda s: service.confirm_task(s, task_id=task_id, payload={**prefill, **payload},
                                                 want=ExpectedVersion(version, True), viewer=viewer, now=now))

    async def execute(task_id: int) -> dict[str, Any]:
        return await run(lambda s: execution.execute_task(s, task_id=task_id, want=None, viewer=viewer, now=now))

    fields = {"room_type": "KING", "adults": 2}
    # 1. An ACTIVE order with a completed update, a READY note and a cancellation blocked behind it.
    first = await post(_body(9001, [
        _item("UPDATE_BOOKING", 1, cn="100200", extracted_fields=fields),
        _item("TRACE_RESERVATION_NOTES", 2, cn="100200", extracted_fields={
            "trace_date": "2026-12-24", "department": "FRONT_DESK", "trace_text": "Late arrival, keep the room"}),
        _item("CANCEL_BOOKING", 3, cn="100200", extracted_fields={"cancellation_reason": "Plans changed"})]))
    await confirm(first[0]["task_id"], confirmation_number="100200")
    await execute(first[0]["task_id"])
    await confirm(first[1]["task_id"], confirmation_number="100200")
    # 2. A new booking executed: OPERA's number back-fills its temporary order.
    booking = await post(_body(9002, [_item("NEW_BOOKING", 1, extracted_fields={
        "guest_name": "Grace Hopper", "arrival_date": "2026-12-20", "departure_date": "2026-12-23",
        "room_type": "QUEEN", "adults": 1})]))
    await confirm(booking[0]["task_id"])
    await execute(booking[0]["task_id"])
    # 3. A write OPERA keeps refusing (retried once), and behind it an abandoned task.
    failing = await post(_body(9003, [_item("UPDATE_BOOKING", 1, cn="300400", extracted_fields=fields),
                                      _item("VOUCHER_RECEIVED", 2, cn="300400",
                                            extracted_fields={"voucher_number": "V-77"})]))
    await confirm(failing[0]["task_id"], confirmation_number="300400", opera_simulation_outcome="FAIL_WRITE_ALWAYS")
    await execute(failing[0]["task_id"])
    async with db.read_only() as session:
        write_id, attempts = (await session.execute(
            select(OperaOperation.id, OperaOperation.attempt_count)
            .where(OperaOperation.task_id == failing[0]["task_id"], OperaOperation.operation_status == "FAILED")
        )).one()
    await run(lambda s: execution.retry_operation(s, operation_id=write_id, want=ExpectedVersion(attempts, True),
                                                  viewer=viewer, now=now))
    version, _, _ = await task_state(failing[1]["task_id"])
    await run(lambda s: service.abandon_task(s, task_id=failing[1]["task_id"], reason="Voucher sent twice",
                                            want=ExpectedVersion(version, True), viewer=viewer, now=now))
    # 4. A group order with a rooming list drafted; a notification, a fallback review, an adapter error.
    mixed = _body(9004, [
        _item("ROOMING_LIST", 1, gc="WEDDING26", extracted_fields={"rooming_list": [{"guest_name": "A. Lovelace"}]}),
        _item("MESSAGE_NOTIFICATION", 2, informational_message={"summary": "Guest asks about parking",
                                                                 "category": "question"}),
        {"result_type": "normal_task", "ai_task_type": "UPDATE_BOOKING", "case_keys": "not an object"}],
        unhandled_current_intents=[{"text": "Can you recommend a restaurant?"}])
    rooming = await post(mixed)
    version, _, _ = await task_state(rooming[0]["task_id"])
    await run(lambda s: service.save_draft(s, task_id=rooming[0]["task_id"], payload={
        "group_code": "WEDDING26", "rooming_list": [{"guest_name": "A. Lovelace", "room_type": "KING"},
                                                    {"guest_name": "C. Babbage"}]},
        want=ExpectedVersion(version, True), viewer=viewer, now=now))
    # 5. The same batch posted again: replayed, nothing new.
    replayed = False
    try:
        await post(mixed)
    except ingest.BatchExists:
        replayed = True
    return [
        f"created hotel {HOTEL} ({HOTEL_NAME}); agent {AGENT_EMAIL} assigned" if agent_id else
        f"created hotel {HOTEL} ({HOTEL_NAME})",
        f"created API client 'SuperAgent demo' for {HOTEL}: client_id {client.client_id}, secret {secret} "
        "(shown once)",
        f"ingested 4 batches into {HOTEL}: tasks completed, ready, blocked, executing with a failed write, failed, "
        "drafted, notifications, a fallback review and an adapter error"
        + ("; a repeated batch was replayed" if replayed else ""),
    ]
