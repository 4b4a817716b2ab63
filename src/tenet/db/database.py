"""The database handle every boundary uses: an engine, and units of work that commit exactly once.

Only boundaries (the request dependency, the worker task wrapper, the CLI) open a unit of work. Services
receive its session, may `flush()`, and never commit. Work that must happen only if the transaction
commits (sending mail, waking a worker) is registered with `after_commit` and dropped on rollback.
"""

from __future__ import annotations

import logging
import math
import select
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from tenet.kernel.availability import Availability
from tenet.kernel.metrics import timed_pool_class
from tenet.kernel.reads import BoundReads, PooledReads, Reads
from tenet.kernel.replica import MONITOR_TIMEOUT, ReplicaReads, note_commit
from tenet.kernel.settings import POSTGRESQL_URL_PREFIXES, KernelSettings
from tenet.kernel.statements import Statements, Unit

log = logging.getLogger(__name__)

AfterCommit = Callable[[], Awaitable[Any]]
_AFTER_COMMIT = "tenet.after_commit"


def after_commit(session: Unit, callback: AfterCommit) -> None:
    """Run `callback` once the session's unit of work has committed; never if it rolls back."""
    session.info.setdefault(_AFTER_COMMIT, []).append(callback)


async def _run_after_commit(callbacks: list[AfterCommit]) -> None:
    for callback in callbacks:
        try:
            await callback()
        except Exception:
            # The transaction is already durable; an after-commit step is best effort and has
            # its own retry (the outbox sweep, periodic jobs).
            log.exception("after-commit step failed")


def async_url(url: str) -> str:
    """SQLAlchemy URL for psycopg 3 from any `postgresql://` form a user may give."""
    for prefix in POSTGRESQL_URL_PREFIXES:
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise ValueError(f"DATABASE_URL must be a PostgreSQL URL, got {url.split(':', 1)[0]}://...")


def libpq_url(url: str) -> str:
    """Plain libpq URL (for psycopg, procrastinate) from any SQLAlchemy or libpq form."""
    return "postgresql://" + async_url(url)[len("postgresql+psycopg://"):]


# SQLSTATE classes of a server that refused the connection itself: connection exceptions, authentication,
# an unknown database, a server shutting down or starting up, too many connections.
_REFUSED_CONNECTION = ("08", "28", "3D", "57P", "53300")


def database_location(url: str) -> str:
    """`host:port` of a database URL (a Unix socket's directory as it is), never its user or password."""
    try:
        parts = conninfo_to_dict(libpq_url(url))
    except (psycopg.ProgrammingError, ValueError):
        return "the configured address"
    host = str(parts.get("host") or "localhost")
    if host.startswith("/"):
        return f"{host} (Unix socket)"
    return f"{host}:{parts.get('port') or 5432}"


