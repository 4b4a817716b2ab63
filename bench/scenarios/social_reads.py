"""social_reads: the three core read paths of spec 000 in one load, as a client mix: the pending inbox, pending
todos by due date, and the schedule items of this week's window including subscribed ones (issue 9).

    GET /api/v1/social/inbox?status=pending&limit=50
    GET /api/v1/social/todos?status=pending&limit=50
    GET /api/v1/social/schedule-items?from=<Monday>&to=<Monday + 7 d>&scope=all&limit=50

The requests take turns over the three paths and over 64 accounts, each with its own token (so neither side
serves one account's rows from a warm cache line, and Tenet's token cache holds 64 entries, as with real
clients). Data: BENCH_SOCIAL_USERS accounts with issue 9's typical data (50 friends, 5 groups, 200 schedule
items shared with friends and groups, 500 inbox messages, 300 todos, 3 automations each); see
bench/scenarios/_social.py for the generator, its timings and how it scales to 100k accounts.

What Tenet does per request (src/tenet/social/api/, queries.py): verify the JWT (cached), load the principal on
the transaction-free read path, then one statement (`INBOX_PENDING_SQL`, `TODOS_PENDING_SQL` or
`SCHEDULE_WINDOW_SQL`) and answer the page pre-serialised. The baseline runs the same two statements for the same
account, also without a transaction, with the statement built by Tenet's query functions, and answers the page.
Spec 000 asks P95 < 150 ms per read; issue 9 asks for far below that and at least half the baseline's
requests/s.
"""

from __future__ import annotations

import httpx

from bench.scenario import Request
from bench.scenarios import _social
from bench.scenarios._social import SocialContext

DESCRIPTION = ("GET inbox (pending), todos (pending, by due date) and schedule items (week window, scope all) in "
               f"turn, over 64 accounts of {_social.USERS:,} with issue 9's typical data")
PATHS = ("inbox", "todos", "schedule_window")
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
