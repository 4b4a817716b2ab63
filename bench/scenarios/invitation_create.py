"""invitation_create: `POST /api/v1/workspaces/{id}/invitations`, every request a new email address.

What Tenet does for it (src/tenet/workspaces/api.py create_invitation, invitations.py create_invitation): verify
the JWT (cached) and load the principal (`USER_PRINCIPAL_SQL`, read path); take a slot of the sender's
invitation limit (one autocommit statement, `ratelimit._COUNT_UNDER_LIMIT`); then, in one transaction: in one
round trip (a psycopg pipeline, `Statements.ones`), BEGIN, the statement that locks the workspace and reads it
with the caller's membership (`commands.LOCK_WORKSPACE_AND_CALLER`) and the one that reads whether the address
has a pending invitation or belongs to a member and how many mails the workspace sent in 24 hours
(`invitations._INVITE_FACTS`); then in a second round trip (`Statements.pipeline`) the invitation, the outbox
mail, the invitation_send row and the audit row; COMMIT. The baseline runs the same statements, imported from
Tenet's modules, with the same values and in the same round trips (the same two pipelines), in one
transaction: so the ratio measures what Tenet's layers cost, not how many round trips either side makes.

Each request invites `<wrk run>-t<thread>-<n>@bench.example` (the run label keeps the warm-up, the
measured run and the other side apart), so none is refused as already pending. The requests take turns
over WORKSPACES workspaces of one owner: the workspace lock serialises every invitation of one
workspace, so a single workspace would measure how long each side holds that lock, not what the
endpoint costs. With at most WORKSPACES connections, two requests in flight rarely share a workspace.
"""

from __future__ import annotations

import itertools
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from bench.loading import create_workspace, register_users, sign_in
from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._sql import PRINCIPAL_SQL, json_time, principal_params
from tenet.iam.tokens import digest, new_secret
from tenet.kernel.audit import _INSERT as _AUDIT_INSERT
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, normalize_email
from tenet.kernel.outbox import _ENQUEUE
from tenet.kernel.ratelimit import _COUNT_UNDER_LIMIT
from tenet.workspaces.commands import LOCK_WORKSPACE_AND_CALLER as _LOCK_WORKSPACE_AND_CALLER
from tenet.workspaces.invitations import _INSERT_INVITATION, _INSERT_SEND, _INVITE_FACTS

DESCRIPTION = "POST /api/v1/workspaces/{id}/invitations, a new email each time, over 64 workspaces of one owner"
WORKSPACES = 64  # twice the default --concurrency
INVITATION_TTL = timedelta(days=7)  # Tenet's default TENET_INVITATION_TTL_DAYS
SERVICE_ENV = {
    # The daily limit per workspace would stop a run after 100 invitations per workspace.
    "TENET_INVITATIONS_PER_WORKSPACE_PER_DAY": "1000000000",
    # Limits the service may add (per inviting account, per workspace creator): set out of reach already,
    # so this scenario keeps measuring the endpoint, not a 429.
    "TENET_INVITATION_SENDER_LIMIT": "1000000000/24hour",
    "TENET_WORKSPACE_CREATION_LIMIT": "1000000000/24hour",
}

@dataclass(frozen=True)
class Context:
    user_id: uuid.UUID
    token: str
    workspace_ids: tuple[uuid.UUID, ...]
    inviter_name: str
    one_off: itertools.count = field(default_factory=lambda: itertools.count(1))  # emails of the checks


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (owner,) = await register_users(client, 1, prefix="owner")
    token = await sign_in(client, owner)
    workspaces = [await create_workspace(client, token, f"Bench invitations {i}") for i in range(WORKSPACES)]
    me = (await client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})).json()
    return Context(user_id=owner.id, token=token, workspace_ids=tuple(workspaces),
                   inviter_name=me["user"]["display_name"])


def _path(workspace_id: uuid.UUID) -> str:
    return f"/api/v1/workspaces/{workspace_id}/invitations"


def wrk_request(context: Context) -> Request:
    # A new address on every call: this request may be sent once to each side (the checks, --show-sql).
    email = f"one-off-{next(context.one_off)}@bench.example"
    return Request(path=_path(context.workspace_ids[0]), method="POST",
                   headers={"Authorization": f"Bearer {context.token}", "Content-Type": "application/json"},
                   body=json.dumps({"email": email, "role": "member"}))


def wrk_lua(context: Context) -> str:
    workspaces = ", ".join(f'"{_path(w)}"' for w in context.workspace_ids)
    return f"""
local paths = {{{workspaces}}}
local sent = 0

function request()
  sent = sent + 1
  -- The threads interleave over the workspaces: request n of thread t goes to ((n-1)*threads + t-1) mod #paths.
  local path = paths[((sent - 1) * bench_threads + thread_index - 1) % #paths + 1]
  local body = string.format('{{"email":"%s-t%d-%d@bench.example","role":"member"}}', bench_run, thread_index, sent)
  return wrk.format("POST", path, nil, body)
end
"""


