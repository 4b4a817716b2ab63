"""Generated data, loaded through Tenet's public API (so it is exactly what the service would hold), or,
where the API would take minutes, written straight into the bench database as the service would have
written it, then checked with `tenet invariants check`."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from tenet.iam.permissions import DEFAULT_ROLES
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, normalize_email

PASSWORD = "bench-password-0123"  # >= 10 characters, not the email, enough distinct characters


@dataclass(frozen=True)
class User:
    id: uuid.UUID
    email: str
    password: str


async def register_users(client: httpx.AsyncClient, count: int, *, concurrency: int = 8,
                         prefix: str = "user") -> list[User]:
    """Register `count` accounts via POST /api/v1/auth/register, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    run = uuid.uuid4().hex[:8]  # unique emails even against a database that already has bench users

    async def one(index: int) -> User:
        email = f"{prefix}-{run}-{index:06d}@bench.example"
        async with gate:
            response = await client.post("/api/v1/auth/register", json={
                "email": email, "password": PASSWORD, "display_name": f"Bench {prefix.title()} {index}",
            })
        if response.status_code != 201:
            raise SystemExit(f"registering {email} answered {response.status_code}: {response.text[:500]}")
        return User(id=uuid.UUID(response.json()["id"]), email=email, password=PASSWORD)

    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def sign_in(client: httpx.AsyncClient, user: User) -> str:
    """An access token for `user` (OAuth2 password grant, form-encoded)."""
    response = await client.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": user.email, "password": user.password,
    })
    if response.status_code != 200:
        raise SystemExit(f"signing in {user.email} answered {response.status_code}: {response.text[:500]}")
    return response.json()["access_token"]


async def create_workspace(client: httpx.AsyncClient, token: str, name: str) -> uuid.UUID:
    response = await client.post("/api/v1/workspaces", json={"name": name},
                                 headers={"Authorization": f"Bearer {token}"})
    if response.status_code != 201:
        raise SystemExit(f"creating workspace {name!r} answered {response.status_code}: {response.text[:500]}")
    return uuid.UUID(response.json()["id"])


async def add_members(database_url: str, *, workspace_id: uuid.UUID, inviter_id: uuid.UUID, count: int,
                      since: datetime) -> list[uuid.UUID]:
    """`count` new accounts that joined the workspace as members, in one transaction, in SQL.

    What the API would have left after `count` registrations and accepted invitations: the account
    (with the default roles and the inviter's password hash, so each can sign in with PASSWORD), an
    ACCEPTED invitation from `inviter_id` with its send row, and the ACTIVE membership made from it
    (WS-INV-05). Member i was invited at `since` + i ms and joined 0.5 ms later, so the join order is the
    insertion order. Audit rows are left out (no invariant needs them). Answers the user ids, in join order.
    """
    run = uuid.uuid4().hex[:8]
    users, roles, invitations, sends, memberships = [], [], [], [], []
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        (password_hash,) = await (await connection.execute(
            "SELECT password_hash FROM iam.user_account WHERE id = %s", (inviter_id,))).fetchone()
        for i in range(count):
            user_id, invitation_id = uuid.uuid4(), uuid.uuid4()
            email = f"member-{run}-{i:05d}@bench.example"
            invited = since + timedelta(milliseconds=i)
            joined = invited + timedelta(microseconds=500)
            users.append((user_id, email, normalize_email(email), EMAIL_NORMALIZATION_VERSION, f"Bench Member {i}",
                          password_hash, invited, invited))
            roles.extend((user_id, role.value, invited) for role in DEFAULT_ROLES)
            token_digest = "sha256:" + hashlib.sha256(secrets.token_bytes(32)).hexdigest()
            invitations.append((invitation_id, workspace_id, email, normalize_email(email),
                                EMAIL_NORMALIZATION_VERSION, token_digest, inviter_id, invited,
                                invited + timedelta(days=7), invited, joined, user_id))
            sends.append((workspace_id, invitation_id, invited))
            memberships.append((uuid.uuid4(), workspace_id, user_id, invitation_id, joined, joined))
        async with connection.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name, "
                "password_hash, status, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, 'active', %s, %s)",
                users)
            await cursor.executemany(
                "INSERT INTO iam.user_role (user_id, role_name, granted_at) VALUES (%s, %s, %s)", roles)
            # Both constraint triggers of WS-INV-05 are deferred: they check the pairs at COMMIT.
            await cursor.executemany(
                "INSERT INTO workspace.invitation (id, workspace_id, email, email_normalized, email_normalization, "
                "role, status, version, token_digest, invited_by, created_at, expires_at, last_sent_at, "
                "accepted_at, accepted_by) VALUES (%s, %s, %s, %s, %s, 'member', 'ACCEPTED', 2, %s, %s, %s, %s, "
                "%s, %s, %s)", invitations)
            await cursor.executemany(
                "INSERT INTO workspace.invitation_send (workspace_id, invitation_id, sent_at, reason) "
                "VALUES (%s, %s, %s, 'invite')", sends)
            await cursor.executemany(
                "INSERT INTO workspace.membership (id, workspace_id, user_id, role, status, version, invitation_id, "
                "joined_at, updated_at) VALUES (%s, %s, %s, 'member', 'ACTIVE', 1, %s, %s, %s)", memberships)
        await connection.commit()
    return [user[0] for user in users]


def check_invariants(database_url: str) -> None:
    """`tenet invariants check` against the bench database; stops the run when any invariant is broken."""
    tenet = Path(sys.executable).parent / "tenet"
    # cwd: like the service, not configured by a .env in the repository.
    result = subprocess.run([str(tenet), "invariants", "check", "--database-url", database_url],
                            capture_output=True, text=True, cwd=tempfile.gettempdir())
    if result.returncode != 0:
        raise SystemExit(f"the loaded data breaks invariants (tenet invariants check exited {result.returncode}):\n"
                         f"{result.stdout}\n{result.stderr}")
