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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

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


def problem(exc: DBAPIError) -> str:
    """The reason a refused write gives: the constraint the database named, else its first line."""
    diag = getattr(exc.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    first = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
    return f"refused by the database ({name}): {first}" if name else f"refused by the database: {first}"


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

    async def row(self, session: AsyncSession, row: dict[str, Any]) -> None:
        key = str(row["id"])
        existing = self.mapping.get(key)
        try:
            plan = self.spec.plan(row, existing)
        except Skipped as skipped:
            self.report.skip(skipped.reason)
            return
        except Refused as refused:
            self.report.refused.append((key, refused.reason))
            return
        if existing is not None and key in self.conflicted:
            self.kept.add(key)
            self.spec.remember(key, existing.target, plan)
            return
        try:
            async with session.begin_nested():
                target, owned = await self._write(session, key, existing, plan)
        except Refused as refused:
            if existing is not None:
                self.kept.add(key)
                self.spec.remember(key, existing.target, plan)
                self.report.conflicts.append((key, refused.reason))
                return
            self.report.refused.append((key, refused.reason))
            return
        except DBAPIError as exc:
            if existing is not None:
                self.kept.add(key)
                self.spec.remember(key, existing.target, plan)
                self.report.conflicts.append((key, "the newer row could not be applied: " + problem(exc)))
                return
            self.report.refused.append((key, problem(exc)))
            return
        self.kept.add(key)
        self.report.notes.extend((key, note) for note in plan.notes)
        self.spec.remember(key, target, plan)
        await (await statements(session)).execute(SAVE_MAPPING, {
            "table": self.spec.name, "key": key, "target": target, "owned": owned, "digest": plan.digest,
            "now": self.now})

    async def _write(self, session: AsyncSession, key: str, existing: Mapped | None, plan: Plan) -> tuple[str, bool]:
        if existing is None:
            target, owned = await self.spec.insert(session, plan)
            self.report.inserted += 1
            self.touched.add(key)
            return target, owned
        if existing.source_digest == plan.digest:
            self.report.unchanged += 1
            return existing.target, existing.owned
        if not existing.owned:
            self.report.unchanged += 1  # an account that was Tenet's before the import: never changed by it
            return existing.target, False
        target = await self.spec.update(session, existing, plan)
        self.report.updated += 1
        self.touched.add(key)
        return target, True


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
    progress.start(run.spec.name, source.count(run.spec.name))
    batch: list[dict[str, Any]] = []

    async def flush() -> None:
        async with db.unit_of_work() as session:
            for row in batch:
                await run.row(session, row)
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
    """The Tenet rows as this run left them, for the next run's conflict check."""
    for run in runs:
        keys = sorted(k for k in run.kept if k in run.touched or (k in run.mapping and run.mapping[k].row_digest is None
                                                                   and run.mapping[k].owned))
        mapping = await load_mapping(db, run.spec.name)
        for start in range(0, len(keys), BATCH):
            chunk = [k for k in keys[start:start + BATCH] if k in mapping and mapping[k].owned]
            async with db.unit_of_work() as session:
                found = await run.spec.fingerprints(session, sorted({mapping[k].target for k in chunk}))
                handle = await statements(session)
                for key in chunk:
                    await handle.execute(SET_ROW_DIGEST, {"table": run.spec.name, "key": key,
                                                          "row_digest": found.get(mapping[key].target)})

