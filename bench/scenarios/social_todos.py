"""social_todos: `GET /api/v1/social/todos?status=pending&limit=50`, pending todos by due date (those without one
last), the third hot read of spec 000.

What Tenet does (api.py list_todos, queries.py todos): the principal, then `TODOS_PENDING_SQL` (one range scan
of the partial expression index `ix_todos_pending_due`). The baseline runs the same two statements.
"""

from __future__ import annotations

from dataclasses import asdict

import httpx

from bench.scenario import Request, Statement
from bench.scenarios._social import SocialContext, load
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.social import queries

DESCRIPTION = "GET /api/v1/social/todos?status=pending&limit=50 (300 todos per user, 120 pending)"
PAGE = 50


async def setup(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    return await load(client, database_url)


def wrk_request(context: SocialContext) -> Request:
    return Request(path=f"/api/v1/social/todos?status=pending&limit={PAGE}",
                   headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: SocialContext) -> list[Statement]:
    from datetime import timedelta

    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token)),
            Statement(queries.TODOS_PENDING_SQL.format(after="TRUE"),
                      {"me": context.user_id, "due_before": queries.NO_DUE + timedelta(seconds=1),
                       "limit": PAGE + 1})]


def check(client: httpx.Client, service: str, context: SocialContext) -> None:
    if service != "tenet":
        return
    page = client.get(wrk_request(context).path).json()
    dues = [item["due_at"] for item in page["items"]]
    if len(dues) != PAGE or dues != sorted(dues):
        raise SystemExit(f"{service}: expected a full page of pending todos by due date")


def describe(context: SocialContext) -> dict[str, object]:
    return {**{k: v for k, v in asdict(context).items() if k != "token"}, "user_id": str(context.user_id)}