def connection_failure(exc: BaseException, url: str | None = None) -> str | None:
    """Why the database could not be reached, when `exc` (or an error it wraps: SQLAlchemy's, procrastinate's)
    is a failure to connect or a lost connection; None for any other error, a statement's included. The
    reason is libpq's own first line, which names no password (one in `url` is masked all the same)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.OperationalError):
            if current.sqlstate is not None and not current.sqlstate.startswith(_REFUSED_CONNECTION):
                return None
            lines = str(current).strip().splitlines()
            reason = lines[0] if lines else type(current).__name__
            reason = reason.rsplit(" failed: ", 1)[-1].removeprefix("FATAL:").strip() or type(current).__name__
            password = conninfo_to_dict(libpq_url(url)).get("password") if url else None
            return reason.replace(str(password), "***") if password else reason
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return None


def connect_timeout(url: str, pool_timeout: float) -> int | None:
    """libpq's connect_timeout for a pool's connections: no longer than its checkout timeout (a server that
    does not answer at all would otherwise hold a connection attempt for psycopg's default of 130 s), unless
    the URL sets its own."""
    try:
        if conninfo_to_dict(libpq_url(url)).get("connect_timeout"):
            return None
    except (psycopg.ProgrammingError, ValueError):
        return None
    return max(2, math.ceil(pool_timeout))  # libpq treats 1 as 2


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 10, pool_timeout: float = 10.0,
                application_name: str = "tenet", prepare: bool = True, pool_label: str = "write") -> AsyncEngine:
    """An engine on psycopg 3 whose pool's checkouts are timed under `pool=pool_label` (tenet.kernel.metrics)."""
    connect_args: dict[str, Any] = {"application_name": application_name}
    if not prepare:
        # Behind PgBouncer in transaction mode (TENET_DATABASE_PGBOUNCER) consecutive transactions of one
        # connection run on different server connections: a statement psycopg prepared on one is missing on the
        # next ("prepared statement _pg3_0 does not exist") or already there from another client.
        connect_args["prepare_threshold"] = None
    if (timeout := connect_timeout(url, pool_timeout)) is not None:
        connect_args["connect_timeout"] = timeout
    engine = create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=pool_timeout,
        poolclass=timed_pool_class(pool_label),
        # A restarted database leaves dead connections in the pool. SQLAlchemy's pre-ping would find them
        # with a `SELECT 1` on every checkout (a round trip per unit of work, about a tenth of a hot write's
        # cost: bench/invitation_create); `refuse_dead_connection` finds them without one.
        pool_pre_ping=False,
        connect_args=connect_args,
    )
    event.listen(engine.sync_engine.pool, "checkout", refuse_dead_connection)
    return engine


