"""social_schedule_window: social_reads' third path alone, to isolate it: the items of this week's window, owned
and subscribed directly or through groups, with the caller's permission on each (SOC-INV-13) in the same
statement (`SCHEDULE_WINDOW_SQL`: owned branch on ix_schedule_items_owner_id_start_at, subscribed branches on
ix_schedule_subscriptions_subscriber_id_subject_type_status (index-only) and ix_group_members_user_id_status,
each item by primary key).

Same data, accounts, rotation over 64 tokens and baseline as social_reads (bench/scenarios/_social.py); only the
path is fixed.
"""

from __future__ import annotations

import httpx

from bench.scenario import Request
from bench.scenarios import _social
from bench.scenarios._social import SocialContext

DESCRIPTION = ("GET /api/v1/social/schedule-items in this week's window, scope all, over 64 accounts (200 owned "
               "items per account, 400 subscribed directly, about 100 through groups)")
PATHS = ("schedule_window",)
BASELINE_AUTOCOMMIT = True  # Tenet answers on its transaction-free read path
baseline = _social.baseline
baseline_config = _social.baseline_config
describe = _social.describe


async def setup(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    return await _social.load(client, database_url)


def wrk_request(context: SocialContext) -> Request:
    return _social.wrk_request(context, PATHS)


def wrk_lua(context: SocialContext) -> str:
    return _social.wrk_lua(context, PATHS)


def open_loop_series(context: SocialContext) -> dict[str, list[Request]]:
    return _social.open_loop_series(context, PATHS)


def check(client: httpx.Client, service: str, context: SocialContext) -> None:
    _social.check(client, service, context, PATHS)
