"""`probe` and `backfill`: what the legacy database holds, and the idempotent, resumable copy of it.

Each source table is read in key order in batches; one batch is one Tenet transaction holding its rows, their
mapping (legacy id -> new id), their refusals (the difference log) and the table's checkpoint (the last legacy
key done). A run killed at any point leaves whole batches behind it, and the next run starts after the last
committed key, so killed-and-rerun ends exactly where one uninterrupted run ends; a rerun after a complete run
reads nothing. Rows that change in the legacy app after their batch reach Tenet through `sync`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.social.legacy import engine
from tenet.social.legacy.engine import Change, Context
from tenet.social.legacy.schema import SOURCES, Source, columns_present, qualified

Progress = Callable[[str, int, int], None]  # table, rows done so far, rows in the source


class BackfillInterrupted(Exception):  # the test hook's stop, standing in for a kill
    pass


@dataclass
class PlanLine:
    source: Source
    missing: list[str] = field(default_factory=list)  # required columns absent ("*" = no table)
    absent_optional: list[str] = field(default_factory=list)
    rows: int = 0
    done_up_to: int = 0

    @property
    def runnable(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        s = self.source
        if self.missing == ["*"]:
            return f"skip {s.table}: no such table in the legacy schema"
        if self.missing:
            return f"skip {s.table}: required column(s) {', '.join(self.missing)} missing"
        extra = f" (without {', '.join(self.absent_optional)})" if self.absent_optional else ""
        resume = f", resuming after key {self.done_up_to}" if self.done_up_to else ""
        return f"back-fill {s.table} -> {s.target}: {self.rows} row(s){extra}{resume}"


async def plan(db: Database, legacy: psycopg.AsyncConnection, schema: str) -> list[PlanLine]:
    present = await columns_present(legacy, schema)
    async with db.unit_of_work() as session:
        done = {r["source_table"]: r["last_legacy_id"] for r in await (await statements(session)).all(
            "SELECT source_table, last_legacy_id FROM social_legacy.checkpoints")}
    lines = []
    for source in SOURCES:
        columns = present.get(source.table)
        line = PlanLine(source, done_up_to=done.get(source.table, 0))
        if columns is None:
            line.missing = ["*"]
        else:
            line.missing = [c for c in source.required if c not in columns]
            line.absent_optional = [c for c in source.optional if c not in columns]
        if line.runnable:
            cursor = await legacy.execute(sql.SQL("SELECT count(*) FROM {}").format(qualified(schema, source.table)))
            line.rows = (await cursor.fetchone() or (0,))[0]
        lines.append(line)
    return lines


_CHECKPOINT = """
    INSERT INTO social_legacy.checkpoints AS c (source_table, last_legacy_id, rows_read, rows_applied, rows_refused,
                                                started_at, updated_at, finished_at)
    VALUES (%(t)s, %(last)s, %(read)s, %(applied)s, %(refused)s, %(now)s, %(now)s, %(finished)s)
    ON CONFLICT (source_table) DO UPDATE SET last_legacy_id = EXCLUDED.last_legacy_id,
           rows_read = c.rows_read + EXCLUDED.rows_read, rows_applied = c.rows_applied + EXCLUDED.rows_applied,
           rows_refused = c.rows_refused + EXCLUDED.rows_refused, updated_at = EXCLUDED.updated_at,
           finished_at = EXCLUDED.finished_at"""


async def read_batch(legacy: psycopg.AsyncConnection, schema: str, source: Source, after: int,
                     limit: int) -> list[dict[str, Any]]:
    statement = sql.SQL("SELECT * FROM {} WHERE {} > %(after)s ORDER BY {} LIMIT %(n)s").format(
        qualified(schema, source.table), sql.Identifier(source.key), sql.Identifier(source.key))
    async with legacy.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(statement, {"after": after, "n": limit})
        return await cursor.fetchall()


_DONE_UP_TO = "SELECT last_legacy_id FROM social_legacy.checkpoints WHERE source_table = %(t)s"


async def _one_batch(db: Database, ctx: Context, source: Source, rows: list[dict[str, Any]], after: int,
                     finished: bool) -> tuple[int, int] | int:
    """Apply one batch read after key `after`: (applied, refused), or, when another run committed past `after`
    meanwhile, the key it reached (nothing applied: the caller reads on from there)."""
    applied = 0
    async with db.unit_of_work() as session:
        run = await statements(session)
        # One batch at a time across runs (two operators, a back-fill beside a sync): the lock, then the
        # checkpoint read under it decides whether this batch is still to do.
        await run.execute(engine.APPLY_LOCK)
        done_up_to = await run.value(_DONE_UP_TO, {"t": source.table}) or 0
        if done_up_to > after:
            return int(done_up_to)
        for row in rows:
            change = Change(source.table, "INSERT", int(row[source.key]), row, ctx.now)
            applied += await engine.apply(session, ctx, change)
        await (await statements(session)).execute(_CHECKPOINT, {
            "t": source.table, "last": int(rows[-1][source.key]), "read": len(rows), "applied": applied,
            "refused": len(rows) - applied, "now": ctx.now, "finished": ctx.now if finished else None})
    return applied, len(rows) - applied


async def backfill(db: Database, legacy: psycopg.AsyncConnection, schema: str, ctx: Context, *,
                   batch_size: int = 500, progress: Progress | None = None,
                   stop_after_batches: int | None = None) -> dict[str, tuple[int, int]]:
    """Every runnable source in dependency order; answers table -> (applied, refused) of this run."""
    report: dict[str, tuple[int, int]] = {}
    batches = 0
    for line in await plan(db, legacy, schema):
        if not line.runnable:
            continue
        source, after, done = line.source, line.done_up_to, 0
        applied_total = refused_total = 0
        while rows := await read_batch(legacy, schema, source, after, batch_size):
            outcome = await _one_batch(db, ctx, source, rows, after, finished=len(rows) < batch_size)
            if isinstance(outcome, int):
                after = outcome
                continue
            applied, refused = outcome
            applied_total, refused_total = applied_total + applied, refused_total + refused
            after, done = int(rows[-1][source.key]), done + len(rows)
            if progress is not None:
                progress(source.table, done, line.rows)
            batches += 1
            if stop_after_batches is not None and batches >= stop_after_batches:
                raise BackfillInterrupted(f"stopped after {batches} batch(es) as asked")
        report[source.table] = (applied_total, refused_total)
        await _mark_finished(db, source, ctx)
    return report


async def _mark_finished(db: Database, source: Source, ctx: Context) -> None:
    """The source was read to its end (a last batch of exactly `batch_size` rows did not know it)."""
    async with db.unit_of_work() as session:
        await (await statements(session)).execute(
            "UPDATE social_legacy.checkpoints SET finished_at = %(now)s WHERE source_table = %(t)s "
            "AND finished_at IS NULL", {"now": ctx.now, "t": source.table})
