"""Rate limits counted in the database, so every API process sees the same count.

Fixed windows: a bucket's hits are counted per window of the rate's length, aligned to the Unix epoch.
Every check *counts first*, in one statement, and decides on what that statement answers: there is no
"read the count, then increment it" gap in which twenty parallel requests all see room for one more.

- `attempt` (failed sign-ins): takes a slot in every bucket at once, only while each is under its limit;
  a bucket at its limit refuses and nothing further happens (the password is never checked). A success
  gives the account's slots back (`reset`). `attempting` wraps the check: when it cannot reach a verdict
  (the database is unreachable), the slots are given back, so our outage never locks anyone out.
- `slot` (workspace creations, invitation mails): takes a slot the same way before the command runs and
  gives it back when the command fails, so only what happened is counted. The counter row is locked only
  for its own one-statement transaction: a limit per account must not serialise that account's commands
  (counting inside the command's transaction held the row lock to commit, and one sender's invitations to
  64 workspaces queued behind each other).
- `consume` (registrations, guest check-ins): counts the event and refuses it when it went over the limit;
  optionally only when a condition holds in the same statement (the meeting exists).
- `consume_in` counts inside the caller's unit of work, when the event must be counted exactly with it
  and serialising the bucket's events is acceptable.

Standalone checks use one short transaction each, so the counting never holds a connection while the
request does something slow (argon2, SMTP).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.errors import DomainError, RateLimited
from tenet.kernel.settings import Rate
from tenet.kernel.statements import statements

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
log = logging.getLogger(__name__)

LimitError = Callable[[int], DomainError]


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    hits: int

    def retry_after(self, now: datetime) -> int:
        return max(1, int((self.end - now).total_seconds() + 0.999))


def _window_start(now: datetime, window: timedelta) -> datetime:
    size = window.total_seconds()
    elapsed = (now - _EPOCH).total_seconds()
    return _EPOCH + timedelta(seconds=elapsed - elapsed % size)


def _rate_limited(what: str) -> LimitError:
    return lambda retry_after: RateLimited(f"Too many {what}; try again later", retry_after_seconds=retry_after)


# One statement on an autocommit connection (tenet.kernel.reads): the counter rows are locked only while
# it runs, so concurrent attempts on one bucket do not queue behind a transaction's round trips. A bucket
# already at its limit stops the whole attempt: counting the others anyway wrote a row per made-up name and
# spent a victim account's slots from an address that was itself refused.
_COUNT_UNDER_LIMIT = """
    INSERT INTO kernel.rate_limit_counter (bucket, window_start, hits, expires_at)
    SELECT bucket, %(start)s, 1, %(expires)s FROM unnest(%(buckets)s::text[]) AS bucket
     WHERE NOT EXISTS (SELECT 1 FROM kernel.rate_limit_counter c
                        WHERE c.bucket = ANY(%(buckets)s::text[]) AND c.window_start = %(start)s
                          AND c.hits >= %(limit)s)
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = kernel.rate_limit_counter.hits + 1
     WHERE kernel.rate_limit_counter.hits < %(limit)s
    RETURNING bucket
"""


@dataclass(frozen=True)
class Condition:
    """What must hold for `consume` to count, as SQL (a module constant of its domain, psycopg placeholders) with
    its parameters; checked in the counting statement itself."""

    sql: str
    params: Mapping[str, Any]


_ALWAYS = Condition("true", {})
# The event counted (only when the condition holds, in the same statement): the hits of the window, or no row.
_COUNT_IF = """
    INSERT INTO kernel.rate_limit_counter (bucket, window_start, hits, expires_at)
    SELECT %(bucket)s, %(start)s, 1, %(expires)s WHERE {condition}
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = kernel.rate_limit_counter.hits + 1
    RETURNING hits
"""
_RELEASE = """
    WITH released AS (
        UPDATE kernel.rate_limit_counter SET hits = hits - 1
         WHERE bucket = ANY(%(buckets)s::text[]) AND window_start = %(start)s AND hits > 1 RETURNING bucket)
    DELETE FROM kernel.rate_limit_counter
     WHERE bucket = ANY(%(buckets)s::text[]) AND window_start = %(start)s AND hits <= 1
       AND bucket NOT IN (SELECT bucket FROM released)
    RETURNING 1
"""


async def consume_in(session: AsyncSession, bucket: str, rate: Rate, now: datetime, *,
                     error: LimitError | None = None, what: str = "requests") -> Window:
    """Count one event of `bucket` in the caller's transaction; raise (429) when it goes over the limit."""
    start = _window_start(now, rate.window)
    counted = await (await statements(session)).one(_COUNT_IF.format(condition=_ALWAYS.sql), {
        "bucket": bucket, "start": start, "expires": start + rate.window})
    assert counted is not None  # counted unconditionally: the statement always answers its row
    window = Window(start, start + rate.window, int(counted["hits"]))
    if window.hits > rate.limit:
        raise (error or _rate_limited(what))(window.retry_after(now))
    return window


