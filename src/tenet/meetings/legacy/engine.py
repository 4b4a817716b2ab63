"""The repeatable part of the import, the same for every legacy table.

A table's rows are read in chunks; each chunk is one unit of work (one transaction per table batch), each row in
it a savepoint, so a row the database refuses is listed with its reason and the rest of the batch commits. A row
already imported (legacy_import_rows) is compared twice: the fingerprint of the Tenet row now against the one the
import left (different: changed in Tenet, a conflict, kept as it is), and the fingerprint of the legacy row
against the one imported (different: updated). Rows imported before and absent from this file are removed before
the tables are imported, those the file now refuses after, both in the reverse order, unless Tenet changed them or
still refers to them (a conflict).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.meetings.legacy.report import TableReport
from tenet.meetings.legacy.source import LegacyFile

BATCH = 500
PRESENT = "sha256:" + hashlib.sha256(b"present").hexdigest()

LOAD_MAPPING = """
    SELECT legacy_key, target_key, owned, source_digest, row_digest FROM meeting_attendance.legacy_import_rows
     WHERE source_table = %(table)s"""
SAVE_MAPPING = """
    INSERT INTO meeting_attendance.legacy_import_rows
           (source_table, legacy_key, target_key, owned, source_digest, row_digest, imported_at, updated_at)
    VALUES (%(table)s, %(key)s, %(target)s, %(owned)s, %(digest)s, NULL, %(now)s, %(now)s)
    ON CONFLICT (source_table, legacy_key) DO UPDATE
       SET target_key = excluded.target_key, owned = excluded.owned, source_digest = excluded.source_digest,
           updated_at = excluded.updated_at"""
SET_ROW_DIGEST = """
    UPDATE meeting_attendance.legacy_import_rows SET row_digest = %(row_digest)s
     WHERE source_table = %(table)s AND legacy_key = %(key)s"""
OWNED_TARGETS = """
    SELECT legacy_key, target_key FROM meeting_attendance.legacy_import_rows
     WHERE source_table = %(table)s AND legacy_key = ANY(%(keys)s) AND owned"""
FORGET = "DELETE FROM meeting_attendance.legacy_import_rows WHERE source_table = %(table)s AND legacy_key = %(key)s"


def digest(values: Any) -> str:
    """The fingerprint of mapped values (or of a Tenet row's columns): stable JSON, SHA-256."""
    return "sha256:" + hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


class Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Skipped(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Plan:
    """What a legacy row becomes: `values` for the table's writer, `digest` of them, adjustments as notes."""

    values: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    target: str | None = None  # the Tenet key when the plan already knows it (kept meeting ids, merged users)
    owned: bool = True
    source: dict[str, Any] | None = None  # fingerprinted instead of `values` when set (append-only rows)
    key: str = ""  # the legacy row's id, set by the engine once planned (not fingerprinted)

    @property
    def digest(self) -> str:
        return digest(self.source if self.source is not None else self.values)


@dataclass(frozen=True)
class Mapped:
    target: str
    owned: bool
    source_digest: str
    row_digest: str | None


class Progress(Protocol):
    def start(self, table: str, total: int) -> None: ...
    def advance(self, rows: int) -> None: ...


class NoProgress:
    def start(self, table: str, total: int) -> None:
        pass

    def advance(self, rows: int) -> None:
        pass


class TableSpec(Protocol):
    """One legacy table: how its rows are planned, written, fingerprinted and removed."""

    name: str

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan: ...
    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]: ...
    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str: ...
    async def remove(self, session: AsyncSession, mapped: Mapped) -> None: ...
    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]: ...
    def remember(self, key: str, target: str, plan: Plan | None) -> None: ...


# What the database refusing a write raises: through the session (SQLAlchemy's wrapper) or through
# kernel.statements (psycopg's own error).
DatabaseRefusal = (DBAPIError, psycopg.Error)


def problem(exc: DBAPIError | psycopg.Error) -> str:
    """The reason a refused write gives: the constraint the database named, else its first line."""
    error = exc.orig if isinstance(exc, DBAPIError) else exc
    diag = getattr(error, "diag", None)
    name = getattr(diag, "constraint_name", None)
    first = str(error).splitlines()[0] if error is not None else str(exc)
    return f"refused by the database ({name}): {first}" if name else f"refused by the database: {first}"


async def _savepoint_now(session: AsyncSession) -> None:
    """SQLAlchemy sends a nested transaction's SAVEPOINT when the session next uses its connection; a writer that
    runs only kernel.statements never does, so the savepoint is asked for here, before the writes it guards."""
    await session.connection()


