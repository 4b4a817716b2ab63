"""Fixtures of the social tests: the API client over /api/v1/social (tests/support/api.py) and its people."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.support.api import Api
from tests.support.users import TestUser, UserFactory

BASE = "/api/v1/social"


class SocialApi(Api):
    """The social routes as calls (`get`, `post`, `patch`, `delete`, `ok` from `Api`) and the compound steps a
    scene is built from."""

    base = BASE

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
