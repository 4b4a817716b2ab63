"""The import engine's batches (issue 20, speed): a table whose writes can be repeated writes a batch under one
savepoint, and a batch with a row the database refuses goes again row by row, so the refused row is named and
the others are written once, with their mapping rows. On a real table of the test database, with a CHECK
constraint doing the refusing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.meetings.legacy.engine import Mapped, Plan, TableRun
from tenet.meetings.legacy.report import TableReport

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
TABLE = "public.legacy_engine_numbers"


class Numbers:
    """A legacy table of numbers, written into TABLE (which refuses those under 1)."""

    name = "audit_logs"  # a table name legacy_import_rows accepts (the test rolls everything back)
    repeatable_writes = True

    def __init__(self) -> None:
        self.inserts = 0
        self.remembered: dict[str, str] = {}

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        return Plan({"n": row["n"]})

    async def insert(self, session: Any, plan: Plan) -> tuple[str, bool]:
        self.inserts += 1
        await (await statements(session)).execute(f"INSERT INTO {TABLE} (legacy, n) VALUES (%(k)s, %(n)s)",
                                                  {"k": plan.key, "n": plan.values["n"]})
        return f"n{plan.values['n']}", True

    async def update(self, session: Any, mapped: Mapped, plan: Plan) -> str:
        raise AssertionError("no row is imported twice here")

    async def remove(self, session: Any, mapped: Mapped) -> None:
        raise AssertionError("nothing is removed here")

    async def fingerprints(self, session: Any, targets: list[str]) -> dict[str, str]:
        return {}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        self.remembered[key] = target


async def _import(db: Database, spec: Numbers, numbers: list[int]) -> TableRun:
    run = TableRun(spec, TableReport(), {}, NOW)
    async with db.unit_of_work() as session:
        await run.rows(session, [{"id": f"k{n}", "n": n} for n in numbers])
    return run


async def _stored(db: Database) -> tuple[list[int], list[str]]:
    async with db.unit_of_work() as session:
        handle = await statements(session)
        numbers = [r["n"] for r in await handle.all(f"SELECT n FROM {TABLE} ORDER BY n")]
        mapped = [r["legacy_key"] for r in await handle.all(
            "SELECT legacy_key FROM meeting_attendance.legacy_import_rows WHERE source_table = 'audit_logs' "
            "ORDER BY legacy_key")]
    return numbers, mapped


async def _table(db: Database) -> None:
    async with db.unit_of_work() as session:
        await (await statements(session)).execute(
            f"CREATE TABLE {TABLE} (legacy text PRIMARY KEY, n integer NOT NULL CONSTRAINT numbers_positive "
            "CHECK (n > 0))")


async def test_a_batch_without_refusals_is_written_once_under_one_savepoint(db, engine):
    await _table(db)
    spec = Numbers()
    savepoints: list[str] = []
    listener = lambda connection, name: savepoints.append(name)  # noqa: E731
    event.listen(engine.sync_engine, "savepoint", listener)
    try:
        run = await _import(db, spec, [1, 2, 3])
    finally:
        event.remove(engine.sync_engine, "savepoint", listener)
    # The test's unit of work is a savepoint of the test's transaction; then one for the batch (row by row: 1 + 3).
    assert spec.inserts == 3 and len(savepoints) == 2
    assert (run.report.inserted, run.report.refused) == (3, [])
    assert spec.remembered == {"k1": "n1", "k2": "n2", "k3": "n3"}
    assert await _stored(db) == ([1, 2, 3], ["k1", "k2", "k3"])


async def test_a_row_the_database_refuses_is_named_and_the_rest_of_its_batch_is_written(db):
    await _table(db)
    spec = Numbers()
    run = await _import(db, spec, [1, 2, -3, 4])
    assert spec.inserts == 3 + 4  # together up to the refused row, rolled back, then each row on its own
    assert run.report.inserted == 3
    assert [key for key, _ in run.report.refused] == ["k-3"]
    assert "numbers_positive" in run.report.refused[0][1]
    assert spec.remembered == {"k1": "n1", "k2": "n2", "k4": "n4"}  # the refused row is not remembered
    assert run.kept == {"k1", "k2", "k4"} and run.touched == {"k1", "k2", "k4"}
    assert await _stored(db) == ([1, 2, 4], ["k1", "k2", "k4"])  # once each, mapping rows of the written only
