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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

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
from tenet.reservations.permissions import POINTS

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


@dataclass(frozen=True)
class _Demo:
    """The demo's callers and the commands it runs as them, each in a unit of work of its own."""

    db: Database
    now: datetime
    agent: Principal      # the agent (or, without one, a stand-in with every reservation permission)
    ingester: Principal   # the demo's SuperAgent client

    async def run(self, body: Callable[[AsyncSession], Awaitable[Any]]) -> Any:
        async with self.db.unit_of_work() as session:
            return await body(session)

    async def post(self, raw: bytes) -> list[dict[str, Any]]:
        prepared = ingest.prepare(raw, principal=self.ingester, max_items=500)
        answer = await self.run(lambda s: ingest.ingest(s, prepared, principal=self.ingester, now=self.now))
        return cast(list[dict[str, Any]], answer["items"])

    async def version(self, task_id: int) -> ExpectedVersion:
        async with self.db.read_only() as session:
            task = (await session.scalars(select(Task).where(Task.id == task_id))).one()
            return ExpectedVersion(task.version, True)

    async def confirm(self, task_id: int, **payload: Any) -> None:
        async with self.db.read_only() as session:
            task = (await session.scalars(select(Task).where(Task.id == task_id))).one()
            card = (await session.scalars(select(TaskCard).where(TaskCard.task_id == task_id))).one()
            prefill, _ = validation.prefill(PROVIDER.definition(task.task_card_type), card.ai_payload_json)
            want = ExpectedVersion(task.version, True)
        await self.run(lambda s: service.confirm_task(s, task_id=task_id, payload={**prefill, **payload}, want=want,
                                                      principal=self.agent, now=self.now))

    async def execute(self, task_id: int) -> None:
        await self.run(lambda s: execution.execute_task(s, task_id=task_id, want=None, principal=self.agent,
                                                        now=self.now))


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
    principal = Principal(kind="user", id=agent_id or client.id, permissions=frozenset(p.name for p in POINTS))
    if agent_id is not None:
        async with db.unit_of_work() as session:
            await service.grant_staff(session, hotel_id=HOTEL, user_id=agent_id, principal=principal, now=now)
    demo = _Demo(db=db, now=now, agent=principal, ingester=Principal(
        kind="client", id=client.id, scopes=frozenset(client.scopes), hotel_ids=frozenset({HOTEL})))
    await _queue_with_every_state(demo)
    await _new_booking_backfilled(demo)
    await _failing_write_and_abandoned(demo)
    replayed = await _drafts_notices_and_a_replay(demo)
    return [
        f"created hotel {HOTEL} ({HOTEL_NAME}); agent {AGENT_EMAIL} assigned" if agent_id else
        f"created hotel {HOTEL} ({HOTEL_NAME})",
        f"created API client 'SuperAgent demo' for {HOTEL}: client_id {client.client_id}, secret {secret} "
        "(shown once)",
        f"ingested 4 batches into {HOTEL}: tasks completed, ready, blocked, executing with a failed write, failed, "
        "drafted, notifications, a fallback review and an adapter error"
        + ("; a repeated batch was replayed" if replayed else ""),
    ]


_FIELDS = {"room_type": "KING", "adults": 2}


async def _queue_with_every_state(demo: _Demo) -> None:
    """1. An ACTIVE order with a completed update, a READY note and a cancellation blocked behind it."""
    first = await demo.post(_body(9001, [
        _item("UPDATE_BOOKING", 1, cn="100200", extracted_fields=_FIELDS),
        _item("TRACE_RESERVATION_NOTES", 2, cn="100200", extracted_fields={
            "trace_date": "2026-12-24", "department": "FRONT_DESK", "trace_text": "Late arrival, keep the room"}),
        _item("CANCEL_BOOKING", 3, cn="100200", extracted_fields={"cancellation_reason": "Plans changed"})]))
    await demo.confirm(first[0]["task_id"], confirmation_number="100200")
    await demo.execute(first[0]["task_id"])
    await demo.confirm(first[1]["task_id"], confirmation_number="100200")


async def _new_booking_backfilled(demo: _Demo) -> None:
    """2. A new booking executed: OPERA's number back-fills its temporary order."""
    booking = await demo.post(_body(9002, [_item("NEW_BOOKING", 1, extracted_fields={
        "guest_name": "Grace Hopper", "arrival_date": "2026-12-20", "departure_date": "2026-12-23",
        "room_type": "QUEEN", "adults": 1})]))
    await demo.confirm(booking[0]["task_id"])
    await demo.execute(booking[0]["task_id"])


async def _failing_write_and_abandoned(demo: _Demo) -> None:
    """3. A write OPERA keeps refusing (retried once), and behind it an abandoned task."""
    failing = await demo.post(_body(9003, [_item("UPDATE_BOOKING", 1, cn="300400", extracted_fields=_FIELDS),
                                           _item("VOUCHER_RECEIVED", 2, cn="300400",
                                                 extracted_fields={"voucher_number": "V-77"})]))
    await demo.confirm(failing[0]["task_id"], confirmation_number="300400",
                       opera_simulation_outcome="FAIL_WRITE_ALWAYS")
    await demo.execute(failing[0]["task_id"])
    async with demo.db.read_only() as session:
        write_id, attempts = (await session.execute(
            select(OperaOperation.id, OperaOperation.attempt_count)
            .where(OperaOperation.task_id == failing[0]["task_id"], OperaOperation.operation_status == "FAILED")
        )).one()
    await demo.run(lambda s: execution.retry_operation(
        s, operation_id=write_id, want=ExpectedVersion(attempts, True), principal=demo.agent, now=demo.now))
    want = await demo.version(failing[1]["task_id"])
    await demo.run(lambda s: service.abandon_task(s, task_id=failing[1]["task_id"], reason="Voucher sent twice",
                                                 want=want, principal=demo.agent, now=demo.now))


async def _drafts_notices_and_a_replay(demo: _Demo) -> bool:
    """4. A group order with a rooming list drafted; a notification, a fallback review, an adapter error.
    5. The same batch posted again: replayed, nothing new (answers whether it was)."""
    mixed = _body(9004, [
        _item("ROOMING_LIST", 1, gc="WEDDING26", extracted_fields={"rooming_list": [{"guest_name": "A. Lovelace"}]}),
        _item("MESSAGE_NOTIFICATION", 2, informational_message={"summary": "Guest asks about parking",
                                                                 "category": "question"}),
        {"result_type": "normal_task", "ai_task_type": "UPDATE_BOOKING", "case_keys": "not an object"}],
        unhandled_current_intents=[{"text": "Can you recommend a restaurant?"}])
    rooming = await demo.post(mixed)
    want = await demo.version(rooming[0]["task_id"])
    await demo.run(lambda s: service.save_draft(s, task_id=rooming[0]["task_id"], payload={
        "group_code": "WEDDING26", "rooming_list": [{"guest_name": "A. Lovelace", "room_type": "KING"},
                                                    {"guest_name": "C. Babbage"}]},
        want=want, principal=demo.agent, now=demo.now))
    try:
        await demo.post(mixed)
    except ingest.BatchExists:
        return True
    return False