def baseline_config(context: Context) -> dict[str, object]:
    return {"user_id": context.user_id, "principal": principal_params(context.user_id, context.token),
            "inviter_name": context.inviter_name}


async def _one(cursor: DictCursor, sql: str, params: Any) -> dict[str, Any] | None:
    await cursor.execute(sql, params)
    return await cursor.fetchone()


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    workspace_id = uuid.UUID(request.path.split("/")[4])  # /api/v1/workspaces/{id}/invitations
    user_id = config["user_id"]
    wanted = json.loads(request.body)
    email, role = wanted["email"].strip(), wanted.get("role", "member")
    key = normalize_email(email)
    now = datetime.now(UTC)
    window = timedelta(hours=24)

    await _one(cursor, PRINCIPAL_SQL, config["principal"])
    await cursor.execute(_COUNT_UNDER_LIMIT, {"buckets": [f"invitation-send:user:{user_id}"], "start": now,
                                              "expires": now + window, "limit": 1_000_000_000})
    connection = cursor.connection
    async with connection.pipeline():  # BEGIN, the lock with the caller's membership, the facts: one round trip
        found = connection.cursor(row_factory=dict_row)
        await found.execute(_LOCK_WORKSPACE_AND_CALLER, {"workspace_id": workspace_id, "user_id": user_id})
        await cursor.execute(_INVITE_FACTS, {"workspace_id": workspace_id, "key": key, "since": now - window})
    row, facts = await found.fetchone(), await cursor.fetchone()
    await found.close()
    if row is None:
        return BaselineAnswer(404, {"code": "WORKSPACE_NOT_FOUND"})
    assert facts is not None
    if facts["pending_id"] is not None:
        return BaselineAnswer(409, {"code": "INVITATION_ALREADY_PENDING"})
    if facts["member_user_id"] is not None:
        return BaselineAnswer(409, {"code": "ALREADY_MEMBER"})

    token = new_secret("wsi")
    invitation = {
        "id": uuid.uuid4(), "workspace_id": workspace_id, "email": email, "email_normalized": key,
        "email_normalization": EMAIL_NORMALIZATION_VERSION, "role": role, "status": "PENDING", "version": 1,
        "token_digest": digest(token), "invited_by": user_id, "created_at": now, "expires_at": now + INVITATION_TTL,
        "last_sent_at": now, "accepted_at": None, "accepted_by": None, "revoked_at": None, "revoked_by": None,
        "expired_at": None,
    }
    body = (f"Hello,\n\n{config['inviter_name']} invited you to join the workspace \"{row['name']}\" on "
            f"Tenet as a {role}.\n\nAccept the invitation (sign in with this email address):\n"
            f"http://127.0.0.1:8000/invitations/accept?token={token}\n\nOr enter this invitation code in Tenet: "
            f"{token}\n\nThe invitation expires on {invitation['expires_at']:%Y-%m-%d %H:%M} UTC. "
            "If you did not expect it, you can ignore this mail.\n")
    subject = f"{config['inviter_name']} invited you to {row['name']} on Tenet"
    async with connection.pipeline():  # the four rows: one round trip
        await cursor.execute(_INSERT_INVITATION, invitation)
        await cursor.execute(_ENQUEUE, {"id": uuid.uuid4(), "kind": "workspace.invitation", "to": email,
                                        "subject": subject, "body": body, "now": now})
        await cursor.execute(_INSERT_SEND, {"workspace_id": workspace_id, "invitation_id": invitation["id"],
                                            "sent_at": now, "reason": "invite"})
        await cursor.execute(_AUDIT_INSERT, {
            "occurred_at": now, "action": "workspace.invitation.created", "actor_type": "user",
            "actor_id": str(user_id), "subject_type": "invitation", "subject_id": str(invitation["id"]),
            "scope_type": "workspace", "scope_id": str(workspace_id), "request_id": uuid.uuid4().hex,
            "data": Jsonb({"role": role, "expires_at": invitation["expires_at"].isoformat()})})

    answer = {name: invitation[name] for name in ("id", "workspace_id", "email", "role", "status", "invited_by")}
    times = {name: json_time(invitation[name]) for name in ("created_at", "expires_at", "last_sent_at")}
    return BaselineAnswer(201, {**answer, **times, "accepted_at": None, "accepted_by": None, "revoked_at": None,
                                "expired_at": None})


def describe(context: Context) -> dict[str, object]:
    return {"workspaces": len(context.workspace_ids), "inviter_id": str(context.user_id)}
