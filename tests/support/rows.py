"""The cost of a read as a count of rows, not a time: the rows the database sent for SELECTs naming a table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


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
