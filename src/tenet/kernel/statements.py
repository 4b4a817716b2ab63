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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
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
    """SQL on the unit of work's connection (inside its transaction)."""

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = None) -> int:
        """Run a statement; answer the number of rows it affected."""
        async with self._connection.cursor() as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return cursor.rowcount

    async def executemany(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Run one statement for each of `params`, sent together (psycopg pipelines them): a batch's bookkeeping
        rows in one round trip instead of one each."""
        if params:
            async with self._connection.cursor() as cursor:
                await cursor.executemany(sql, params)

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        async with self._connection.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(sql, params, prepare=prepare_flag(sql))
            return await cursor.fetchall()

    async def one(self, sql: str, params: Params = None) -> Row | None:
        async with self._connection.cursor(row_factory=dict_row) as cursor:
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
        try:
            async with self._connection.pipeline():
                for sql, params in queries:
                    cursors.append(self._connection.cursor(row_factory=dict_row))
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
        async with self._connection.pipeline():
            yield


async def statements(session: AsyncSession) -> Statements:
    """The handle for `session`'s unit of work (its transaction begins now if it has not yet)."""
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
