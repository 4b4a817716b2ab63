"""Fixtures of the reservation tests: two hotels, an ingest client and an agent per hotel, an administrator,
builders that write AI items as raw JSON *text* (so tests control the spelling), and the routes as calls."""

from __future__ import annotations

import itertools
import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.iam import service as iam_service
from tenet.iam.permissions import Role, Scope
from tenet.kernel.audit import Actor
from tests.support.api import Api
from tests.support.users import TestUser, UserFactory

BASE = "/api/v1/reservations"
_messages = itertools.count(1000)


@dataclass(frozen=True)
class Caller:
    id: uuid.UUID
    kind: str
    scopes: tuple[str, ...] = ()


def item(kind: str = "update", *, cn: str | None = None, gc: str | None = None, event: int | None = None,
         parent: int | None = None, wait: bool = False, group: str | None = None, fields: dict | None = None,
         extra: str = "", history: bool = False, card: str | None = None) -> str:
    """One AI item as JSON text. kind: update | new | cancel | note | review | source_notice | <card type>."""
    members: dict[str, Any] = {}
    if kind == "new":
        members.update(result_type="normal_task", ai_task_type="NEW_BOOKING")
    elif kind == "cancel":
        members.update(result_type="normal_task", ai_task_type="CANCEL_BOOKING")
    elif kind == "note":
        members.update(result_type="normal_task", ai_task_type="MESSAGE_NOTIFICATION",
                       informational_message={"summary": "Guest asks about parking", "category": "question"})
    elif kind == "review":
        members.update(result_type="manual_review", manual_review={"reason_code": "AMBIGUOUS"})
    elif kind == "source_notice":
        members.update(result_type="source_message_review_notification", route_code="S10")
    elif kind == "update":
        members.update(result_type="normal_task", ai_task_type="UPDATE_BOOKING",
                       **({"task_subtype": card} if card else {}))
    else:
        members.update(result_type="normal_task", ai_task_type=kind)
    members["current_or_history"] = "history" if history else "current"
    if event is not None:
        members["source_event_index"] = event
    if parent is not None:
        members["parent_source_event_index"] = parent
    if wait:
        members["blocked_until_parent_completed"] = True
    if group is not None:
        members["linked_task_group_id"] = group
    keys = {k: v for k, v in (("confirmation_number", cn), ("group_code", gc)) if v is not None}
    if keys:
        members["case_keys"] = keys
    members["extracted_fields"] = fields if fields is not None else {"room_type": "KING"}
    body = json.dumps(members, separators=(",", ":"))
    return body[:-1] + extra + "}" if extra else body


def body(hotel_id: str, items: list[str], *, request_id: str | None = None, message: int | None = None,
         events: list[str] | None = None, intents: list[str] | None = None, extra: str = "") -> bytes:
    parts = [f'"hotel_id":{json.dumps(hotel_id)}', f'"source_message_id":{message or next(_messages)}']
    if request_id is not None:
        parts.append(f'"request_id":{json.dumps(request_id)}')
    parts.append(f'"ai_task_results":[{",".join(items)}]')
    if events is not None:
        parts.append(f'"message_events":[{",".join(events)}]')
    if intents is not None:
        parts.append(f'"unhandled_current_intents":[{",".join(intents)}]')
    return ("{" + ",".join(parts) + extra + "}").encode()


class ReservationApi(Api):
    """The reservation routes as calls (tests.support.api.Api), with the ingest's raw bodies and If-Match."""

    base = BASE

    async def ingest(self, who: Caller, raw: bytes, **headers: str) -> httpx.Response:
        return await self.call("POST", "/ai-batches", who, content=raw,
                               headers={"Content-Type": "application/json", **headers})

    async def ingest_ok(self, who: Caller, raw: bytes) -> dict[str, Any]:
        response = await self.ingest(who, raw)
        assert response.status_code == 201, response.text
        return response.json()

    async def task(self, who: TestUser | Caller, task_id: str) -> dict[str, Any]:
        response = await self.get(who, f"/tasks/{task_id}")
        assert response.status_code == 200, response.text
        return response.json()

    async def order(self, who: TestUser | Caller, order_id: str) -> dict[str, Any]:
        response = await self.get(who, f"/orders/{order_id}")
        assert response.status_code == 200, response.text
        return response.json()

    async def post(self, who: TestUser | Caller | None, path: str, payload: Any = None, *,
                   version: int | None = None, **headers: str) -> httpx.Response:
        if version is not None:
            headers["If-Match"] = f'"{version}"'
        return await self.call("POST", path, who, json=payload, headers=headers)

    async def put(self, who: TestUser | Caller | None, path: str, payload: Any = None, *,
                  version: int | None = None, **headers: str) -> httpx.Response:
        if version is not None:
            headers["If-Match"] = f'"{version}"'
        return await self.call("PUT", path, who, json=payload, headers=headers)

    async def confirm(self, who: TestUser, task_id: str, payload: dict | None = None) -> httpx.Response:
        task = await self.task(who, task_id)
        return await self.post(who, f"/tasks/{task_id}/confirm", {"payload": payload or confirmable(task)},
                               version=task["version"])

    async def confirm_ok(self, who: TestUser, task_id: str, payload: dict | None = None) -> dict[str, Any]:
        response = await self.confirm(who, task_id, payload)
        assert response.status_code == 200, response.text
        return response.json()

    async def execute(self, who: TestUser, task_id: str) -> httpx.Response:
        return await self.post(who, f"/tasks/{task_id}/execute")