@dataclass
class TableRun:
    """One table's pass over the file."""

    spec: TableSpec
    report: TableReport
    mapping: dict[str, Mapped]
    now: datetime
    kept: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    conflicted: set[str] = field(default_factory=set)

    async def rows(self, session: AsyncSession, rows: list[dict[str, Any]]) -> None:
        """A batch of legacy rows, in one unit of work. A table whose writes can be repeated
        (`repeatable_writes`: writing a planned row changes nothing a later plan reads) writes the whole batch
        under one savepoint, and only when the database or the writer refuses one of them goes again row by row,
        each under its own savepoint, to name the refused row and keep the others; any other table goes row by
        row, plan and write in turn. The mapping rows are saved together at the end."""
        saved: list[dict[str, Any]] = []
        if getattr(self.spec, "repeatable_writes", False):
            planned = [decided for decided in map(self._decide, rows) if decided is not None]
            if not await self._write_together(session, planned, saved):
                for key, existing, plan in planned:
                    await self._write_alone(session, key, existing, plan, saved)
        else:
            for row in rows:
                decided = self._decide(row)
                if decided is not None:
                    await self._write_alone(session, *decided, saved)
        await (await statements(session)).executemany(SAVE_MAPPING, saved)

    def _decide(self, row: dict[str, Any]) -> tuple[str, Mapped | None, Plan] | None:
        """The row's plan, or None when nothing is to be written (skipped, refused, or kept as a conflict)."""
        key = str(row["id"])
        existing = self.mapping.get(key)
        try:
            plan = self.spec.plan(row, existing)
        except Skipped as skipped:
            self.report.skip(skipped.reason)
            return None
        except Refused as refused:
            self.report.refused.append((key, refused.reason))
            return None
        plan.key = key
        if existing is not None and key in self.conflicted:
            self.kept.add(key)
            self.spec.remember(key, existing.target, plan)
            return None
        return key, existing, plan

    async def _write_together(self, session: AsyncSession, planned: list[tuple[str, Mapped | None, Plan]],
                              saved: list[dict[str, Any]]) -> bool:
        """Every planned row under one savepoint; False (nothing written) when one of them is refused."""
        written = []
        try:
            async with session.begin_nested():
                await _savepoint_now(session)
                for key, existing, plan in planned:
                    written.append((key, plan, *await self._apply(session, existing, plan)))
        except (Refused, *DatabaseRefusal):
            return False
        for key, plan, target, owned, kind in written:
            self._succeeded(key, plan, target, owned, kind, saved)
        return True

    async def _write_alone(self, session: AsyncSession, key: str, existing: Mapped | None, plan: Plan,
                           saved: list[dict[str, Any]]) -> None:
        """One row under its own savepoint: a refusal is listed (a conflict for a row imported before, its Tenet
        row kept) and the batch goes on."""
        try:
            async with session.begin_nested():
                await _savepoint_now(session)
                target, owned, kind = await self._apply(session, existing, plan)
        except (Refused, *DatabaseRefusal) as exc:
            reason = exc.reason if isinstance(exc, Refused) else problem(exc)
            if existing is None:
                self.report.refused.append((key, reason))
                return
            self.kept.add(key)
            self.spec.remember(key, existing.target, plan)
            if not isinstance(exc, Refused):
                reason = "the newer row could not be applied: " + reason
            self.report.conflicts.append((key, reason))
            return
        self._succeeded(key, plan, target, owned, kind, saved)

    async def _apply(self, session: AsyncSession, existing: Mapped | None, plan: Plan) -> tuple[str, bool, str]:
        """Write the plan: the Tenet key, whether the import owns the row, and what was done (inserted, updated,
        unchanged). Changes nothing of the run, so a batch rolled back can be written again."""
        if existing is None:
            target, owned = await self.spec.insert(session, plan)
            return target, owned, "inserted"
        if existing.source_digest == plan.digest:
            return existing.target, existing.owned, "unchanged"
        if not existing.owned:
            return existing.target, False, "unchanged"  # an account that was Tenet's before the import: never changed
        return await self.spec.update(session, existing, plan), True, "updated"

    def _succeeded(self, key: str, plan: Plan, target: str, owned: bool, kind: str,
                   saved: list[dict[str, Any]]) -> None:
        if kind == "inserted":
            self.report.inserted += 1
            self.touched.add(key)
        elif kind == "updated":
            self.report.updated += 1
            self.touched.add(key)
        else:
            self.report.unchanged += 1
        self.kept.add(key)
        self.report.notes.extend((key, note) for note in plan.notes)
        self.spec.remember(key, target, plan)
        saved.append({"table": self.spec.name, "key": key, "target": target, "owned": owned, "digest": plan.digest,
                      "now": self.now})


