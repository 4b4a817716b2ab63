"""Whether this process knows the database to be down, shared by every request it serves.

Without it, each request of an outage found the outage on its own, and a read waited the read pool's whole
timeout (10 s) for a connection the pool kept failing to make before its 503. Now the first failure to
connect (any pool's, any request's) marks the database down: from then on every request that needs it is
refused at once (`check()`, 503 SERVICE_UNAVAILABLE with Retry-After) without asking a pool, the read pool
is closed (its waiters are answered at once and it stops reconnecting), and one probe per process tries a
fresh connection every PROBE_INTERVAL seconds. The first probe that connects reopens the service: a fresh
read pool, and the unit-of-work pool replaces its dead connections at checkout as always.

A connection lost on a live server (a backend terminated, a restart already over) is not proof of an
outage: it only asks for a probe now (`suspect()`, or `confirm()` when the caller waits for the answer), and
only a probe that fails marks the database down. "Too many connections" is load, not an outage.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import psycopg

from tenet.kernel.errors import ServiceUnavailable

log = logging.getLogger(__name__)

PROBE_INTERVAL = 1.0  # seconds between probes while the database is down
PROBE_CONNECT_TIMEOUT = 5  # libpq's connect_timeout for a probe (seconds, at least 2)
RETRY_AFTER = "2"
NO_FREE_SLOTS = "the database has no free connection slots"

Listener = Callable[[], Awaitable[None]]


class DatabaseDown(ServiceUnavailable):
    """A request refused because the database is known to be down (logged once per outage, not per request)."""

    quiet: ClassVar[bool] = True


def database_unavailable() -> ServiceUnavailable:
    return ServiceUnavailable("The database is not reachable right now", headers={"Retry-After": RETRY_AFTER})


def _sqlstate_and_message(exc: BaseException) -> tuple[psycopg.OperationalError, str | None] | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.OperationalError):
            return current, current.sqlstate
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return None


def unreachable_reason(exc: BaseException) -> str | None:
    """Why the database cannot be used, in words fit for an unauthenticated answer (no address, user name or
    exception class), when `exc` is a failure to connect or a lost connection; None for any other error."""
    found = _sqlstate_and_message(exc)
    if found is None:
        return None
    _, sqlstate = found
    if sqlstate is None or sqlstate.startswith("08"):
        return "the database is not accepting connections"
    if sqlstate.startswith("57P"):
        return "the database is shutting down or starting up"
    if sqlstate.startswith("28"):
        return "the database refused the configured credentials"
    if sqlstate.startswith("3D"):
        return "the configured database does not exist"
    if sqlstate == "53300":
        return NO_FREE_SLOTS
    return None


def is_outage(exc: BaseException) -> bool:
    """A failed connection attempt that says the database cannot be used now (not one that says it is busy)."""
    reason = unreachable_reason(exc)
    return reason is not None and reason != NO_FREE_SLOTS


class Availability:
    """The process's view of the database: up, or down since a moment for a reason; and its probe."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self.reason: str | None = None
        self._down_since: float | None = None
        self._last_error: BaseException | None = None
        self._attempt: asyncio.Task[bool] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._on_down: list[Listener] = []
        self._on_up: list[Listener] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def on_down(self, listener: Listener) -> None:
        self._on_down.append(listener)

    def on_up(self, listener: Listener) -> None:
        self._on_up.append(listener)

    def check(self) -> None:
        """Refuse at once while the database is known to be down."""
        if self._down_since is not None:
            error = DatabaseDown("The database is not reachable right now", headers={"Retry-After": RETRY_AFTER},
                                 reason=self.reason)
            raise error from self._last_error

    def report(self, exc: BaseException) -> None:
        """A connection attempt failed: when it says the database cannot be used, it is down from now on."""
        if is_outage(exc):
            self._mark_down(unreachable_reason(exc) or "", exc)

    def suspect(self) -> None:
        """A connection was lost: probe now, in the background, unless a probe is already under way."""
        if not self._closed and not self.down:
            self._probe()

    async def confirm(self) -> bool:
        """Probe now and wait for the answer: True when the database can be reached."""
        if self._closed:
            return not self.down
        return await asyncio.shield(self._probe())

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._watch, self._attempt, *self._background) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- the probe ---------------------------------------------------------------------------------

    def _probe(self) -> asyncio.Task[bool]:
        """One connection attempt, shared by everyone who asks while it runs."""
        if self._attempt is None or self._attempt.done():
            self._attempt = asyncio.get_running_loop().create_task(self._attempt_once(), name="tenet-db-probe")
        return self._attempt

    async def _attempt_once(self) -> bool:
        try:
            connection = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, connect_timeout=PROBE_CONNECT_TIMEOUT,
                application_name="tenet-probe")
            async with connection:
                await connection.execute("SELECT 1")
        except psycopg.Error as exc:
            if unreachable_reason(exc) == NO_FREE_SLOTS:
                return True  # busy, not down: requests queue on the pools as usual
            self._mark_down(unreachable_reason(exc) or "the database did not answer", exc)
            return False
        if self.down:
            await self._mark_up()
        return True

    def _mark_down(self, reason: str, exc: BaseException) -> None:
        self._last_error = exc
        self.reason = reason
        if self._down_since is not None or self._closed:
            return
        self._down_since = time.monotonic()
        log.warning("database unreachable (%s): answering 503 until a probe reaches it", _first_line(exc))
        loop = asyncio.get_running_loop()
        for listener in self._on_down:
            self._spawn(loop, listener)
        if self._watch is None or self._watch.done():
            self._watch = loop.create_task(self._watch_until_up(), name="tenet-db-watch")

    async def _mark_up(self) -> None:
        since, self._down_since = self._down_since, None
        self.reason = self._last_error = None
        for listener in self._on_up:
            await listener()
        log.info("database reachable again after %.1f s: serving", time.monotonic() - (since or 0.0))

    async def _watch_until_up(self) -> None:
        while self.down and not self._closed:
            await asyncio.sleep(PROBE_INTERVAL)
            try:
                await self._probe()
            except Exception:  # a probe must never end the watch; the next one runs on schedule
                log.exception("database probe failed unexpectedly")

    def _spawn(self, loop: asyncio.AbstractEventLoop, listener: Listener) -> None:
        async def run() -> None:
            try:
                await listener()
            except Exception:
                log.exception("reacting to the database going down failed")

        task = loop.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
