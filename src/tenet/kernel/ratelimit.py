"""Rate limits counted in the database, so every API process sees the same count.

Fixed windows: a bucket's hits are counted per window of the rate's length, aligned to the Unix epoch.
Each hit is one upsert in its own short transaction, committed whatever the request's outcome (a
failed sign-in must count even though its request answers 401).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert

from tenet.db.database import Database
from tenet.kernel.errors import RateLimited
from tenet.kernel.models import RateLimitCounter
from tenet.settings import Rate

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


class RateLimiter:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def hit(self, bucket: str, rate: Rate, now: datetime) -> Window:
        """Count one event; answer the window with the new count."""
        start = _window_start(now, rate.window)
        table = RateLimitCounter.__table__
        statement = (
            insert(table)
            .values(bucket=bucket, window_start=start, hits=1, expires_at=start + rate.window)
            .on_conflict_do_update(index_elements=[table.c.bucket, table.c.window_start],
                                   set_={"hits": table.c.hits + 1})
            .returning(table.c.hits)
        )
        async with self.db.unit_of_work() as session:
            hits = (await session.execute(statement)).scalar_one()
        return Window(start, start + rate.window, hits)

    async def reset(self, bucket: str, rate: Rate, now: datetime) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(
                text("DELETE FROM kernel.rate_limit_counter WHERE bucket = :bucket AND window_start = :start"),
                {"bucket": bucket, "start": _window_start(now, rate.window)},
            )

    async def check(self, buckets: list[str], rate: Rate, now: datetime, what: str) -> dict[str, int]:
        """Raise 429 when any bucket has already reached its limit in the current window; else answer the
        hits so far per bucket (one query for all of them)."""
        start = _window_start(now, rate.window)
        async with self.db.read_only() as session:
            rows = await session.execute(
                select(RateLimitCounter.bucket, RateLimitCounter.hits)
                .where(RateLimitCounter.bucket.in_(buckets), RateLimitCounter.window_start == start)
            )
            hits = {bucket: 0 for bucket in buckets} | {bucket: count for bucket, count in rows}
        if max(hits.values(), default=0) >= rate.limit:
            window = Window(start, start + rate.window, max(hits.values()))
            raise RateLimited(f"Too many {what}; try again later", retry_after_seconds=window.retry_after(now))
        return hits

    async def consume(self, bucket: str, rate: Rate, now: datetime, what: str) -> None:
        """Count this event and raise 429 when it goes over the limit."""
        window = await self.hit(bucket, rate, now)
        if window.hits > rate.limit:
            raise RateLimited(f"Too many {what}; try again later", retry_after_seconds=window.retry_after(now))


async def purge_expired(db: Database, now: datetime) -> int:
    async with db.unit_of_work() as session:
        result = await session.execute(text("DELETE FROM kernel.rate_limit_counter WHERE expires_at <= :now"),
                                       {"now": now})
        return result.rowcount or 0
