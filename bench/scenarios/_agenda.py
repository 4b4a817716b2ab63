"""Loading an agenda through Tenet's API for the agenda scenarios (not a scenario: the underscore keeps it out of
the list). Everything goes through the routes, so the audit rows and every rule are as a real agenda leaves them."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from bench.loading import User, register_users, sign_in

BASE = "/api/v1/meeting-attendance"
PDF = b"%PDF-1.7\n" + b"0" * 20_000 + b"\n%%EOF\n"
BOUNDARY = "bench-agenda-boundary"


@dataclass(frozen=True)
class People:
    manager: User
    manager_token: str
    attendees: list[User]


async def people(client: httpx.AsyncClient, database_url: str, attendees: int) -> People:
    (manager,) = await register_users(client, 1, prefix="manager")
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await connection.execute("INSERT INTO iam.user_role (user_id, role_name, granted_at) "
                                 "VALUES (%s, 'MeetingManager', now())", (manager.id,))
        await connection.commit()
    return People(manager, await sign_in(client, manager), await register_users(client, attendees, prefix="attendee"))


async def call(client: httpx.AsyncClient, token: str, method: str, path: str, **kwargs) -> dict:
    response = await client.request(method, BASE + path, headers={"Authorization": f"Bearer {token}",
                                                                  **kwargs.pop("headers", {})}, timeout=60, **kwargs)
    if response.status_code >= 300:
        raise SystemExit(f"{method} {path} answered {response.status_code}: {response.text[:300]}")
    return response.json() if response.content else {}


async def meeting(client: httpx.AsyncClient, token: str, attendee_ids: list[uuid.UUID], title: str) -> str:
    start = datetime.now(UTC) + timedelta(days=7)
    made = await call(client, token, "POST", "/meetings", json={
        "title": title, "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat(),
        "required_attendee_ids": [str(a) for a in attendee_ids]})
    return made["id"]


async def items(client: httpx.AsyncClient, token: str, meeting_id: str, sections: int, per_section: int) -> list[str]:
    made = []
    for s in range(sections):
        section = await call(client, token, "POST", f"/meetings/{meeting_id}/agenda/sections",
                             json={"title": f"Section {s + 1}"})
        for i in range(per_section):
            item = await call(client, token, "POST", f"/agenda/sections/{section['id']}/items",
                              json={"title": f"Item {s + 1}.{i + 1}", "description": "Talking points " * 10,
                                    "code": f"{s + 1}.{i + 1}", "time_minutes": 10, "category_tag": "REPORT"})
            made.append(item["id"])
    return made


async def gather(limit: int, calls) -> list:
    gate = asyncio.Semaphore(limit)

    async def one(coroutine):
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(c) for c in calls))


async def upload(client: httpx.AsyncClient, token: str, item_id: str, name: str) -> dict:
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: application/pdf\r\n\r\n").encode() + PDF + f"\r\n--{BOUNDARY}--\r\n".encode()
    return await call(client, token, "POST", f"/agenda-items/{item_id}/attachments", content=body,
                      headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
