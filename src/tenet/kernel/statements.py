"""Plain SQL statements inside the caller's unit of work, on its own connection.

The ORM is the right tool for loading and changing entities a command reasons about; it is the wrong tool
for the statements every write repeats and nobody reads back — an audit row, an outbox mail, a counter, a
row lock — where building and executing an ORM statement costs ten times the round trip. `statements(session)`
answers a small handle that runs SQL text (psycopg placeholders, `%(name)s`) directly on the driver
connection the session's transaction lives on: the same transaction, the same locks, commit and rollback
with everything else, no SQLAlchemy in between. Like the read path (tenet.kernel.reads), statements are
module-level SQL constants; rows come back as dicts.

Use it only for rows the session does not hold as objects (or after `session.flush()` when a statement
must see objects the session added): the session does not know what these statements changed.

A command written in these statements only needs no session at all: `Database.transaction()` (the plain unit of
work, `StatementsDep` in a route) yields such a handle itself, on a connection of the primary's psycopg pool.
Commands typed `session: Unit` run in either, through `statements(session)`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.plans import prepare_flag

Row = dict[str, Any]
Params = Mapping[str, Any] | None

_KEY = "tenet.statements"


class Statements:
    """SQL on the unit of work's connection (inside its transaction). `info` holds what the unit of work reads
    back when it ends (its after-commit steps, tenet.db.database.after_commit), like an ORM session's."""

    def __init__(self, connection: psycopg.AsyncConnection[Any] | None = None, *,
                 connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]] | None = None) -> None:
        # `connect`: the plain unit of work takes its connection (and begins) at the first statement, as a
        # session does, so a request that counts a rate limit first never holds two pooled connections.
        self._connection = connection
        self._connect = connect
        self.info: dict[str, Any] = {}

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        """The transaction's connection (taken now, when the unit of work has not taken it yet)."""
        if self._connection is None:
            assert self._connect is not None
            self._connection = await self._connect()
        return self._connection

    async def execute(self, sql: str, params: Params = None) -> int:
        """Run a statement; answer the number of rows it affected."""
        async with (await self.connection()).cursor() as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return cursor.rowcount

    async def executemany(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Run one statement for each of `params`, sent together (psycopg pipelines them): a batch's bookkeeping
        rows in one round trip instead of one each."""
        if params:
            async with (await self.connection()).cursor() as cursor:
                await cursor.executemany(sql, params)

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        async with (await self.connection()).cursor(row_factory=dict_row) as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return await cursor.fetchall()

    async def one(self, sql: str, params: Params = None) -> Row | None:
        async with (await self.connection()).cursor(row_factory=dict_row) as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return await cursor.fetchone()

    async def value(self, sql: str, params: Params = None) -> Any:
        row = await self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    async def ones(self, *queries: tuple[str, Params]) -> list[Row | None]:
        """Several statements sent together and answered in one round trip: the first row of each (None for
        none, and for a statement that answers no rows at all, like SAVEPOINT), in order. PostgreSQL runs them
        one after the other, each with its own READ COMMITTED snapshot, so a statement that waits for a lock
        delays the ones after it and they see what the lock's holder committed: a lock and the reads it guards
        can share the trip. A failing statement raises its error and the ones after it are not run. (The
        transaction's BEGIN, when this opens it, travels with them.)"""
        cursors: list[psycopg.AsyncCursor[Row]] = []
        connection = await self.connection()
        try:
            async with connection.pipeline():
                for sql, params in queries:
                    cursors.append(connection.cursor(row_factory=dict_row))
                    await cursors[-1].execute(sql, params, prepare=prepare_flag(sql))
            return [await cursor.fetchone() if cursor.description is not None else None for cursor in cursors]
        finally:
            for cursor in cursors:
                await cursor.close()

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[None]:
        """Send the statements run inside the block without waiting for each answer; wait once, at its end.

        For the tail of a write: the rows nobody reads back (the entity's insert, its audit row, its outbox
        mail) cost one round trip instead of one each. PostgreSQL still runs them one after the other, in
        the transaction. Inside the block `execute` answers -1 (the counts arrive at the end) and an error
        of any statement is raised when the block ends, as the driver's exception (a UniqueViolation with
        its constraint name, say); the statements after a failed one are not run, and the transaction is
        aborted as after any failed statement. Only this handle's statements belong inside: nothing that
        goes through the session (psycopg's pipeline mode, on the session's own connection).
        """
        async with (await self.connection()).pipeline():
            yield


# A unit of work as a command receives it: the ORM session of `Database.unit_of_work`, or the plain statements
# of `Database.transaction` (commands whose every change is a plain statement: no session to pay for).
Unit = AsyncSession | Statements


async def statements(session: Unit) -> Statements:
    """The handle for `session`'s unit of work (its transaction begins now if it has not yet)."""
    if isinstance(session, Statements):
        return session
    handle: Statements | None = session.info.get(_KEY)
    if handle is None:
        connection = await session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        if not isinstance(driver, psycopg.AsyncConnection):
            raise TypeError("kernel.statements needs the psycopg async driver")
        handle = Statements(driver)
        session.info[_KEY] = handle
    return handle
