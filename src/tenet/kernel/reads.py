"""The transaction-free read path: statements on autocommit connections from a pool of their own.

Writes run in the unit of work (one transaction, committed at the boundary). A read that needs no snapshot
across statements does not need a transaction at all: on an autocommit connection a one-statement read is
one round trip (no BEGIN, no COMMIT, no pre-ping), and each statement sees everything committed before it
started (READ COMMITTED's per-statement snapshot). Every domain's GET routes use this path; the rule of
which reads may (docs/decisions.md, "The read path"): a route may use it when each statement is
self-consistent on its own — one statement per answer, or statements whose results need not agree with
each other (a page, then the names of its rows). A read that must see several statements at one moment
uses a unit of work instead.

Statements are SQL text with psycopg's named placeholders (`%(id)s`); rows come back as dicts. Hot reads
are written as one statement on purpose: the read path makes the round trips visible.

A read is safe to repeat, so a statement that fails because its connection broke (the server restarted,
the connection was killed) is retried once on a fresh connection; when that fails too, or no connection
can be had in time, the caller gets 503 SERVICE_UNAVAILABLE with Retry-After, never a 500. While the process
knows the database to be down (tenet.kernel.availability) a read is refused at once, before the pool is asked.

The same path runs a *one-statement write* that needs no transaction around it (`write_one`: a rate-limit
counter's upsert): on an autocommit connection its row lock lasts only as long as the statement, where a
unit of work would hold it across three round trips (BEGIN, statement, COMMIT) and queue every request of
the same key behind it. A write is never retried (it may have run before its connection broke), but the pool's
idle connections are checked as for a read, so the next request does not meet another dead one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection as SqlAlchemyConnection

from tenet.kernel.availability import Availability, database_unavailable
from tenet.kernel.errors import ServiceUnavailable
from tenet.kernel.metrics import observe_checkout, observe_checkout_timeout
from tenet.kernel.plans import prepare_flag

log = logging.getLogger(__name__)

Row = dict[str, Any]
Params = Mapping[str, Any] | None




class Runner(Protocol):
    """Runs a statement and answers its rows: the read path (`Reads`) and a unit of work's statements
    (`kernel.statements.Statements`) both are one. A query function takes a Runner first, so a command
    re-reads its answer through the same function its GET uses, inside its own transaction."""

    async def all(self, sql: str, params: Params = None) -> list[Row]: ...

    async def one(self, sql: str, params: Params = None) -> Row | None: ...

    async def value(self, sql: str, params: Params = None) -> Any: ...


class Reads(Protocol):
    """What a read handler may do: run a statement and take its rows."""

    async def all(self, sql: str, params: Params = None) -> list[Row]: ...

    async def one(self, sql: str, params: Params = None) -> Row | None: ...

    async def value(self, sql: str, params: Params = None) -> Any: ...

    async def write_one(self, sql: str, params: Params = None) -> list[Row]: ...


def _reporting_connection(availability: Availability | None) -> type[psycopg.AsyncConnection[Any]]:
    """The read pool's connection class: a failed connection attempt of the pool (made in its background, where
    no request sees it) tells the process's `Availability`, so an outage is known at the first one."""
    if availability is None:
        return psycopg.AsyncConnection
    reported = availability

    class ReportingConnection(psycopg.AsyncConnection[Any]):
        @classmethod
        async def connect(cls, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super().connect(*args, **kwargs)
            except psycopg.OperationalError as exc:
                reported.report(exc)
                raise

    return ReportingConnection


def _no_idle_connection(pool: AsyncConnectionPool[Any]) -> bool:
    """Whether a checkout now has to wait (for a connection to open or to come back): psycopg's own measure."""
    return pool.get_stats().get("pool_available", 0) == 0


class PooledReads:
    """Production: a psycopg pool of autocommit connections, separate from the unit of work's pool."""

    def __init__(self, conninfo: str, *, size: int, timeout: float, availability: Availability | None = None,
                 application_name: str = "tenet-read", connect_timeout: int | None = None, prepare: bool = True,
                 retry_broken: bool = True, metrics_label: str = "read") -> None:
        self._conninfo = conninfo
        self._metrics_label = metrics_label  # `pool` of its checkouts in tenet.kernel.metrics
        self._size = size
        self._timeout = timeout
        self._availability = availability
        # False for a standby's pool: a broken connection there sends the read to the primary at once
        # (tenet.kernel.replica) instead of waiting for the standby to give a fresh one.
        self._retry_broken = retry_broken
        self._kwargs: dict[str, Any] = {"autocommit": True, "application_name": application_name}
        if connect_timeout is not None:
            self._kwargs["connect_timeout"] = connect_timeout
        if not prepare:
            # Behind a transaction pooler (TENET_DATABASE_PGBOUNCER) a statement prepared on one server
            # connection is unknown to the next: never prepare on the server.
            self._kwargs["prepare_threshold"] = None
        self.pool = self._new_pool()
        self._opened = False
        if availability is not None:
            availability.on_down(self._drop_pool)

    def _new_pool(self) -> AsyncConnectionPool[Any]:
        # Grows on demand up to `size` and shrinks back when idle (psycopg's max_idle), so an idle process
        # does not sit on connections the server's max_connections has to count.
        return AsyncConnectionPool(
            self._conninfo, min_size=min(2, self._size), max_size=self._size, timeout=self._timeout, open=False,
            kwargs=self._kwargs, connection_class=_reporting_connection(self._availability), name="tenet-read",
        )

    async def _drop_pool(self) -> None:
        # The database is down: closing the pool answers its waiting requests at once (PoolClosed) and stops
        # its reconnection attempts, whose backoff would otherwise outlast the outage; the first request after
        # the probe reopened the service opens a fresh pool.
        pool, self.pool, self._opened = self.pool, self._new_pool(), False
        await pool.close(timeout=1.0)

    async def reset(self) -> None:
        """Close the pool now (its waiting requests are answered at once); the next use opens a fresh one."""
        await self._drop_pool()

    async def open(self) -> None:
        # Do not wait for the connections: the service starts (and /readyz answers 503) while the
        # database is still coming up.
        if not self._opened:
            self._opened = True
            await self.pool.open(wait=False)

    async def close(self) -> None:
        await self.pool.close()

    async def _broken(self) -> None:
        """A statement lost its connection: 503 now when a probe says the database is gone, else go on."""
        if self._availability is not None and not await self._availability.confirm():
            raise database_unavailable() from None

    async def _ready(self) -> AsyncConnectionPool[Any]:
        """The pool to take a connection from: 503 at once while the database is known to be down."""
        if self._availability is not None:
            self._availability.check()
        if not self._opened:
            await self.open()
        return self.pool

    def _no_connection(self, started: float, path: str) -> ServiceUnavailable:
        """The answer when the pool gave no connection within its timeout (and the availability told)."""
        observe_checkout_timeout(self._metrics_label, started)
        log.warning("%s: no connection within the pool timeout", path)
        if self._availability is not None:
            self._availability.suspect()
        return database_unavailable()

    async def _execute(self, sql: str, params: Params, fetch: str, *, retry: bool = True) -> Any:
        for attempt in (1, 2):
            pool = await self._ready()
            connection: psycopg.AsyncConnection[Any] | None = None
            started, waited = time.perf_counter(), _no_idle_connection(pool)
            try:
                async with pool.connection() as connection:
                    observe_checkout(self._metrics_label, started, waited=waited)
                    async with connection.cursor(row_factory=dict_row) as cursor:
                        await cursor.execute(sql, params, prepare=prepare_flag(sql))
                        if fetch == "all":
                            return await cursor.fetchall()
                        return await cursor.fetchone()
            except PoolTimeout:
                raise self._no_connection(started, "read path") from None
            except PoolClosed:
                # Closed under the request because the database went down (`_drop_pool`).
                raise database_unavailable() from None
            except psycopg.OperationalError:
                broken = connection is None or connection.broken or connection.closed
                if not broken:
                    raise  # a statement error (timeout, cancel) on a healthy connection: not ours to retry
                if attempt == 2 or not self._retry_broken:
                    log.warning("read path: the database is unreachable")
                    raise database_unavailable() from None
                await self._broken()
                # The pool discards the broken connection when it comes back. The others were likely broken by
                # the same event (a server restart kills them all): check the idle ones (replacing the dead)
                # so the retry, or the next request, really runs on a fresh connection.
                with suppress(PoolClosed):  # closed meanwhile: the database went down (`_drop_pool`)
                    await pool.check()
                if not retry:
                    # A write is not repeated: it may have run before its connection broke.
                    log.warning("read path: a one-statement write lost its connection; not repeated")
                    raise database_unavailable() from None
                log.info("read path: retrying on a fresh connection after a broken one")
        raise AssertionError("unreachable")

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        rows: list[Row] = await self._execute(sql, params, "all")
        return rows

    async def one(self, sql: str, params: Params = None) -> Row | None:
        row: Row | None = await self._execute(sql, params, "one")
        return row

    async def value(self, sql: str, params: Params = None) -> Any:
        row = await self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    async def write_one(self, sql: str, params: Params = None) -> list[Row]:
        rows: list[Row] = await self._execute(sql, params, "all", retry=False)
        return rows

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection inside BEGIN ... COMMIT (ROLLBACK when the body raises): the plain unit of work's
        (tenet.db.database.Database.transaction). The same answers as a read when the database is out of reach
        (503, the availability told); a connection found dead at BEGIN is replaced once, as nothing has run on
        it yet, but a transaction that lost its connection later is never repeated."""
        for attempt in (1, 2):
            pool = await self._ready()
            started, waited = time.perf_counter(), _no_idle_connection(pool)
            connection: psycopg.AsyncConnection[Any] | None = None
            began = False
            try:
                async with pool.connection() as connection:
                    observe_checkout(self._metrics_label, started, waited=waited)
                    async with connection.transaction():
                        began = True
                        yield connection
                return
            except PoolTimeout:
                raise self._no_connection(started, "plain unit of work") from None
            except PoolClosed:
                raise database_unavailable() from None  # closed under the request: the database went down
            except psycopg.OperationalError:
                if connection is not None and not (connection.broken or connection.closed):
                    raise  # a statement's own error (a deadlock, a timeout): the caller's to answer
                if began or attempt == 2:
                    log.warning("plain unit of work: the database connection was lost; not repeated")
                    raise database_unavailable() from None
                await self._broken()
                with suppress(PoolClosed):
                    await pool.check()
        raise AssertionError("unreachable")


class BoundReads:
    """Tests: reads run on the one connection the test's transaction lives on (rolled back at the end), so
    they see what the test wrote without committing it."""

    def __init__(self, connection: SqlAlchemyConnection) -> None:
        self._connection = connection

    async def _cursor_run(self, sql: str, params: Params, fetch: str) -> Any:
        raw = await self._connection.get_raw_connection()
        driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
        async with driver.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return await (cursor.fetchall() if fetch == "all" else cursor.fetchone())

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        rows: list[Row] = await self._cursor_run(sql, params, "all")
        return rows

    async def one(self, sql: str, params: Params = None) -> Row | None:
        row: Row | None = await self._cursor_run(sql, params, "one")
        return row

    async def value(self, sql: str, params: Params = None) -> Any:
        row = await self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    async def write_one(self, sql: str, params: Params = None) -> list[Row]:
        rows: list[Row] = await self._cursor_run(sql, params, "all")
        return rows
