"""The read path on a streaming hot standby (TENET_DATABASE_READ_URL), with read-your-writes.

An API process with a standby configured sends the transaction-free read path's statements (tenet.kernel.reads)
to it, and keeps sending them to the primary when that would show a client something older than it may see:

- **Read-your-writes.** After a request committed a write, its answer carries the primary's WAL position
  (`Tenet-Read-After: 0/3000148`, and the same in the `tenet_read_after` cookie for browsers). A request that
  sends it back (the header, or the cookie its browser keeps) reads from the primary until the standby's replay
  position (`pg_last_wal_replay_lsn()`) has passed it. The position is taken after the commit, so it is at or
  past the commit's own record. The cookie lives a little longer than the lag bound: a write older than the
  bound is either replayed or the standby is past the bound and every read goes to the primary anyway.
- **A bound on staleness.** Every read goes to the primary while the standby lags by more than
  TENET_DATABASE_READ_MAX_LAG_SECONDS, or while its lag is not known. The lag is measured against the primary's
  own WAL position as sampled here: the standby is `lag` seconds behind when the oldest position the primary had
  passed that the standby has not replayed was sampled `lag` seconds ago (an idle primary with a caught-up
  standby lags 0 seconds; a standby whose replay is paused lags as long as the primary has moved on since).
- **A dead standby costs nothing per request.** A monitor samples both servers every MONITOR_INTERVAL seconds on
  connections of its own; a standby that cannot be reached (or one that is not in recovery: a promoted former
  standby does not follow the primary any more) is taken out of use at once, and the first read that meets a
  broken standby connection takes it out too (a circuit breaker) and runs on the primary instead. The monitor's
  next good sample brings the standby back. Nothing about the standby ever answers a client 5xx: a read that
  fails on the standby for a standby's reason (a lost connection, a recovery conflict) is run on the primary.

Writes never go to the standby (`write_one` is the primary's), and neither do the worker's reads: only API
processes route reads, and a job acting on what a stale read showed it (the upload sweep deciding a file is an
orphan) could do harm that a page cannot.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

import psycopg
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.kernel import errors, problems
from tenet.kernel.availability import Availability
from tenet.kernel.metrics import READS_ROUTED
from tenet.kernel.reads import Params, PooledReads, Row

log = logging.getLogger(__name__)

MONITOR_INTERVAL = 1.0  # seconds between samples of the primary's and the standby's WAL positions
MONITOR_TIMEOUT = 2.0  # a standby that does not answer a sample within this is taken out of use
READ_AFTER_HEADER = "Tenet-Read-After"
READ_AFTER_COOKIE = "tenet_read_after"
# SQLSTATE classes of a failure that is the standby's, not the statement's: a lost or refused connection (08), a
# recovery conflict (40001 / 40P01: replay needed rows the query was reading), read-only (25006: a statement
# that writes reached the standby), the server shutting down (57P).
_STANDBY_FAILURES = ("08", "40001", "40P01", "25006", "57P")

_LSN = re.compile(r"^\s*([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})\s*\Z")


def parse_lsn(text: str) -> int:
    """`16/B374D848` -> its 64-bit position; ValueError for anything else."""
    match = _LSN.match(text)
    if match is None:
        raise ValueError("not a WAL position like 16/B374D848")
    return (int(match.group(1), 16) << 32) | int(match.group(2), 16)


def format_lsn(position: int) -> str:
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


# --- the request's consistency: what it must see, and whether it wrote --------------------------------------

# The WAL position the current request must see (from its Tenet-Read-After header or cookie), None for any.
_READ_AFTER: ContextVar[int | None] = ContextVar("tenet_read_after", default=None)


class _Writes:
    """Set by the unit of work when the request's transaction commits (the holder is the request's; the unit of
    work runs in a dependency whose context is a copy, so it marks the holder instead of setting a variable)."""

    __slots__ = ("committed",)

    def __init__(self) -> None:
        self.committed = False


_WRITES: ContextVar[_Writes | None] = ContextVar("tenet_request_writes", default=None)


def note_commit() -> None:
    """The current request committed a write (tenet.db.database's unit of work calls this)."""
    writes = _WRITES.get()
    if writes is not None:
        writes.committed = True


def required_position() -> int | None:
    return _READ_AFTER.get()


# --- the standby's state and the routing ---------------------------------------------------------------------

@dataclass(frozen=True)
class StandbyState:
    """What the last sample said: whether reads may go to the standby, how far it has replayed, its lag."""

    usable: bool
    replay_position: int | None = None
    lag_seconds: float | None = None
    reason: str = "not sampled yet"


class ReplicaReads:
    """The read path of an API process with a standby: reads on the standby when allowed, else on the primary."""

    def __init__(self, primary: PooledReads, standby: PooledReads, *, standby_conninfo: str, max_lag: float,
                 prepare: bool = True, interval: float = MONITOR_INTERVAL,
                 availability: Availability | None = None) -> None:
        self.primary = primary
        # The primary's: while it is known to be down the process answers 503 for reads too, as without a standby
        # (a read-only mode on a standby frozen at the outage would be another product).
        self._availability = availability
        self.standby = standby
        self._standby_conninfo = standby_conninfo
        self._max_lag = max_lag
        self._interval = interval
        self._prepare = prepare
        self.state = StandbyState(usable=False)
        # (monotonic time, the primary's WAL position then), oldest first, spanning a little more than the bound.
        self._history: deque[tuple[float, int]] = deque()
        self._monitor: asyncio.Task[None] | None = None
        self._monitor_connection: psycopg.AsyncConnection[Any] | None = None
        self._closed = False
        self.routed = {"standby": 0, "primary": 0}  # reads per target since start (for tests)
        for target in self.routed:  # /metrics: counted across the processes of `tenet serve --workers N`
            READS_ROUTED.labels(target)

    # --- Reads ---------------------------------------------------------------------------------------------

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        rows: list[Row] = await self._read(lambda reads: reads.all(sql, params))
        return rows

    async def one(self, sql: str, params: Params = None) -> Row | None:
        row: Row | None = await self._read(lambda reads: reads.one(sql, params))
        return row

    async def value(self, sql: str, params: Params = None) -> Any:
        row = await self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    async def write_one(self, sql: str, params: Params = None) -> list[Row]:
        return await self.primary.write_one(sql, params)

    # --- routing -------------------------------------------------------------------------------------------

    def target(self) -> str:
        """Where a read of the current request goes now: "standby" or "primary"."""
        self._ensure_monitor()
        state = self.state
        if not state.usable or state.replay_position is None:
            return "primary"
        needed = _READ_AFTER.get()
        if needed is not None and needed > state.replay_position:
            return "primary"  # the standby has not replayed this client's write yet
        return "standby"

    async def _read(self, run: Callable[[PooledReads], Awaitable[Any]]) -> Any:
        if self._availability is not None:
            self._availability.check()
        if self.target() == "standby":
            try:
                result = await run(self.standby)
            except errors.ServiceUnavailable:
                # The standby pool lost its connection, or had none to give in time.
                await self._take_out_of_use("the standby could not be reached")
            except psycopg.Error as exc:
                if not (exc.sqlstate or "").startswith(_STANDBY_FAILURES):
                    raise  # the statement's own error: the primary would answer the same
                if (exc.sqlstate or "").startswith(("08", "57P", "25006")):
                    await self._take_out_of_use(f"the standby failed a read ({exc.sqlstate})")
                else:
                    log.info("read path: a recovery conflict on the standby (%s); read again on the primary",
                             exc.sqlstate)
            else:
                self.routed["standby"] += 1
                READS_ROUTED.labels("standby").inc()
                return result
        self.routed["primary"] += 1
        READS_ROUTED.labels("primary").inc()
        return await run(self.primary)

    async def _take_out_of_use(self, reason: str) -> None:
        if self.state.usable:
            log.warning("read path: %s; reads go to the primary until the standby answers again", reason)
        self.state = StandbyState(usable=False, reason=reason)
        # Its waiting requests are answered at once and it stops reconnecting; the next use opens a fresh one.
        await self.standby.reset()

    # --- the monitor ---------------------------------------------------------------------------------------

    def _ensure_monitor(self) -> None:
        if self._monitor is None and not self._closed:
            self._monitor = asyncio.get_running_loop().create_task(self._watch(), name="tenet-standby-monitor")

    async def _watch(self) -> None:
        while not self._closed:
            try:
                await self.sample()
            except Exception:  # a sample must never end the watch
                log.exception("standby monitor: a sample failed unexpectedly")
            await asyncio.sleep(self._interval)

    async def sample(self) -> StandbyState:
        """Sample the primary's WAL position, then the standby's replay position; update the state."""
        try:
            primary_position = parse_lsn(await self.primary.value("SELECT pg_current_wal_lsn()::text"))
        except Exception:
            # The primary is down (the process answers 503 for it) or busy: the standby's lag cannot be told.
            return self.state
        now = time.monotonic()
        self._history.append((now, primary_position))
        while len(self._history) > 2 and self._history[1][0] < now - self._max_lag - 2 * self._interval:
            self._history.popleft()
        try:
            row = await asyncio.wait_for(self._standby_position(), MONITOR_TIMEOUT)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            await self._close_monitor_connection()
            if self.state.usable or self.state.reason != "the standby could not be reached":
                log.warning("standby monitor: the standby cannot be reached (%s): reads go to the primary",
                            _first_line(exc))
                await self._take_out_of_use("the standby could not be reached")
            return self.state
        in_recovery, replay = row
        if not in_recovery or replay is None:
            if self.state.usable or self.state.reason != "not a standby":
                log.warning("standby monitor: TENET_DATABASE_READ_URL is not a server in recovery: not used")
            self.state = StandbyState(usable=False, reason="not a standby")
            return self.state
        replay_position = parse_lsn(replay)
        lag = self._lag(replay_position, now)
        usable = lag <= self._max_lag
        if usable and not self.state.usable:
            log.info("standby monitor: the standby is %.1f s behind: reads go to it", lag)
        elif not usable and self.state.usable:
            log.warning("standby monitor: the standby lags more than %.0f s: reads go to the primary", self._max_lag)
        self.state = StandbyState(usable=usable, replay_position=replay_position, lag_seconds=lag,
                                  reason="in use" if usable else "lagging past the bound")
        return self.state

    def _lag(self, replay_position: int, now: float) -> float:
        """Seconds since the primary passed a position the standby has not replayed (0: caught up); infinite
        when even the oldest sample kept is past it (the lag is then at least the history's span, unknown)."""
        if replay_position >= self._history[-1][1]:
            return 0.0
        if self._history[0][1] > replay_position:
            return math.inf
        for sampled_at, position in self._history:
            if position > replay_position:
                return now - sampled_at
        return 0.0  # unreachable: the newest sample is past the replay position

    async def _standby_position(self) -> tuple[bool, str | None]:
        connection = self._monitor_connection
        if connection is None or connection.closed or connection.broken:
            kwargs: dict[str, Any] = {"autocommit": True, "application_name": "tenet-standby-monitor",
                                      "connect_timeout": math.ceil(MONITOR_TIMEOUT)}
            if not self._prepare:
                kwargs["prepare_threshold"] = None
            connection = self._monitor_connection = await psycopg.AsyncConnection.connect(
                self._standby_conninfo, **kwargs)
        cursor = await connection.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text")
        row = await cursor.fetchone()
        assert row is not None
        return bool(row[0]), row[1]

    async def _close_monitor_connection(self) -> None:
        connection, self._monitor_connection = self._monitor_connection, None
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # already broken: nothing to close politely
                log.debug("closing the standby monitor's connection failed", exc_info=True)

    async def close(self) -> None:
        self._closed = True
        if self._monitor is not None:
            self._monitor.cancel()
            await asyncio.gather(self._monitor, return_exceptions=True)
        await self._close_monitor_connection()
        await self.standby.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


# --- the HTTP side: the token in, the token out ---------------------------------------------------------------

class ReadYourWritesMiddleware:
    """Reads a request's Tenet-Read-After (header or cookie) for the read path, and gives a request that committed
    a write the primary's WAL position back in both (installed only when TENET_DATABASE_READ_URL is set)."""

    def __init__(self, app: ASGIApp, *, commit_position: Callable[[Scope], Awaitable[str | None]],
                 cookie_max_age: int) -> None:
        self.app = app
        self._commit_position = commit_position
        self._cookie_max_age = cookie_max_age

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            needed = _position_of(scope)
        except ValueError:
            await problems.send_problem(send, scope, errors.BadRequest(
                f"{READ_AFTER_HEADER} must be a WAL position as an earlier answer gave it (like 16/B374D848)"))
            return
        writes = _Writes()
        read_after_token = _READ_AFTER.set(needed)
        writes_token = _WRITES.set(writes)

        async def send_with_position(message: Message) -> None:
            if message["type"] == "http.response.start" and writes.committed:
                position = await self._commit_position(scope)
                if position is not None:
                    secure = "; Secure" if scope.get("scheme") == "https" else ""
                    cookie = (f"{READ_AFTER_COOKIE}={position}; Max-Age={self._cookie_max_age}; Path=/; HttpOnly; "
                              f"SameSite=Lax{secure}")
                    message = {**message, "headers": [
                        *message.get("headers", ()), (READ_AFTER_HEADER.lower().encode(), position.encode()),
                        (b"set-cookie", cookie.encode("latin-1"))]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_position)
        finally:
            _WRITES.reset(writes_token)
            _READ_AFTER.reset(read_after_token)


def _position_of(scope: Scope) -> int | None:
    """The furthest position the request names: its header (ValueError when malformed) or its cookie (a malformed
    cookie is ignored: the browser cannot mend it, and it only ever held what this service set)."""
    header: int | None = None
    cookie: int | None = None
    for name, value in scope.get("headers", ()):
        if name == b"tenet-read-after":
            header = max(header or 0, parse_lsn(value.decode("latin-1")))
        elif name == b"cookie" and READ_AFTER_COOKIE.encode() in value:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
                if READ_AFTER_COOKIE in jar:
                    cookie = parse_lsn(jar[READ_AFTER_COOKIE].value)
            except (ValueError, KeyError):
                cookie = None
    found = [p for p in (header, cookie) if p is not None]
    return max(found) if found else None
