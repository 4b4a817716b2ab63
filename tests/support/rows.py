"""Reading rows from a test: `scalar` and `rows` answer what one SQL statement finds on a read-only snapshot (the
state a scenario left, checked past the API); `refused_by` names what refused a statement written past the
services (a bypass test); `counting_rows_read` measures the cost of a read as a count of
rows, not a time: the rows the database sent for SELECTs naming a table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from tenet.db.database import Database
from tenet.kernel.db_errors import violated_constraint


async def scalar(db: Database, sql: str, **params: Any) -> Any:
    """The one value `sql` (with `:name` parameters) answers: a count, a status; it fails unless one row comes."""
    async with db.read_only() as session:
        return (await session.execute(text(sql), params)).scalar_one()


async def rows(db: Database, sql: str, **params: Any) -> list[Row[Any]]:
    """Every row `sql` answers (tuples with named fields: `row.status`, `row._mapping`)."""
    async with db.read_only() as session:
        return list((await session.execute(text(sql), params)).all())


async def refused_by(db: Database, sql: str, params: dict[str, Any]) -> str | None:
    """Run `sql` past every service in a unit of work, expecting the database to refuse it: the name PostgreSQL
    gives for the refusal (a constraint, a trigger's). Commit-time (deferred) checks run at once: the test's
    transaction never commits."""
    with pytest.raises(IntegrityError) as refusal:
        async with db.unit_of_work() as session:
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(sql), params)
    return violated_constraint(refusal.value)


@dataclass
class RowCount:
    rows: int = 0


@contextmanager
def counting_rows_read(engine: AsyncEngine, table: str) -> Iterator[RowCount]:
    """Count the rows every SELECT that names `table` answered inside the block (through SQLAlchemy on `engine`)."""
    count = RowCount()

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and table in statement:
            count.rows += max(cursor.rowcount, 0)

    event.listen(engine.sync_engine, "after_cursor_execute", after)
    try:
        yield count
    finally:
        event.remove(engine.sync_engine, "after_cursor_execute", after)
