"""Dual write while the old app still writes its tables (spec 000 §G phase 2): triggers on the legacy tables
capture every row change into `social_legacy.changes` (in the legacy database, next to the tables), and `sync`
applies the log to the new model in order, through the same handlers as the back-fill. A change that cannot
be applied lands in `social_legacy.differences` with its operation and capture time; `sync --replay --since T
--until T` applies those of a time window again ("按时间窗重放补偿") and marks the ones that now apply resolved.

The two databases do not share a transaction: a batch commits in Tenet first, then is marked applied in the
legacy log. A crash between the two re-applies the batch on the next run, which is harmless: an INSERT of a
mapped row updates it, a DELETE of a gone row does nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.social.legacy import engine
from tenet.social.legacy.engine import Change, Context
from tenet.social.legacy.schema import SOURCES, columns_present, qualified

TRIGGER = "tenet_capture_change"

_CAPTURE = """
CREATE SCHEMA IF NOT EXISTS social_legacy;
CREATE TABLE IF NOT EXISTS social_legacy.changes (
    id bigserial PRIMARY KEY,
    captured_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    source_table text NOT NULL,
    operation text NOT NULL CHECK (operation IN ('INSERT', 'UPDATE', 'DELETE')),
    legacy_id bigint NOT NULL,
    row_data jsonb NOT NULL,
    applied_at timestamptz);
ALTER TABLE social_legacy.changes ENABLE ROW LEVEL SECURITY;
CREATE INDEX IF NOT EXISTS ix_changes_pending ON social_legacy.changes (id) WHERE applied_at IS NULL;
CREATE OR REPLACE FUNCTION social_legacy.capture_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
BEGIN
  INSERT INTO social_legacy.changes (source_table, operation, legacy_id, row_data)
  VALUES (TG_TABLE_NAME, TG_OP, (r ->> TG_ARGV[0])::bigint, r);
  RETURN NULL;
END $$;
"""


async def install(legacy: psycopg.AsyncConnection, schema: str) -> list[str]:
    """The change log and a capture trigger on every legacy table that exists (idempotent)."""
    present = await columns_present(legacy, schema)
    lines = []
    async with legacy.transaction():
        await legacy.execute(_CAPTURE)
        for source in SOURCES:
            if source.table not in present:
                lines.append(f"skip {source.table}: no such table, nothing to capture")
                continue
            table = qualified(schema, source.table)
            await legacy.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(sql.Identifier(TRIGGER), table))
            await legacy.execute(sql.SQL(
                "CREATE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW "
                "EXECUTE FUNCTION social_legacy.capture_change({})").format(
                    sql.Identifier(TRIGGER), table, sql.Literal(source.key)))
            lines.append(f"capturing {source.table}")
    return lines


async def uninstall(legacy: psycopg.AsyncConnection, schema: str) -> list[str]:
    """Rollback of the dual-write phase: the triggers go (the legacy app writes on, unobserved); the log stays."""
    present = await columns_present(legacy, schema)
    async with legacy.transaction():
        for source in SOURCES:
            if source.table in present:
                await legacy.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                    sql.Identifier(TRIGGER), qualified(schema, source.table)))
    return [f"stopped capturing {t}" for t in (s.table for s in SOURCES) if t in present]


_PENDING = """SELECT id, captured_at, source_table, operation, legacy_id, row_data FROM social_legacy.changes
               WHERE applied_at IS NULL ORDER BY id LIMIT %(n)s"""


class SyncBusy(Exception):  # another sync holds the log
    pass


_SYNC_LOCK = "SELECT pg_try_advisory_lock(hashtext('tenet.social_legacy.sync'))"
_SYNC_UNLOCK = "SELECT pg_advisory_unlock(hashtext('tenet.social_legacy.sync'))"


async def apply_log(db: Database, legacy: psycopg.AsyncConnection, ctx: Context, *,
                    batch_size: int = 500) -> tuple[int, int]:
    """Apply the captured changes in capture order; answers (applied, refused). One sync at a time (a lock on
    the legacy log's database, held for the run): a second one raises SyncBusy instead of applying a batch the
    first has applied and not yet marked."""
    cursor = await legacy.execute(_SYNC_LOCK)
    if not (await cursor.fetchone() or (False,))[0]:
        raise SyncBusy("another `tenet social legacy sync` is applying the change log")
    try:
        return await _apply_all(db, legacy, ctx, batch_size)
    finally:
        await legacy.execute(_SYNC_UNLOCK)


async def _apply_all(db: Database, legacy: psycopg.AsyncConnection, ctx: Context,
                     batch_size: int) -> tuple[int, int]:
    applied = refused = 0
    ctx.phase = "sync"
    while True:
        async with legacy.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(_PENDING, {"n": batch_size})
            changes = await cursor.fetchall()
        if not changes:
            return applied, refused
        async with db.unit_of_work() as session:
            await (await statements(session)).execute(engine.APPLY_LOCK)
            for c in changes:
                if c["source_table"] not in {s.table for s in SOURCES}:
                    continue
                ok = await engine.apply(session, ctx, Change(c["source_table"], c["operation"], c["legacy_id"],
                                                             c["row_data"], c["captured_at"], c["id"]))
                applied, refused = applied + ok, refused + (not ok)
        await legacy.execute("UPDATE social_legacy.changes SET applied_at = %(now)s WHERE id = ANY(%(ids)s)",
                             {"now": ctx.now, "ids": [c["id"] for c in changes]})


_WINDOW = """SELECT id, source_table, legacy_id, operation, change_id, captured_at, row_data
               FROM social_legacy.differences
              WHERE resolved_at IS NULL AND captured_at >= %(since)s AND captured_at < %(until)s
              ORDER BY captured_at, id"""


async def replay(db: Database, ctx: Context, *, since: datetime, until: datetime) -> tuple[int, int]:
    """Apply again the refused changes captured in [since, until); answers (now applied, still refused)."""
    ctx.phase = "replay"
    async with db.unit_of_work() as session:
        run = await statements(session)
        await run.execute(engine.APPLY_LOCK)
        differences = await run.all(_WINDOW, {"since": since, "until": until})
        applied = 0
        for d in differences:
            row: dict[str, Any] = d["row_data"] or {}
            change = Change(d["source_table"], d["operation"], d["legacy_id"], row, d["captured_at"], d["change_id"])
            if await engine.apply(session, ctx, change, log_refusal=False):
                applied += 1
                await run.execute("UPDATE social_legacy.differences SET resolved_at = %(now)s WHERE id = %(id)s",
                                  {"now": ctx.now, "id": d["id"]})
    return applied, len(differences) - applied