async def load_mapping(db: Database, table: str) -> dict[str, Mapped]:
    async with db.read_only() as session:
        rows = await (await statements(session)).all(LOAD_MAPPING, {"table": table})
    return {r["legacy_key"]: Mapped(r["target_key"], r["owned"], r["source_digest"], r["row_digest"]) for r in rows}


async def find_conflicts(db: Database, run: TableRun) -> None:
    """Owned rows whose Tenet row is no longer what the import left: changed or removed in Tenet."""
    owned = {key: m for key, m in run.mapping.items() if m.owned and m.row_digest is not None}
    async with db.read_only() as session:
        now = await run.spec.fingerprints(session, sorted({m.target for m in owned.values()}))
    for key, mapped in owned.items():
        current = now.get(mapped.target)
        if current != mapped.row_digest:
            run.conflicted.add(key)
            why = "removed in Tenet" if current is None else "changed in Tenet since it was imported"
            run.report.conflicts.append((key, f"{why}; Tenet's version is kept"))


async def import_table(db: Database, source: LegacyFile, run: TableRun, progress: Progress) -> None:
    started = time.monotonic()
    try:
        await _import_rows(db, source, run, progress)
    finally:
        run.report.seconds += time.monotonic() - started


async def _import_rows(db: Database, source: LegacyFile, run: TableRun, progress: Progress) -> None:
    progress.start(run.spec.name, source.count(run.spec.name))
    batch: list[dict[str, Any]] = []

    async def flush() -> None:
        async with db.unit_of_work() as session:
            await run.rows(session, batch)
        progress.advance(len(batch))
        batch.clear()

    for row in source.rows(run.spec.name):
        run.report.read += 1
        batch.append(row)
        if len(batch) >= BATCH:
            await flush()
    if batch:
        await flush()


async def remove_absent(db: Database, run: TableRun, *, removable: Callable[[Mapped], str | None],
                        only: set[str] | None = None) -> None:
    """Imported rows the file no longer has (or now refuses): removed, unless changed in Tenet or still referred
    to by Tenet-side rows (a conflict, kept). `removable` answers why a row is never removed (audit rows).

    With `only` (the rows gone from the file, before the tables are imported, so a row that takes the place of a
    removed one finds it gone) the pass is quiet: what it cannot remove waits for the pass after the import, which
    lists it."""
    quiet = only is not None
    gone = sorted(only if only is not None else set(run.mapping) - run.kept)
    for start in range(0, len(gone), BATCH):
        async with db.unit_of_work() as session:
            for key in gone[start:start + BATCH]:
                await _remove_one(session, run, key, removable, quiet=quiet)


async def _remove_one(session: AsyncSession, run: TableRun, key: str, removable: Callable[[Mapped], str | None], *,
                      quiet: bool) -> None:
    mapped = run.mapping[key]
    kept_because = removable(mapped)
    if kept_because is not None or (mapped.owned and key in run.conflicted):
        if not quiet:
            if kept_because is not None:
                run.report.conflicts.append((key, kept_because))
            run.mapping.pop(key)  # a conflict "changed in Tenet" is listed already
        return
    try:
        async with session.begin_nested():
            if mapped.owned:
                await run.spec.remove(session, mapped)
    except DBAPIError as exc:
        if not quiet:
            run.report.conflicts.append((key, "gone from the file but kept: " + problem(exc)))
            run.mapping.pop(key)
        return
    await (await statements(session)).execute(FORGET, {"table": run.spec.name, "key": key})
    run.report.removed += 1
    run.mapping.pop(key)


async def store_fingerprints(db: Database, runs: Iterable[TableRun]) -> None:
    """The Tenet rows as this run left them, for the next run's conflict check. A batch's mapping rows are read
    with the batch, not the table's whole mapping at once (a large import holds enough already)."""
    for run in runs:
        keys = sorted(k for k in run.kept if k in run.touched or (k in run.mapping and run.mapping[k].row_digest is None
                                                                   and run.mapping[k].owned))
        for start in range(0, len(keys), BATCH):
            async with db.unit_of_work() as session:
                handle = await statements(session)
                owned = {r["legacy_key"]: r["target_key"] for r in await handle.all(
                    OWNED_TARGETS, {"table": run.spec.name, "keys": keys[start:start + BATCH]})}
                found = await run.spec.fingerprints(session, sorted(set(owned.values())))
                await handle.executemany(SET_ROW_DIGEST, [
                    {"table": run.spec.name, "key": key, "row_digest": found.get(target)}
                    for key, target in owned.items()])

