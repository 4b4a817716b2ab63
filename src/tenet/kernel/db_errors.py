"""Reading PostgreSQL's verdicts: which constraint a failed statement broke, and whether the database is only
away for a moment."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import psycopg
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError, ServiceUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLSTATEs of a server that is away or going away: connection exceptions (class 08), administrator or crash
# shutdown, "cannot connect now" (starting up or in recovery), and "too many connections".
_AWAY_STATES = ("57P01", "57P02", "57P03", "53300")
# How long background work waits for it to come back: a restart of PostgreSQL or PgBouncer lasts seconds.
WAIT_FOR_DATABASE = (0.5, 1.0, 2.0, 4.0, 8.0)


def database_away(exc: BaseException) -> bool:
    """Whether `exc` says the database (or the way to it) is away for now, not that a statement failed: a lost
    or refused connection, an exhausted pool, or a process that already knows it down refusing at once (503).
    A deadlock or a serialization failure is the statement's, not the server's."""
    if isinstance(exc, PoolTimeoutError | InterfaceError | psycopg.InterfaceError | ServiceUnavailable):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    original = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(original, psycopg.InterfaceError):
        return True
    if isinstance(original, psycopg.OperationalError):
        state = original.sqlstate
        return state is None or state.startswith("08") or state in _AWAY_STATES
    return False


async def once_the_database_answers(attempt: Callable[[], Awaitable[T]], *, what: str,
                                    delays: tuple[float, ...] = WAIT_FOR_DATABASE) -> T:
    """`attempt()`, and again after each of `delays` while the database is away (15.5 s in all by default);
    the last failure, or any other, is raised. For background work whose one short write must not be lost to a
    restart (a sent mail's outcome, claims given back): never for a request, which answers 503 at once."""
    for delay in (*delays, None):
        try:
            return await attempt()
        except Exception as exc:
            if delay is None or not database_away(exc):
                raise
            log.info("%s: the database did not answer (%s); again in %.1f s", what, type(exc).__name__, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def violated_constraint(exc: Exception) -> str | None:
    """The name of the constraint or unique index behind an integrity error, if PostgreSQL said: SQLAlchemy's
    IntegrityError (the ORM's flush) or psycopg's own (a statement of tenet.kernel.statements)."""
    diag = getattr(exc, "diag", None) or getattr(getattr(exc, "orig", None), "diag", None)
    return getattr(diag, "constraint_name", None)


async def add_unique(session: AsyncSession, row: object, *,
                     on_violation: Mapping[str, Callable[[], DomainError]], keep_transaction: bool = False) -> None:
    """Insert `row`; a violation of a named unique index becomes that domain error.

    The pattern every uniqueness rule uses: the service's pre-check gives the friendly error first, and
    the database index decides races, answering with the same stable code. The violation aborts the
    transaction, which is what a command that then raises wants; `keep_transaction=True` wraps the insert in
    a savepoint (two more round trips) for a caller that must go on after the violation.
    """
    try:
        if keep_transaction:
            async with session.begin_nested():
                session.add(row)
                await session.flush()
        else:
            session.add(row)
            await session.flush()
    except IntegrityError as exc:
        make_error = on_violation.get(violated_constraint(exc) or "")
        if make_error is None:
            raise
        raise make_error() from None
