"""social_inbox: `GET /api/v1/social/inbox?status=pending&limit=50`, the hot read of spec 000's inbox.

What Tenet does (src/tenet/social/api.py list_inbox, queries.py inbox): verify the JWT (cached), load the
principal on the read path, then one statement (`INBOX_PENDING_SQL`: one range scan of the partial index
`ix_inbox_messages_pending`) and answer the page pre-serialised. The baseline runs the same two statements.
"""

from __future__ import annotations

from dataclasses import asdict

import httpx

from bench.scenario import Request, Statement
from bench.scenarios._social import SocialContext, load
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.social import queries

DESCRIPTION = "GET /api/v1/social/inbox?status=pending&limit=50 (500 messages per user, 60 pending)"
PAGE = 50


async def setup(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    return await load(client, database_url)


def wrk_request(context: SocialContext) -> Request:
    return Request(path=f"/api/v1/social/inbox?status=pending&limit={PAGE}",
                   headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: SocialContext) -> list[Statement]:
    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token)),
            Statement(queries.INBOX_PENDING_SQL.format(after="TRUE"),
                      {"me": context.user_id, "statuses": ["pending"], "kind": None, "limit": PAGE + 1})]


def check(client: httpx.Client, service: str, context: SocialContext) -> None:
    if service != "tenet":
        return
    page = client.get(wrk_request(context).path).json()
    if len(page["items"]) != PAGE or page["next_cursor"] is None:
        raise SystemExit(f"{service}: expected a full first page of pending messages, got {len(page['items'])}")


def describe(context: SocialContext) -> dict[str, object]:
    return {**{k: v for k, v in asdict(context).items() if k != "token"}, "user_id": str(context.user_id)}
