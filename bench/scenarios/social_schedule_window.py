"""social_schedule_window: `GET /api/v1/social/schedule-items?from=<Mon>&to=<Mon+7d>&scope=all&limit=50`, the
hot read of spec 000's items: owned items and those subscribed directly or through groups, in a window, with
the caller's permission on each (SOC-INV-13's precedence) in the same statement.

What Tenet does (api.py list_items, queries.py window): the principal, then `SCHEDULE_WINDOW_SQL` (owned branch
on ix_schedule_items_owner_id_start_at, subscribed branches on ix_schedule_subscriptions_subscriber_id_status,
group branch on ix_group_members_user_id_status). The baseline runs the same two statements.
"""

from __future__ import annotations

from dataclasses import asdict

import httpx

from bench.scenario import Request, Statement
from bench.scenarios._social import SocialContext, load, week
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.social import queries

DESCRIPTION = ("GET /api/v1/social/schedule-items in a one-week window, scope all (200 owned items per user, "
               "each subscribed by 2 others)")
PAGE = 50


async def setup(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    return await load(client, database_url)


def _window() -> tuple[str, str]:
    start, end = week()
    return start.isoformat().replace("+00:00", "Z"), end.isoformat().replace("+00:00", "Z")


def wrk_request(context: SocialContext) -> Request:
    start, end = _window()
    return Request(path=f"/api/v1/social/schedule-items?from={start}&to={end}&scope=all&limit={PAGE}",
                   headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: SocialContext) -> list[Statement]:
    start, end = week()
    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token)),
            Statement(queries.window_sql(scope="all", status=None, after="TRUE"),
                      {"me": context.user_id, "from": start, "to": end, "status": None, "limit": PAGE + 1})]


def check(client: httpx.Client, service: str, context: SocialContext) -> None:
    if service != "tenet":
        return
    page = client.get(wrk_request(context).path).json()
    if not page["items"]:
        raise SystemExit(f"{service}: the window holds no item")


def describe(context: SocialContext) -> dict[str, object]:
    return {**{k: v for k, v in asdict(context).items() if k != "token"}, "user_id": str(context.user_id)}