class RateLimiter:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def attempt(self, buckets: Sequence[str], rate: Rate, now: datetime, what: str, *,
                      error: LimitError | None = None) -> None:
        """Take one slot in every bucket, in one statement, only while each is under `rate`; raise 429 when
        any is at its limit. At most `rate.limit` attempts per bucket and window ever get past this."""
        start = _window_start(now, rate.window)
        rows = await self.db.reads.write_one(_COUNT_UNDER_LIMIT, {
            "buckets": list(buckets), "start": start, "expires": start + rate.window, "limit": rate.limit})
        counted = {row["bucket"] for row in rows}
        if not set(buckets) <= counted:
            window = Window(start, start + rate.window, rate.limit)
            raise (error or _rate_limited(what))(window.retry_after(now))

    @asynccontextmanager
    async def slot(self, bucket: str, rate: Rate, now: datetime, what: str, *,
                   error: LimitError | None = None) -> AsyncIterator[None]:
        """Take a slot of `bucket` for the command run inside the block (429 when none is left); give it back
        when the block raises. The slot's count is committed on its own, before the command."""
        await self.attempt([bucket], rate, now, what, error=error)
        try:
            yield
        except BaseException:
            await self._give_back([bucket], rate, now)
            raise

    @asynccontextmanager
    async def attempting(self, buckets: Sequence[str], rate: Rate, now: datetime, what: str, *,
                         error: LimitError | None = None) -> AsyncIterator[None]:
        """`attempt` for a check run inside the block (a password): the slots stay taken when the block
        reaches a verdict — it returns, or refuses with a 4xx `DomainError` (a wrong password counts) — and
        are given back when the check could not happen: the database was unreachable (503), or anything
        else went wrong. An outage of ours must not count against the account or the address."""
        await self.attempt(buckets, rate, now, what, error=error)
        try:
            yield
        except DomainError as exc:
            if exc.status >= 500:
                await self._give_back(buckets, rate, now)
            raise
        except BaseException:
            await self._give_back(buckets, rate, now)
            raise

    async def _give_back(self, buckets: Sequence[str], rate: Rate, now: datetime) -> None:
        try:
            await self.db.reads.write_one(_RELEASE, {"buckets": list(buckets),
                                                     "start": _window_start(now, rate.window)})
        except Exception:  # the database is away: the slots stay taken until their window ends
            log.warning("could not give back rate-limit slots of %s", ", ".join(buckets), exc_info=True)

    async def consume(self, bucket: str, rate: Rate, now: datetime, what: str, *,
                      error: LimitError | None = None, only_if: Condition | None = None) -> Window | None:
        """Count this event (one statement on an autocommit connection, like `attempt`) and raise 429 when it
        goes over the limit.

        With `only_if`, the event is counted only when that condition holds in the same statement, and None
        answers that it did not (nothing was written): an anonymous caller naming things that do not exist
        must not write a row per name."""
        start = _window_start(now, rate.window)
        condition = only_if or _ALWAYS
        rows = await self.db.reads.write_one(_COUNT_IF.format(condition=condition.sql), {
            **condition.params, "bucket": bucket, "start": start, "expires": start + rate.window})
        if not rows:
            return None
        window = Window(start, start + rate.window, int(rows[0]["hits"]))
        if window.hits > rate.limit:
            raise (error or _rate_limited(what))(window.retry_after(now))
        return window

    async def reset(self, bucket: str, rate: Rate, now: datetime) -> None:
        async with self.db.unit_of_work() as session:
            await reset_in(session, bucket, rate, now)


async def reset_in(session: AsyncSession, bucket: str, rate: Rate, now: datetime) -> None:
    """Forget the bucket's count of the current window (in the caller's transaction)."""
    await session.execute(
        text("DELETE FROM kernel.rate_limit_counter WHERE bucket = :bucket AND window_start = :start"),
        {"bucket": bucket, "start": _window_start(now, rate.window)},
    )


async def release_in(session: AsyncSession, bucket: str, rate: Rate, now: datetime) -> None:
    """Give back one slot of the bucket's current window (an attempt that turned out not to count)."""
    params = {"bucket": bucket, "start": _window_start(now, rate.window)}
    await session.execute(text("DELETE FROM kernel.rate_limit_counter "
                               "WHERE bucket = :bucket AND window_start = :start AND hits <= 1"), params)
    await session.execute(text("UPDATE kernel.rate_limit_counter SET hits = hits - 1 "
                               "WHERE bucket = :bucket AND window_start = :start AND hits > 1"), params)


async def purge_expired(db: Database, now: datetime) -> int:
    async with db.unit_of_work() as session:
        result = await session.execute(text("DELETE FROM kernel.rate_limit_counter WHERE expires_at <= :now"),
                                       {"now": now})
        return int(getattr(result, "rowcount", 0) or 0)
