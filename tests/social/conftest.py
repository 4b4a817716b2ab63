"""Fixtures of the social tests: an HTTP helper over /api/v1/social and the SOC detectors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.support.invariants import assert_invariants_hold
from tests.support.users import TestUser, UserFactory

from tenet.db.database import Database
from tenet.kernel.jobs import JobRuntime

BASE = "/api/v1/social"


class SocialApi:
    """Each call signs a fresh access token at the frozen clock's time (tests may jump days ahead)."""

    def __init__(self, client: httpx.AsyncClient, app, clock) -> None:
        self.client = client
        self.app = app
        self.clock = clock

    def headers(self, user: TestUser) -> dict[str, str]:
        token = self.app.state.access_tokens.issue(subject=user.id, kind="user", now=self.clock.now())
        return {"Authorization": f"Bearer {token}"}

    async def get(self, user: TestUser, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(BASE + path, params=params, headers=self.headers(user))

    async def post(self, user: TestUser, path: str, body: Any = None) -> httpx.Response:
        return await self.client.post(BASE + path, json=body, headers=self.headers(user))

    async def patch(self, user: TestUser, path: str, body: Any, **headers: str) -> httpx.Response:
        return await self.client.patch(BASE + path, json=body, headers={**self.headers(user), **headers})

    async def delete(self, user: TestUser, path: str) -> httpx.Response:
        return await self.client.delete(BASE + path, headers=self.headers(user))

    async def ok(self, response_awaitable, status: int = 200) -> Any:
        response = await response_awaitable
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    # --- compound steps --------------------------------------------------------------------------------

    async def befriend(self, a: TestUser, b: TestUser) -> str:
        friendship = await self.ok(self.post(a, "/friendships", {"user_id": str(b.id)}), 201)
        await self.ok(self.post(b, f"/friendships/{friendship['id']}/accept"))
        return friendship["id"]

    async def group(self, creator: TestUser, name: str = "Team", **extra: Any) -> str:
        return (await self.ok(self.post(creator, "/groups", {"name": name, **extra}), 201))["id"]

    async def add_to_group(self, creator: TestUser, group_id: str, person: TestUser) -> None:
        friends = await self.get(creator, "/friendships", status="accepted")
        if str(person.id) not in {f["other_user_id"] for f in friends.json()["items"]}:
            await self.befriend(creator, person)
        invitation = await self.ok(self.post(creator, f"/groups/{group_id}/invitations", {"user_id": str(person.id)}),
                                   201)
        await self.ok(self.post(person, f"/inbox/{invitation['id']}/accept"))

    async def item(self, owner: TestUser, **fields: Any) -> dict[str, Any]:
        body = {"title": "Team sync", "start_at": "2026-03-02T17:00:00Z", "end_at": "2026-03-02T18:00:00Z",
                "timezone": "America/Los_Angeles", **fields}
        return await self.ok(self.post(owner, "/schedule-items", body), 201)

    async def offer(self, sharer: TestUser, item_id: str, person: TestUser, permission: list[str] | None = None,
                    accept: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {"subject_type": "user", "subject_id": str(person.id)}
        if permission is not None:
            body["permission"] = permission
        subscription = await self.ok(self.post(sharer, f"/schedule-items/{item_id}/subscriptions", body), 201)
        if accept:
            message = await self.pending_message(person, "schedule_item_shared")
            await self.ok(self.post(person, f"/inbox/{message['id']}/accept"))
        return subscription

    async def pending_message(self, user: TestUser, message_type: str) -> dict[str, Any]:
        page = await self.ok(self.get(user, "/inbox", status="pending,read", message_type=message_type))
        found = [m for m in page["items"] if m["actionable"]] or page["items"]
        assert found, f"no open {message_type} for {user.email}"
        return found[0]


def code(response: httpx.Response) -> str:
    return response.json().get("code", "")


async def soc_invariants_hold(db: Database) -> None:
    async with db.read_only() as session:
        await assert_invariants_hold(session, prefix="SOC-")


@pytest.fixture
def api(client: httpx.AsyncClient, app, clock) -> SocialApi:
    return SocialApi(client, app, clock)


@pytest.fixture
async def ann(users: UserFactory) -> TestUser:
    return await users.make(display_name="Ann")


@pytest.fixture
async def bob(users: UserFactory) -> TestUser:
    return await users.make(display_name="Bob")


@pytest.fixture
async def cid(users: UserFactory) -> TestUser:
    return await users.make(display_name="Cid")


@pytest.fixture
def job_runtime(settings, db: Database, clock) -> Iterator[JobRuntime]:
    yield JobRuntime(db=db, clock=clock, settings=settings)
