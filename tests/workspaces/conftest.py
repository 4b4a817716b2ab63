"""Fixtures of the workspace tests: the API client with a call per route (tests/support/api.py), tokens read back
from the mail outbox, members who joined through an invitation."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.iam.tokens import digest
from tests.support.api import Api
from tests.support.users import TestUser, UserFactory

API = "/api/v1"
TOKEN_IN_LINK = re.compile(r"/invitations/accept\?token=(wsi_[A-Za-z0-9_\-]+)")


class WorkspaceApi(Api):
    """The workspace routes as calls, each answering the raw httpx response (tests assert on it); a fresh token
    per call (tests/support/api.py), so tests may jump days ahead (invitation expiry)."""

    base = API

    async def create(self, user: TestUser, name: str = "Research") -> httpx.Response:
        return await self.post(user, "/workspaces", {"name": name})

    async def create_ok(self, user: TestUser, name: str = "Research") -> str:
        return (await self.ok(self.create(user, name), 201))["id"]

    async def workspace(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.get(user, f"/workspaces/{workspace_id}")

    async def list(self, user: TestUser, **params: Any) -> httpx.Response:
        return await self.get(user, "/workspaces", **params)

    async def delete_workspace(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.delete(user, f"/workspaces/{workspace_id}")

    async def members(self, user: TestUser, workspace_id: str, **params: Any) -> httpx.Response:
        return await self.get(user, f"/workspaces/{workspace_id}/members", **params)

    async def set_role(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID,
                       role: str) -> httpx.Response:
        return await self.patch(user, f"/workspaces/{workspace_id}/members/{_id(member)}", {"role": role})

    async def remove(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID) -> httpx.Response:
        return await self.delete(user, f"/workspaces/{workspace_id}/members/{_id(member)}")

    async def leave(self, user: TestUser, workspace_id: str) -> httpx.Response:
        return await self.remove(user, workspace_id, user)

    async def transfer(self, user: TestUser, workspace_id: str, member: TestUser | uuid.UUID) -> httpx.Response:
        return await self.post(user, f"/workspaces/{workspace_id}/transfer-ownership", {"user_id": str(_id(member))})

    async def invite(self, user: TestUser, workspace_id: str, email: str, role: str = "member") -> httpx.Response:
        return await self.post(user, f"/workspaces/{workspace_id}/invitations", {"email": email, "role": role})

    async def invite_ok(self, user: TestUser, workspace_id: str, email: str, role: str = "member") -> str:
        return (await self.ok(self.invite(user, workspace_id, email, role), 201))["id"]

    async def invitations(self, user: TestUser, workspace_id: str, **params: Any) -> httpx.Response:
        return await self.get(user, f"/workspaces/{workspace_id}/invitations", **params)

    async def revoke(self, user: TestUser, invitation_id: str) -> httpx.Response:
        return await self.post(user, f"/invitations/{invitation_id}/revoke")

    async def resend(self, user: TestUser, invitation_id: str) -> httpx.Response:
        return await self.post(user, f"/invitations/{invitation_id}/resend")

    async def accept(self, user: TestUser, token: str) -> httpx.Response:
        return await self.post(user, "/invitations/accept", {"token": token})


def _id(member: TestUser | uuid.UUID) -> uuid.UUID:
    return member.id if isinstance(member, TestUser) else member


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


