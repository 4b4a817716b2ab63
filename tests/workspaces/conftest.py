"""Fixtures of the workspace tests: an HTTP helper per route, tokens read back from the mail outbox,
and the detectors of every WS rule."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.iam.tokens import digest
from tests.support.invariants import assert_invariants_hold
from tests.support.users import TestUser, UserFactory

API = "/api/v1"
TOKEN_IN_LINK = re.compile(r"/invitations/accept\?token=(wsi_[A-Za-z0-9_\-]+)")


class WorkspaceApi:
    """The workspace routes as calls, each answering the raw httpx response (tests assert on it).

    Each call signs a fresh access token at the frozen clock's time, so tests may jump days ahead
    (invitation expiry) without the 15-minute access tokens expiring under them."""

    def __init__(self, client: httpx.AsyncClient, app, clock) -> None:
        self.client = client
        self.app = app
        self.clock = clock

    def headers(self, user: TestUser) -> dict[str, str]:
        token = self.app.state.access_tokens.issue(subject=user.id, kind="user", now=self.clock.now())
        return {"Authorization": f"Bearer {token}"}

    async def create(self, user: TestUser, name: str = "Research") -> httpx.Response:
        return await self.client.post(f"{API}/workspaces", json={"name": name}, headers=self.headers(user))

    async def create_ok(self, user: TestUser, name: str = "Research") -> str:
        response = await self.create(user, name)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    async def get(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.client.get(f"{API}/workspaces/{workspace_id}", headers=self.headers(user))

    async def list(self, user: TestUser, **params: Any) -> httpx.Response:
        return await self.client.get(f"{API}/workspaces", params=params, headers=self.headers(user))

    async def delete(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.client.delete(f"{API}/workspaces/{workspace_id}", headers=self.headers(user))

    async def members(self, user: TestUser, workspace_id: str, **params: Any) -> httpx.Response:
        return await self.client.get(f"{API}/workspaces/{workspace_id}/members", params=params,
                                     headers=self.headers(user))

    async def set_role(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID,
                       role: str) -> httpx.Response:
        member_id = member.id if isinstance(member, TestUser) else member
        return await self.client.patch(f"{API}/workspaces/{workspace_id}/members/{member_id}", json={"role": role},
                                       headers=self.headers(user))

    async def remove(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID) -> httpx.Response:
        member_id = member.id if isinstance(member, TestUser) else member
        return await self.client.delete(f"{API}/workspaces/{workspace_id}/members/{member_id}",
                                        headers=self.headers(user))

    async def leave(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.remove(user, workspace_id, user)

    async def transfer(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID) -> httpx.Response:
        member_id = member.id if isinstance(member, TestUser) else member
        return await self.client.post(f"{API}/workspaces/{workspace_id}/transfer-ownership",
                                      json={"user_id": str(member_id)}, headers=self.headers(user))

    async def invite(self, user: TestUser, workspace_id: str, email: str, role: str = "member") -> httpx.Response:
        return await self.client.post(f"{API}/workspaces/{workspace_id}/invitations",
                                      json={"email": email, "role": role}, headers=self.headers(user))

    async def invite_ok(self, user: TestUser, workspace_id: str, email: str, role: str = "member") -> str:
        response = await self.invite(user, workspace_id, email, role)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    async def invitations(self, user: TestUser, workspace_id: str, **params: Any) -> httpx.Response:
        return await self.client.get(f"{API}/workspaces/{workspace_id}/invitations", params=params,
                                     headers=self.headers(user))

    async def revoke(self, user: TestUser, invitation_id: str) -> httpx.Response:
        return await self.client.post(f"{API}/invitations/{invitation_id}/revoke", headers=self.headers(user))

    async def resend(self, user: TestUser, invitation_id: str) -> httpx.Response:
        return await self.client.post(f"{API}/invitations/{invitation_id}/resend", headers=self.headers(user))

    async def accept(self, user: TestUser, token: str) -> httpx.Response:
        return await self.client.post(f"{API}/invitations/accept", json={"token": token}, headers=self.headers(user))


async def mails_to(db: Database, address: str) -> list[dict[str, Any]]:
    """Invitation mails in the outbox for `address` (as typed), oldest first."""
    async with db.read_only() as session:
        rows = await session.execute(text(
            "SELECT to_address, subject, body_text FROM kernel.email_outbox "
            "WHERE kind = 'workspace.invitation' AND to_address = :to ORDER BY created_at, id"), {"to": address})
        return [dict(r._mapping) for r in rows]


async def token_for(db: Database, address: str) -> str:
    """The live token mailed to `address`: read from the accept links of its mails, the one whose digest a
    PENDING invitation holds (mails of a frozen clock share a timestamp, so order cannot tell)."""
    mails = await mails_to(db, address)
    assert mails, f"no invitation mail to {address}"
    tokens = [m.group(1) for mail in mails if (m := TOKEN_IN_LINK.search(mail["body_text"]))]
    async with db.read_only() as session:
        live = (await session.execute(text(
            "SELECT token_digest FROM workspace.invitation WHERE status = 'PENDING' AND token_digest = ANY(:d)"),
            {"d": [digest(t) for t in tokens]})).scalars().all()
    matching = [t for t in tokens if digest(t) in live]
    assert len(matching) == 1, f"{len(matching)} live tokens mailed to {address}"
    return matching[0]


async def ws_invariants_hold(db: Database) -> None:
    async with db.read_only() as session:
        await assert_invariants_hold(session, prefix="WS-")


def code(response: httpx.Response) -> str:
    return response.json().get("code", "")


@pytest.fixture
def ws(client: httpx.AsyncClient, app, clock) -> WorkspaceApi:
    return WorkspaceApi(client, app, clock)


@pytest.fixture
async def owner(users: UserFactory) -> TestUser:
    return await users.make(display_name="Olga Owner")


@pytest.fixture
async def workspace_id(ws: WorkspaceApi, owner: TestUser) -> str:
    return await ws.create_ok(owner)


async def add_member(ws: WorkspaceApi, db: Database, users: UserFactory, owner: TestUser, workspace_id: str,
                     role: str = "member", *, email: str | None = None) -> TestUser:
    """A new user who joins through the invitation path (owners are promoted after joining)."""
    person = await users.make(email=email)
    await ws.invite_ok(owner, workspace_id, person.email, "member" if role == "owner" else role)
    accepted = await ws.accept(person, await token_for(db, person.email))
    assert accepted.status_code == 200, accepted.text
    if role == "owner":
        promoted = await ws.set_role(owner, workspace_id, person, "owner")
        assert promoted.status_code == 200, promoted.text
    return person