def refuse_dead_connection(dbapi_connection: Any, connection_record: Any, connection_proxy: Any) -> None:
    """Pessimistic disconnect handling without a round trip: a pooled connection is idle, so its socket has
    nothing to read unless the server closed it (a terminated backend sends its FATAL error and closes; a
    restart does that to every backend). Such a connection, or one psycopg already knows is broken, is
    refused with `DisconnectionError`, and SQLAlchemy's pool replaces it and tries again (up to three times)
    before the unit of work uses it. A rare asynchronous message on a live connection costs a reconnect.
    A server that vanished without closing (a dead host) is found by the first statement, as pre-ping
    would have found it by its own; SQLAlchemy then invalidates the whole pool."""
    driver = dbapi_connection.driver_connection
    if driver.closed or driver.broken:
        raise DisconnectionError("the connection is closed")
    poller = select.poll()
    poller.register(driver.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
    if poller.poll(0):
        raise DisconnectionError("the server closed this idle connection")


def _report_connection_failures(engine: AsyncEngine, availability: Availability) -> None:
    """Tell `availability` what the unit-of-work pool meets: a failed connection attempt may mark the database
    down; a connection lost under a statement asks for a probe."""

    def on_error(context: Any) -> None:
        if context.connection is None:  # raised while connecting (the pool's new connection)
            availability.report(context.original_exception)
        elif context.is_disconnect:
            availability.suspect()

    event.listen(engine.sync_engine, "handle_error", on_error)


class Database:
    """An engine and its units of work, plus the transaction-free read path (`reads`); in tests both are
    bound to one open connection whose transaction is rolled back."""

    def __init__(self, engine: AsyncEngine, *, bind: AsyncConnection | None = None, read_pool_size: int = 4,
                 read_timeout: float = 10.0, watch_outages: bool = True, prepare: bool = True,
                 session_url: str | None = None, standby_url: str | None = None,
                 standby_max_lag: float = 5.0) -> None:
        self.engine = engine
        self._bind = bind
        self.reads: Reads
        self._prepare = prepare
        self._read_timeout = read_timeout
        # Session-level features (a job's session advisory lock) connect here when the engine's URL is a
        # transaction pooler's (TENET_DATABASE_DIRECT_URL); None: the engine's own connections have their session.
        self._session_url = session_url
        self._session_engine: AsyncEngine | None = None
        self.standby: ReplicaReads | None = None
        # Whether the database is known to be down: one per serving process (the API, the worker). None in the
        # tests' bound mode and in one-shot commands, which report their one failure themselves and exit.
        self.availability: Availability | None = None
        if bind is None:
            url = libpq_url(engine.url.render_as_string(hide_password=False))
            if watch_outages:
                self.availability = Availability(url)
                _report_connection_failures(engine, self.availability)
            self._sessions = async_sessionmaker(engine, expire_on_commit=False, autoflush=False)
            self._pooled_reads: PooledReads | None = PooledReads(
                url, size=read_pool_size, timeout=read_timeout, availability=self.availability,
                connect_timeout=connect_timeout(url, read_timeout), prepare=prepare)
            self.reads = self._pooled_reads
            if standby_url is not None:
                # A standby's trouble is not an outage: its pool tells no Availability, gives up on a broken
                # connection at once and waits briefly for one (the read then runs on the primary).
                standby_timeout = min(read_timeout, MONITOR_TIMEOUT)
                standby_pool = PooledReads(
                    libpq_url(standby_url), size=read_pool_size, timeout=standby_timeout,
                    application_name="tenet-standby-read", prepare=prepare, retry_broken=False, metrics_label="standby",
                    connect_timeout=connect_timeout(standby_url, standby_timeout))
                self.standby = ReplicaReads(self._pooled_reads, standby_pool, standby_conninfo=libpq_url(standby_url),
                                            max_lag=standby_max_lag, prepare=prepare,
                                            availability=self.availability)
                self.reads = self.standby
        else:
            self._pooled_reads = None
            self.reads = BoundReads(bind)
            # Tests: every unit of work becomes a SAVEPOINT inside the test's outer transaction, which
            # is rolled back at the end of the test.
            self._sessions = async_sessionmaker(
                bind=bind, expire_on_commit=False, autoflush=False,
                join_transaction_mode="create_savepoint",
            )

    @classmethod
    def from_url(cls, url: str, *, read_pool_size: int = 4, watch_outages: bool = True, prepare: bool = True,
                 session_url: str | None = None, standby_url: str | None = None, standby_max_lag: float = 5.0,
                 **engine_options: Any) -> Database:
        return cls(make_engine(url, prepare=prepare, **engine_options), read_pool_size=read_pool_size,
                   read_timeout=engine_options.get("pool_timeout", 10.0), watch_outages=watch_outages,
                   prepare=prepare, session_url=session_url, standby_url=standby_url,
                   standby_max_lag=standby_max_lag)

    @classmethod
    def from_settings(cls, settings: KernelSettings, url: str, *, standby: bool = False, **options: Any) -> Database:
        """The database of a serving process as the settings describe it: PgBouncer's transaction mode (no
        server-side prepares), the direct URL for session-level features and, with `standby` (API processes
        only), the read path on TENET_DATABASE_READ_URL."""
        session_url = settings.database_direct_url if settings.database_direct_url not in (None, url) else None
        return cls.from_url(
            url, prepare=settings.server_side_prepare, session_url=session_url,
            standby_url=settings.database_read_url if standby else None,
            standby_max_lag=settings.database_read_max_lag_seconds, **options)

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[AsyncSession]:
        """One transaction: commit on success, roll back on error, then run the after-commit hooks.

        A `DomainError` whose class sets `commits_transaction` is the one exception: the detection of
        that error is itself a state change that must persist (a reused refresh token revokes its
        family), so its transaction is committed before the error travels on.
        """
        if self.availability is not None:
            self.availability.check()
        session = self._sessions()
        committed = False
        try:
            try:
                yield session
            except BaseException as exc:
                if getattr(exc, "commits_transaction", False) and session.in_transaction():
                    await session.commit()
                    committed = True
                else:
                    await session.rollback()
                raise
            await session.commit()
            committed = True
            note_commit()
        finally:
            callbacks = session.info.pop(_AFTER_COMMIT, [])
            await session.close()
        if committed:
            await _run_after_commit(callbacks)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Statements]:
        """The plain unit of work: one transaction for a command whose every read and change is a plain statement
        (tenet.kernel.statements), on a connection of the primary's psycopg pool and without an ORM session.
        The same contract as `unit_of_work` (commit on success, roll back on error, commit first for an error
        that `commits_transaction`, after-commit steps once committed); what it saves is the session: about a
        quarter of a millisecond of the service's CPU a transaction (docs/decisions.md, "The plain unit of
        work"). In tests it is a savepoint on the bound connection."""
        held = AsyncExitStack()

        async def begin() -> psycopg.AsyncConnection[Any]:
            scope = self._pooled_reads.transaction() if self._pooled_reads is not None else self._bound_transaction()
            return await held.enter_async_context(scope)

        handle = Statements(connect=begin)  # the connection is taken (and BEGIN sent) at the first statement
        try:
            yield handle
        except BaseException as exc:
            if not getattr(exc, "commits_transaction", False):
                # Rolled back on the way out; the way out may answer its own error (503: the connection broke).
                await held.__aexit__(type(exc), exc, exc.__traceback__)
                raise
            await held.aclose()  # committed (the refusal's record), then the error travels on
            raise
        await held.aclose()
        note_commit()
        await _run_after_commit(handle.info.pop(_AFTER_COMMIT, []))

    @asynccontextmanager
    async def _bound_transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """Tests: a savepoint on the bound connection, inside the test's transaction (rolled back at its end)."""
        assert self._bind is not None
        raw = await self._bind.get_raw_connection()
        driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
        await driver.execute("SAVEPOINT tenet_unit")  # psycopg opens the test's transaction first when it must
        try:
            yield driver
        except BaseException:
            await driver.execute("ROLLBACK TO SAVEPOINT tenet_unit")
            await driver.execute("RELEASE SAVEPOINT tenet_unit")
            raise
        await driver.execute("RELEASE SAVEPOINT tenet_unit")

    @asynccontextmanager
    async def read_only(self) -> AsyncIterator[AsyncSession]:
        """A session for queries only; whatever it might write is rolled back."""
        if self.availability is not None:
            self.availability.check()
        session = self._sessions()
        try:
            yield session
        finally:
            # close() ends the transaction without committing and, unlike rollback(), keeps the loaded
            # attributes of the returned objects readable.
            await session.close()

    @asynccontextmanager
    async def session_connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection whose server session stays its own while it is held (a session advisory lock lives
        there): the direct URL's when one is configured, else the engine's (behind a transaction pooler the
        engine's connection would hand its server session to other clients between transactions)."""
        if self._session_url is None and not self._prepare:
            raise RuntimeError("a session-level lock behind a transaction pooler needs TENET_DATABASE_DIRECT_URL")
        if self._session_url is not None and self._session_engine is None:
            self._session_engine = make_engine(self._session_url, pool_size=2, max_overflow=8,
                                               pool_timeout=self._read_timeout, application_name="tenet-session",
                                               prepare=self._prepare, pool_label="session")
        async with (self._session_engine or self.engine).connect() as connection:
            yield connection

    async def commit_position(self) -> str | None:
        """The primary's WAL insert position now, as text (`16/B374D848`): at or past every commit made before
        this call, which is what a client's Tenet-Read-After needs (tenet.kernel.replica). None when the
        primary cannot tell right now (the client then reads without the guarantee)."""
        if self._pooled_reads is None:
            return None
        try:
            position: str | None = await self._pooled_reads.value("SELECT pg_current_wal_insert_lsn()::text")
        except Exception as exc:
            log.warning("could not read the primary's WAL position after a write (%s)", type(exc).__name__)
            return None
        return position

    async def ping(self) -> None:
        if self.availability is not None:
            self.availability.check()
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        if self.availability is not None:
            await self.availability.close()
        if self.standby is not None:
            await self.standby.close()
        if self._pooled_reads is not None:
            await self._pooled_reads.close()
        if self._session_engine is not None:
            await self._session_engine.dispose()
        await self.engine.dispose()
