"""social_inbox: social_reads' first path alone, to isolate it: the pending inbox, newest first, one range scan
of the partial index `ix_inbox_messages_pending` (`INBOX_PENDING_SQL`).

Same data, accounts, rotation over 64 tokens and baseline as social_reads (bench/scenarios/_social.py); only the
path is fixed.
"""

from __future__ import annotations

import httpx

from bench.scenario import Request
from bench.scenarios import _social
from bench.scenarios._social import SocialContext

DESCRIPTION = ("GET /api/v1/social/inbox?status=pending&limit=50 over 64 accounts "
               "(500 messages per account, 60 pending)")
PATHS = ("inbox",)
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
