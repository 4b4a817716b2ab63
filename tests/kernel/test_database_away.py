"""`database_away`: what background work waits out (a server or the way to it away) and what it must not (a
statement's own failure), so a deadlock is never retried as if the database had restarted, nor an outage counted
as a run's failure."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from tenet.kernel.availability import database_unavailable
from tenet.kernel.db_errors import database_away, once_the_database_answers


@pytest.mark.parametrize("exc", [
    pg.AdminShutdown(), pg.CrashShutdown(), pg.CannotConnectNow(), pg.TooManyConnections(),
    pg.ConnectionFailure(), psycopg.OperationalError("the connection is closed"), psycopg.InterfaceError("closed"),
    PoolTimeoutError(), database_unavailable(),
    OperationalError("SELECT 1", {}, pg.AdminShutdown()),
], ids=lambda exc: type(exc).__name__)
def test_a_server_or_connection_away_is_waited_for(exc):
    assert database_away(exc)


@pytest.mark.parametrize("exc", [
    pg.DeadlockDetected(), pg.SerializationFailure(), pg.QueryCanceled(), pg.UniqueViolation(), ValueError("x"),
    OperationalError("SELECT 1", {}, pg.DeadlockDetected()),
], ids=lambda exc: type(exc).__name__)
def test_a_statement_s_own_failure_is_not(exc):
    assert not database_away(exc)


async def test_a_statement_s_own_failure_is_raised_at_once():
    calls = []

    async def deadlocked():
        calls.append(1)
        raise pg.DeadlockDetected()

    with pytest.raises(pg.DeadlockDetected):
        await once_the_database_answers(deadlocked, what="test", delays=(0.01, 0.01))
    assert calls == [1]


async def test_the_database_away_is_asked_again_until_it_answers():
    answers = iter([pg.AdminShutdown(), pg.CannotConnectNow(), "done"])

    async def attempt():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await once_the_database_answers(attempt, what="test", delays=(0.01, 0.01)) == "done"
