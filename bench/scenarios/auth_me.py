"""auth_me: `GET /api/v1/auth/me` with a bearer token.

What Tenet does for it (src/tenet/iam/auth.py, api.py, queries.py): verify the JWT (cached per token), then
load the principal on the transaction-free read path (`USER_PRINCIPAL_SQL`: the active account at the
token's epoch with the profile columns /me shows, its roles and their permissions, unless the sign-in was
revoked) and answer `MeRead` from it. The baseline runs the same statement, in a transaction, for the same
user.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx

from bench.loading import register_users, sign_in
from bench.scenario import Request, Statement
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params

DESCRIPTION = "GET /api/v1/auth/me with a bearer token (token check + the account's rows)"
# Enough accounts that the lookups are index probes into a real table, not a scan of a handful of rows.
USERS = 1000


@dataclass(frozen=True)
class Context:
    user_id: uuid.UUID
    token: str
    users: int


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    users = await register_users(client, USERS)
    me = users[len(users) // 2]  # one from the middle of the table, not the first row inserted
    return Context(user_id=me.id, token=await sign_in(client, me), users=len(users))


def wrk_request(context: Context) -> Request:
    return Request(path="/api/v1/auth/me", headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: Context) -> list[Statement]:
    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token))]


def describe(context: Context) -> dict[str, object]:
    return {"registered_users": context.users, "measured_user_id": str(context.user_id)}
