"""How PostgreSQL plans a statement Tenet sends: prepared on the server (psycopg's default from a connection's fifth
use of it), or planned for each call's values. A module of its own, with no imports, because the read path, the
unit of work's statements and every SQL constant use it (the read path's module imports the metrics, which must not
be imported before `tenet serve` has chosen its multi-process metrics directory)."""

from __future__ import annotations

__all__ = ["PlannedPerCall", "prepare_flag"]


class PlannedPerCall(str):
    """A statement PostgreSQL plans for the values of each call: psycopg never prepares it on the server, so no
    generic plan (one plan for any values, which PostgreSQL adopts for a prepared statement after five calls when
    its estimate looks no worse) is ever used for it. For statements whose best plan depends on their values: a
    report whose series may hold 2 meetings or 500, lookups by arrays of varying length. Planning such a statement
    costs far less than running it on the wrong plan (bench series_report: 29 against 51 ms a call)."""

    __slots__ = ()


def prepare_flag(sql: str) -> bool | None:
    """psycopg's `prepare=` for `sql`: False for a PlannedPerCall statement, else the connection's default."""
    return False if isinstance(sql, PlannedPerCall) else None
