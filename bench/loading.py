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
from typing import Any

import httpx
import psycopg
from psycopg.types.json import Jsonb

from tenet.iam.permissions import DEFAULT_ROLES
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, normalize_email
from tenet.social.common import DEFAULT_AGENT_TYPE, DEFAULT_LLM_ID

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
    users: list[Any] = []
    roles: list[Any] = []
    invitations: list[Any] = []
    sends: list[Any] = []
    memberships: list[Any] = []
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        inviter = await (await connection.execute(
            "SELECT password_hash FROM iam.user_account WHERE id = %s", (inviter_id,))).fetchone()
        assert inviter is not None, f"the inviter {inviter_id} is not in the database"
        (password_hash,) = inviter
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
            await cursor.execute(_PROFILES_AND_AGENTS_SQL, {
                "ids": [user[0] for user in users], "now": since, "llm": DEFAULT_LLM_ID,
                "agent_type": DEFAULT_AGENT_TYPE})
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


# What registration writes for one account (iam.service.create_user and the AccountCreated handler
# social.accounts.create_profile_and_agent), for many accounts in one statement: the account (active, email
# normalised as email-v1, token epoch 0), its default roles, the audit row `iam.user.created` of an anonymous
# actor, the profile (username from the display name by the handler's own expression, empty settings, a
# calendar feed id of 16 random bytes in base64url) and the live agent. The emails are `<prefix><i>@bench.example`
# (i zero-padded to 6 digits, first..last), lower case, so email_normalized = email; the display names
# `<display><i>`. Not written: the registration's rate-limit counter row (not part of the account).
_ACCOUNTS_SQL = """
WITH new AS (
    SELECT gen_random_uuid() AS id, i, %(prefix)s || lpad(i::text, 6, '0') || '@bench.example' AS email
      FROM generate_series(%(first)s::int, %(last)s::int) AS i),
account AS (
    INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name, password_hash,
                                  status, token_epoch, created_at, updated_at)
    SELECT id, email, email, %(normalization)s, %(display)s || i, %(password_hash)s, 'active', 0, %(now)s, %(now)s
      FROM new
    RETURNING id, display_name),
role AS (
    INSERT INTO iam.user_role (user_id, role_name, granted_at)
    SELECT account.id, role, %(now)s FROM account, unnest(%(roles)s::text[]) AS role),
audit AS (
    INSERT INTO kernel.audit_log (occurred_at, action, actor_type, actor_id, subject_type, subject_id, scope_type,
                                  scope_id, request_id, data)
    SELECT %(now)s, 'iam.user.created', 'anonymous', NULL, 'user', account.id::text, NULL, NULL,
           replace(gen_random_uuid()::text, '-', ''), %(audit_data)s
      FROM account),
profile AS ({profile})
{agent}
"""
# The social profile and the live agent the AccountCreated handler writes, for the rows of `account` (id,
# display_name): shared by _ACCOUNTS_SQL and add_members (accounts made by SQL must look registered to SOC-INV-01).
_PROFILE_INSERT = """
    INSERT INTO social.profiles (id, username, settings, settings_version, calendar_feed_id, version, created_at,
                                 updated_at, created_by)
    SELECT account.id,
           coalesce(nullif(btrim(left(regexp_replace(account.display_name, '[[:cntrl:]]', '', 'g'), 200)), ''),
                    'User'),
           '{{}}'::jsonb, 1, translate(rtrim(encode(uuid_send(gen_random_uuid()), 'base64'), '='), '+/', '-_'), 1,
           %(now)s, %(now)s, account.id
      FROM account"""
_AGENT_INSERT = """
INSERT INTO social.user_agents (id, user_id, llm_id, agent_type, config, status, capability_version, version,
                                created_at, updated_at, created_by)
SELECT gen_random_uuid(), account.id, %(llm)s, %(agent_type)s, '{{}}'::jsonb, 'active', 1, 1, %(now)s, %(now)s,
       account.id
  FROM account"""
_ACCOUNTS_SQL = _ACCOUNTS_SQL.format(profile=_PROFILE_INSERT, agent=_AGENT_INSERT).replace("{{}}", "{}")
_PROFILES_AND_AGENTS_SQL = (
    "WITH account AS (SELECT id, display_name FROM iam.user_account WHERE id = ANY(%(ids)s)), profile AS ("
    + _PROFILE_INSERT + ")" + _AGENT_INSERT).replace("{{}}", "{}")


async def insert_accounts(connection: psycopg.AsyncConnection, *, prefix: str, first: int, last: int,
                          password_hash: str, now: datetime, display: str = "Bench User ") -> None:
    """Accounts `first`..`last` as registration would have left them, in one statement (`_ACCOUNTS_SQL`), in
    the caller's transaction. Registering through the API costs a request, an argon2 hash and a sign-in
    rate-limit slot each: minutes for thousands of accounts, where this takes seconds. With the password hash
    of a registered account, every one of them signs in with that account's password."""
    roles = sorted(role.value for role in DEFAULT_ROLES)
    await connection.execute(_ACCOUNTS_SQL, {
        "prefix": prefix, "first": first, "last": last, "normalization": EMAIL_NORMALIZATION_VERSION,
        "display": display, "password_hash": password_hash, "now": now, "roles": roles,
        # What iam.service.create_user records for a self-registration.
        "audit_data": Jsonb({"roles": roles, "self_registered": True}),
        "llm": DEFAULT_LLM_ID, "agent_type": DEFAULT_AGENT_TYPE})


def check_invariants(database_url: str, *, timeout: float | None = None) -> None:
    """`tenet invariants check` against the bench database; stops the run when any invariant is broken (or a
    detector could not finish). `timeout`: seconds each detector may run (the command's default otherwise: 30,
    which some social detectors need more than on millions of rows)."""
    tenet = Path(sys.executable).parent / "tenet"
    command = [str(tenet), "invariants", "check", "--database-url", database_url]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    # cwd: like the service, not configured by a .env in the repository.
    result = subprocess.run(command, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if result.returncode != 0:
        raise SystemExit(f"the loaded data breaks invariants (tenet invariants check exited {result.returncode}):\n"
                         f"{result.stdout}\n{result.stderr}")