def confirmable(task: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """A payload that confirms the task's card: the AI's prefill plus what each card type requires."""
    card = task["card"]["task_card_type"]
    needed: dict[str, dict[str, Any]] = {
        "NEW_BOOKING": {"guest_name": "Ada Guest", "arrival_date": "2026-02-01", "departure_date": "2026-02-03",
                        "room_type": "KING", "adults": 2},
        "UPDATE_BOOKING": {"room_type": "KING"},
        "CANCEL_BOOKING": {},
        "FALLBACK_REVIEW": {"resolution_note": "Handled by phone"},
        "VOUCHER_RECEIVED": {"voucher_number": "V-1"},
        "ROOMING_LIST": {"rooming_list": [{"guest_name": "Ada"}]},
        "AMEND_GROUP_CODE": {"new_group_code": "NEWGRP"},
        "TRACE_RESERVATION_NOTES": {"trace_date": "2026-02-01", "department": "FRONT_DESK", "trace_text": "Late"},
        "TA_RECORDER": {"travel_agent_name": "Agency"},
    }
    payload = {**task["card"]["prefill"], **needed.get(card, {}), **overrides}
    if card in ("UPDATE_BOOKING", "CANCEL_BOOKING", "VOUCHER_RECEIVED", "TRACE_RESERVATION_NOTES") and not (
            payload.get("confirmation_number") or payload.get("group_code")):
        payload["confirmation_number"] = "CNF-DEFAULT"
    if card in ("AMEND_GROUP_CODE", "TA_RECORDER") and not payload.get("confirmation_number"):
        payload["confirmation_number"] = "CNF-DEFAULT"
    if card == "ROOMING_LIST" and not payload.get("group_code"):
        payload["group_code"] = "GRP-DEFAULT"
    return payload


@dataclass
class World:
    admin: TestUser
    agent: TestUser        # ReservationAgent assigned to H1
    agent2: TestUser       # ReservationAgent assigned to H2
    stranger: TestUser     # ReservationAgent assigned to no hotel
    employee: TestUser     # no reservation role
    ingest1: Caller        # API client, reservations:ingest, hotel H1
    ingest2: Caller        # API client, reservations:ingest, hotel H2
    reader1: Caller        # API client, reservations:read, hotel H1


async def make_client(db: Database, clock, scopes: list[Scope], hotels: list[str]) -> Caller:
    async with db.unit_of_work() as session:
        client, _ = await iam_service.create_api_client(session, name="SuperAgent", scopes=scopes, hotel_ids=hotels,
                                                        now=clock.now(), actor=Actor.system())
    return Caller(client.id, "client", tuple(s.value for s in scopes))


async def assign(db: Database, user: TestUser, hotel_id: str, clock) -> None:
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) VALUES (:h, :n, :n) "
            "ON CONFLICT DO NOTHING"), {"h": hotel_id, "n": clock.now()})
        await session.execute(text(
            "INSERT INTO reservation.hotel_staff (hotel_id, user_id, granted_at) VALUES (:h, :u, :n)"),
            {"h": hotel_id, "u": user.id, "n": clock.now()})


async def make_world(db: Database, users: UserFactory, clock) -> World:
    agent = await users.make(roles=[Role.RESERVATION_AGENT], display_name="Rita Agent")
    agent2 = await users.make(roles=[Role.RESERVATION_AGENT], display_name="Otto Agent")
    world = World(
        admin=await users.admin(), agent=agent, agent2=agent2,
        stranger=await users.make(roles=[Role.RESERVATION_AGENT]), employee=await users.make(),
        ingest1=await make_client(db, clock, [Scope.RESERVATIONS_INGEST], ["H1"]),
        ingest2=await make_client(db, clock, [Scope.RESERVATIONS_INGEST], ["H2"]),
        reader1=await make_client(db, clock, [Scope.RESERVATIONS_READ], ["H1"]),
    )
    await assign(db, agent, "H1", clock)
    await assign(db, agent2, "H2", clock)
    return world


@pytest.fixture
def rsv(client, app, clock) -> ReservationApi:
    return ReservationApi(client, app, clock)


@pytest.fixture
async def world(db, users, clock) -> World:
    return await make_world(db, users, clock)


