"""Metrics recorded as things happen, where a scrape could not see them afterwards: how long each checkout waited
for a pooled database connection, and the latency of routes that answer a caller with a deadline of its own.

A scrape (tenet.ops `/metrics`) computes the rest (pool sizes, backlogs) at scrape time. These are prometheus_client
counters and histograms, so with `tenet serve --workers N` (its multi-process mode) every process's observations
are summed into one series, whichever process answers the scrape.

Labels stay few and fixed: `pool` is one of POOLS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from prometheus_client import Counter, Histogram
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.pool import AsyncAdaptedQueuePool, PoolProxiedConnection

# The pools a process may hold: the unit of work's (SQLAlchemy), the read path's on the primary and on the standby
# (psycopg), and the direct connections for session-level locks behind PgBouncer (SQLAlchemy).
POOLS = ("write", "read", "standby", "session")

DB_POOL_CHECKOUT = Histogram(
    "tenet_db_pool_checkout_seconds",
    "Time a checkout took to get a connection from a pool: about zero when one was idle, else the time to open "
    "one or to wait for one to come back",
    ["pool"], buckets=(0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
DB_POOL_WAITS = Counter(
    "tenet_db_pool_waits", "Checkouts that found no idle connection in the pool (they opened one or waited)",
    ["pool"])
DB_POOL_TIMEOUTS = Counter(
    "tenet_db_pool_timeouts", "Checkouts that gave up after the pool timeout (the request answered 503)", ["pool"])

# Every pool's series exist from the start at zero: a counter's first increase is then a rise that rate() sees,
# and the dashboard's queries have series to show before anything has waited.
for _pool in POOLS:
    DB_POOL_CHECKOUT.labels(_pool)
    DB_POOL_WAITS.labels(_pool)
    DB_POOL_TIMEOUTS.labels(_pool)

# The read path's routing with a standby configured (tenet.kernel.replica); its series exist only in API processes
# that have one.
READS_ROUTED = Counter(
    "tenet_db_reads_routed", "Read-path statements by the server they ran on (API processes with a standby)",
    ["target"])


def observe_checkout(pool: str, started: float, *, waited: bool) -> None:
    """Record one checkout that began at `started` (time.perf_counter()) and has its connection now."""
    DB_POOL_CHECKOUT.labels(pool).observe(time.perf_counter() - started)
    if waited:
        DB_POOL_WAITS.labels(pool).inc()


def observe_checkout_timeout(pool: str, started: float) -> None:
    DB_POOL_CHECKOUT.labels(pool).observe(time.perf_counter() - started)
    DB_POOL_WAITS.labels(pool).inc()
    DB_POOL_TIMEOUTS.labels(pool).inc()


class _TimedQueuePool(AsyncAdaptedQueuePool):
    """SQLAlchemy's asyncio queue pool, timing each checkout (`connect`, the pool's public entry point). The
    label is a class attribute so that `recreate()` (engine.dispose, which builds `self.__class__` anew) keeps it."""

    metrics_label = "write"

    def connect(self) -> PoolProxiedConnection:
        started = time.perf_counter()
        waited = self.checkedin() == 0
        try:
            connection = super().connect()
        except PoolTimeoutError:
            observe_checkout_timeout(self.metrics_label, started)
            raise
        observe_checkout(self.metrics_label, started, waited=waited)
        return connection


@cache
def timed_pool_class(label: str) -> type[AsyncAdaptedQueuePool]:
    """The pool class for an engine whose checkouts are recorded under `pool=label`."""
    if label not in POOLS:
        raise ValueError(f"unknown pool label {label!r}: one of {POOLS}")
    return type(f"TimedQueuePool_{label}", (_TimedQueuePool,), {"metrics_label": label})


# --- routes timed by a histogram of their own ----------------------------------------------------------------

ROUTE_TIMER_ATTR = "__tenet_route_timer__"
F = TypeVar("F", bound=Callable[..., Any])


def timed_by(observe: Callable[[float], None]) -> Callable[[F], F]:
    """Mark a route so that the observability middleware also passes its answer time (seconds, the whole request
    as the caller waits for it, commit included) to `observe`: for a route with a deadline of its caller's that
    deserves an alert of its own (Graph's webhooks: 3 s)."""

    def mark(endpoint: F) -> F:
        setattr(endpoint, ROUTE_TIMER_ATTR, observe)
        return endpoint

    return mark


def route_timer(route: object) -> Callable[[float], None] | None:
    """The `observe` a route was marked with (`timed_by`), or None."""
    timer: Callable[[float], None] | None = getattr(getattr(route, "endpoint", None), ROUTE_TIMER_ATTR, None)
    return timer
