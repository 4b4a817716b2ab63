"""invitation_create: `POST /api/v1/workspaces/{id}/invitations`, every request a new email address.

What Tenet does for it (src/tenet/workspaces/api.py create_invitation, service.py create_invitation):
verify the JWT and load the principal (`USER_PRINCIPAL_SQL`); lock the workspace row (`FOR UPDATE`, held
to COMMIT), load the workspace and the caller's active membership; look for a pending invitation of the
same normalised email, and for an account with that email (and then its membership); count the
workspace's invitation mails of the last 24 hours (the daily limit); insert the invitation in a savepoint
(its unique index decides races); load the inviter's account for the mail; insert the mail into the
outbox, the invitation_send row and the audit row; COMMIT. The baseline runs the same statements in a
transaction, with the same values (a new token and its digest, the mail text, the audit data).

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
from psycopg import AsyncCursor

from bench.loading import create_workspace, register_users, sign_in
from bench.scenario import BaselineAnswer, BaselineRequest, Request
from bench.scenarios._sql import ACTIVE_MEMBERSHIP_SQL, PRINCIPAL_SQL, WORKSPACE_SQL, columns, json_time, principal_params
from tenet.iam.models import UserAccount
from tenet.iam.tokens import digest, new_secret
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, normalize_email
from tenet.workspaces.models import Invitation

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

# Tenet's statements besides the shared ones (_sql.py), as PostgreSQL receives them (`--show-sql`).
LOCK_SQL = "SELECT 1 FROM workspace.workspace WHERE id = %s FOR UPDATE"
PENDING_SQL = (f"SELECT {columns(Invitation)} FROM workspace.invitation "
               "WHERE workspace.invitation.workspace_id = %s::UUID AND workspace.invitation.email_normalized = "
               "%s::VARCHAR AND workspace.invitation.status = %s::VARCHAR")
PERSON_SQL = (f"SELECT {columns(UserAccount)} FROM iam.user_account "
              "WHERE iam.user_account.email_normalized = %s::VARCHAR AND iam.user_account.status != %s::VARCHAR")
SENT_TODAY_SQL = ("SELECT count(*) AS count_1 FROM workspace.invitation_send "
                  "WHERE workspace.invitation_send.workspace_id = %s::UUID "
                  "AND workspace.invitation_send.sent_at > %s::TIMESTAMP WITH TIME ZONE")
INSERT_INVITATION_SQL = (
    "INSERT INTO workspace.invitation (id, workspace_id, email, email_normalized, email_normalization, role, status, "
    "version, token_digest, invited_by, created_at, expires_at, last_sent_at, accepted_at, accepted_by, revoked_at, "
    "revoked_by, expired_at) VALUES (%(id)s::UUID, %(workspace_id)s::UUID, %(email)s::VARCHAR, "
    "%(email_normalized)s::VARCHAR, %(email_normalization)s::VARCHAR, %(role)s::VARCHAR, %(status)s::VARCHAR, "
    "%(version)s::INTEGER, %(token_digest)s::VARCHAR, %(invited_by)s::UUID, "
    "%(created_at)s::TIMESTAMP WITH TIME ZONE, %(expires_at)s::TIMESTAMP WITH TIME ZONE, "
    "%(last_sent_at)s::TIMESTAMP WITH TIME ZONE, %(accepted_at)s::TIMESTAMP WITH TIME ZONE, "
    "%(accepted_by)s::UUID, %(revoked_at)s::TIMESTAMP WITH TIME ZONE, %(revoked_by)s::UUID, "
    "%(expired_at)s::TIMESTAMP WITH TIME ZONE)")
INVITER_SQL = f"SELECT {columns(UserAccount)} FROM iam.user_account WHERE iam.user_account.id = %s::UUID"
INSERT_MAIL_SQL = (
    "INSERT INTO kernel.email_outbox (id, kind, to_address, subject, body_text, status, attempts, created_at, "
    "next_attempt_at) VALUES (%s::UUID, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, "
    "%s::INTEGER, %s::TIMESTAMP WITH TIME ZONE, %s::TIMESTAMP WITH TIME ZONE)")
INSERT_SEND_SQL = (
    "INSERT INTO workspace.invitation_send (workspace_id, invitation_id, sent_at, reason) "
    "VALUES (%s::UUID, %s::UUID, %s::TIMESTAMP WITH TIME ZONE, %s::VARCHAR) RETURNING workspace.invitation_send.id")
INSERT_AUDIT_SQL = (
    "INSERT INTO kernel.audit_log (occurred_at, action, actor_type, actor_id, subject_type, subject_id, scope_type, "
    "scope_id, request_id, data) VALUES (%s::TIMESTAMP WITH TIME ZONE, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, "
    "%s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::VARCHAR, %s::JSONB) RETURNING kernel.audit_log.id")


@dataclass(frozen=True)
class Context:
    user_id: uuid.UUID
    token: str
    workspace_ids: tuple[uuid.UUID, ...]
    one_off: itertools.count = field(default_factory=lambda: itertools.count(1))  # emails of the checks


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (owner,) = await register_users(client, 1, prefix="owner")
    token = await sign_in(client, owner)
    workspaces = [await create_workspace(client, token, f"Bench invitations {i}") for i in range(WORKSPACES)]
    return Context(user_id=owner.id, token=token, workspace_ids=tuple(workspaces))


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
    return {"user_id": context.user_id, "principal": principal_params(context.user_id, context.token)}


async def _one(cursor: AsyncCursor, sql: str, params: Any) -> dict[str, Any] | None:
    await cursor.execute(sql, params)
    return await cursor.fetchone()


async def baseline(cursor: AsyncCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    workspace_id = uuid.UUID(request.path.split("/")[4])  # /api/v1/workspaces/{id}/invitations
    user_id = config["user_id"]
    wanted = json.loads(request.body)
    email, role = wanted["email"].strip(), wanted.get("role", "member")
    key = normalize_email(email)
    now = datetime.now(UTC)

    await _one(cursor, PRINCIPAL_SQL, config["principal"])
    await _one(cursor, LOCK_SQL, (workspace_id,))
    workspace = await _one(cursor, WORKSPACE_SQL, (workspace_id,))
    if workspace is None or await _one(cursor, ACTIVE_MEMBERSHIP_SQL, (workspace_id, user_id, "ACTIVE")) is None:
        return BaselineAnswer(404, {"code": "WORKSPACE_NOT_FOUND"})
    if await _one(cursor, PENDING_SQL, (workspace_id, key, "PENDING")) is not None:
        return BaselineAnswer(409, {"code": "INVITATION_ALREADY_PENDING"})
    person = await _one(cursor, PERSON_SQL, (key, "deleted"))
    if person is not None and await _one(cursor, ACTIVE_MEMBERSHIP_SQL,
                                         (workspace_id, person["id"], "ACTIVE")) is not None:
        return BaselineAnswer(409, {"code": "ALREADY_MEMBER"})
    await _one(cursor, SENT_TODAY_SQL, (workspace_id, now - timedelta(days=1)))

    token = new_secret("wsi")
    invitation = {
        "id": uuid.uuid4(), "workspace_id": workspace_id, "email": email, "email_normalized": key,
        "email_normalization": EMAIL_NORMALIZATION_VERSION, "role": role, "status": "PENDING", "version": 1,
        "token_digest": digest(token), "invited_by": user_id, "created_at": now, "expires_at": now + INVITATION_TTL,
        "last_sent_at": now, "accepted_at": None, "accepted_by": None, "revoked_at": None, "revoked_by": None,
        "expired_at": None,
    }
    await cursor.execute("SAVEPOINT sa_savepoint_1")
    await cursor.execute(INSERT_INVITATION_SQL, invitation)
    await cursor.execute("RELEASE SAVEPOINT sa_savepoint_1")

    inviter = await _one(cursor, INVITER_SQL, (user_id,))
    assert inviter is not None
    body = (f"Hello,\n\n{inviter['display_name']} invited you to join the workspace \"{workspace['name']}\" on "
            f"Tenet as a {role}.\n\nAccept the invitation (sign in with this email address):\n"
            f"http://127.0.0.1:8000/invitations/accept?token={token}\n\nOr enter this invitation code in Tenet: "
            f"{token}\n\nThe invitation expires on {invitation['expires_at']:%Y-%m-%d %H:%M} UTC. "
            "If you did not expect it, you can ignore this mail.\n")
    subject = f"{inviter['display_name']} invited you to {workspace['name']} on Tenet"
    await cursor.execute(INSERT_MAIL_SQL, (uuid.uuid4(), "workspace.invitation", email, subject, body, "pending", 0,
                                           now, now))
    await _one(cursor, INSERT_SEND_SQL, (workspace_id, invitation["id"], now, "invite"))
    data = json.dumps({"role": role, "expires_at": invitation["expires_at"].isoformat()})
    await _one(cursor, INSERT_AUDIT_SQL, (now, "workspace.invitation.created", "user", str(user_id), "invitation",
                                          str(invitation["id"]), "workspace", str(workspace_id), uuid.uuid4().hex,
                                          data))

    answer = {name: invitation[name] for name in ("id", "workspace_id", "email", "role", "status", "invited_by")}
    times = {name: json_time(invitation[name]) for name in ("created_at", "expires_at", "last_sent_at")}
    return BaselineAnswer(201, {**answer, **times, "accepted_at": None, "accepted_by": None, "revoked_at": None,
                                "expired_at": None})


def describe(context: Context) -> dict[str, object]:
    return {"workspaces": len(context.workspace_ids), "inviter_id": str(context.user_id)}
