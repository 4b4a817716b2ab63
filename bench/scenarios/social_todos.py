"""social_todos: social_reads' second path alone, to isolate it: pending todos by due date (those without one
last), one range scan of the partial expression index `ix_todos_pending_due` (`TODOS_PENDING_SQL`).

Same data, accounts, rotation over 64 tokens and baseline as social_reads (bench/scenarios/_social.py); only the
path is fixed.
"""

from __future__ import annotations

import httpx

from bench.scenario import Request
from bench.scenarios import _social
from bench.scenarios._social import SocialContext

DESCRIPTION = ("GET /api/v1/social/todos?status=pending&limit=50 (by due date) over 64 accounts "
               "(300 todos per account, 120 pending)")
PATHS = ("todos",)
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
