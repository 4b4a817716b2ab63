"""What the reservation scenarios share (not a scenario: the leading underscore keeps it out of the list).

The data is made through Tenet's public API: an administrator (made with `tenet users create-admin` on the
bench database), a hotel `BENCH` with an ingest client and an agent assigned to it, and ORDERS ACTIVE orders
(`BK0000` .. `BK0999`), each created by an ingested update. The baselines run Tenet's own statements on the
bare psycopg cursor: the ingest through `ingest.ingest` on the cursor (`CursorStatements`), the reads through the same
SQL of `tenet.reservations.queries`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from bench.loading import register_users, sign_in
from bench.scenario import DictCursor
from bench.scenarios._sql import json_time

HOTEL = "BENCH"
ORDERS = 1000
ADMIN_EMAIL, ADMIN_PASSWORD = "bench-admin@bench.example", "bench-admin-password-0123"
BASE = "/api/v1/reservations"


@dataclass(frozen=True)
class Setup:
    admin_token: str
    client_id: uuid.UUID
    client_token: str
    agent_id: uuid.UUID
    agent_token: str


def update_item(event: int, key: str) -> str:
    return ('{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","current_or_history":"current",'
            f'"source_event_index":{event},"case_keys":{{"confirmation_number":"{key}"}},'
            '"extracted_fields":{"room_type":"KING","adults":2}}')


def batch_body(items: list[str], *, request_id: str, message: int) -> str:
    return (f'{{"hotel_id":"{HOTEL}","source_message_id":{message},"request_id":"{request_id}",'
            f'"ai_task_results":[{",".join(items)}]}}')


async def _check(response: httpx.Response, what: str, status: int = 200) -> dict[str, Any]:
    if response.status_code != status:
        raise SystemExit(f"{what} answered {response.status_code}: {response.text[:500]}")
    return response.json() if response.content else {}


async def prepare(client: httpx.AsyncClient, database_url: str) -> Setup:
    """The administrator, the hotel's ingest client and agent, and the ORDERS ACTIVE orders."""
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "tenet", "users", "create-admin", "--email", ADMIN_EMAIL,
                         "--password", ADMIN_PASSWORD], env={**os.environ, "DATABASE_URL": database_url},
        check=True, capture_output=True, cwd=tempfile.gettempdir())
    admin = (await _check(await client.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": ADMIN_EMAIL, "password": ADMIN_PASSWORD}), "admin sign-in"))
    admin_headers = {"Authorization": f"Bearer {admin['access_token']}"}
    made = await _check(await client.post("/api/v1/iam/api-clients", headers=admin_headers, json={
        "name": "bench superagent", "scopes": ["reservations:ingest", "reservations:read"], "hotel_ids": [HOTEL]}),
        "creating the ingest client", 201)
    token = (await _check(await client.post("/api/v1/auth/token", data={
        "grant_type": "client_credentials", "client_id": made["client_id"],
        "client_secret": made["client_secret"]}), "client sign-in"))["access_token"]
    (agent,) = await register_users(client, 1, prefix="agent")
    await _check(await client.put(f"/api/v1/iam/users/{agent.id}/roles", headers=admin_headers,
                                  json={"roles": ["ReservationAgent"]}), "giving the agent its role")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(8)

    async def load(start: int) -> None:
        items = [update_item(i + 1, f"BK{start + i:04d}") for i in range(20)]
        async with gate:
            await _check(await client.post(f"{BASE}/ai-batches", headers=headers, content=batch_body(
                items, request_id=f"load-{start}", message=start + 1)), "loading orders", 201)

    await asyncio.gather(*(load(start) for start in range(0, ORDERS, 20)))
    await _check(await client.put(f"{BASE}/hotels/{HOTEL}/staff/{agent.id}", headers=admin_headers),
                 "assigning the agent", 204)
    return Setup(admin_token=admin["access_token"], client_id=uuid.UUID(made["id"]), client_token=token,
                 agent_id=agent.id, agent_token=await sign_in(client, agent))


class CursorReads:
    """tenet.kernel.reads.Reads over the baseline's cursor."""

    def __init__(self, cursor: DictCursor) -> None:
        self.cursor = cursor

    async def all(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        await self.cursor.execute(sql, params)
        return await self.cursor.fetchall()

    async def one(self, sql: str, params: Any = None) -> dict[str, Any] | None:
        await self.cursor.execute(sql, params)
        return await self.cursor.fetchone()

    async def value(self, sql: str, params: Any = None) -> Any:
        row = await self.one(sql, params)
        return None if row is None else next(iter(row.values()))


class CursorStatements(CursorReads):
    """Tenet's ingest statements (`ingest.Writer`: psycopg `%(name)s` placeholders, as kernel.statements runs
    them) on the baseline's bare cursor: the same SQL PostgreSQL receives from Tenet."""

    async def execute(self, sql: str, params: Any = None) -> int:
        await self.cursor.execute(sql, params)
        return self.cursor.rowcount


def jsonable(value: Any) -> Any:
    """An answer as Tenet writes it: ids (keys ending in `id`) as strings, times in UTC with Z."""
    if isinstance(value, dict):
        return {k: (str(v) if isinstance(v, int) and not isinstance(v, bool) and (k == "id" or k.endswith("_id"))
                    else jsonable(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return json_time(value)
    return value


def task_ids(answer: Any) -> list[str]:
    return [str(t["id"]) for t in answer.get("tasks", [])]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
