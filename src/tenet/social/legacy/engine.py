"""What back-fill and sync share: the run's context, the legacy id -> new id map, the difference log, and
applying one legacy row (or its removal) in a savepoint, so a refused row is logged and its batch goes on.

A refusal is either a `Refused` raised by a handler (the row cannot become a Tenet row, and why) or the
services' own `DomainError`: the back-fill goes through the social services, so every rule they keep holds
for migrated rows too (`tenet invariants check` is clean after a run).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError
from tenet.kernel.statements import statements


class Refused(Exception):  # a refusal, not a failure: the run goes on
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass
class Context:
    now: datetime
    password_hash: str  # of a random secret nobody keeps: accounts made from legacy users have no usable password
    default_timezone: str
    phase: str = "backfill"  # backfill | sync | replay
    notes: list[tuple[str, str]] = field(default_factory=list)  # what a row lost on the way, logged with it

    def note(self, code: str, detail: str) -> None:
        self.notes.append((code, detail))


@dataclass(frozen=True)
class Change:
    """One legacy row event: from the change log (sync), or a back-filled row seen as its INSERT."""
    source_table: str
    operation: str  # INSERT | UPDATE | DELETE
    legacy_id: int
    row: dict[str, Any]
    captured_at: datetime
    change_id: int | None = None


# Taken first by every transaction that applies legacy rows (a back-fill batch, a sync batch, a replay): they run
# one at a time, so "is this legacy row mapped yet?" is answered after the other one's commit, never beside it.
APPLY_LOCK = "SELECT pg_advisory_xact_lock(hashtext('tenet.social_legacy.apply'))"
_MAPPED = "SELECT new_id FROM social_legacy.id_map WHERE source_table = %(t)s AND legacy_id = %(id)s"
_MAP = """
    INSERT INTO social_legacy.id_map (source_table, legacy_id, new_id, mapped_at)
    VALUES (%(t)s, %(id)s, %(new)s, %(now)s)
    ON CONFLICT (source_table, legacy_id) DO UPDATE SET new_id = EXCLUDED.new_id, mapped_at = EXCLUDED.mapped_at"""
_UNMAP = "DELETE FROM social_legacy.id_map WHERE source_table = %(t)s AND legacy_id = %(id)s"
_DIFFERENCE = """
    INSERT INTO social_legacy.differences (noted_at, phase, source_table, legacy_id, operation, change_id,
                                           captured_at, code, detail, row_data, resolved_at)
    VALUES (%(now)s, %(phase)s, %(t)s, %(id)s, %(op)s, %(change)s, %(captured)s, %(code)s, %(detail)s,
            CAST(%(row)s AS jsonb), %(resolved)s)"""


async def mapped_id(session: AsyncSession, table: str, legacy_id: Any) -> uuid.UUID | None:
    if legacy_id is None:
        return None
    try:
        key = int(legacy_id)
    except (TypeError, ValueError):
        return None
    return await (await statements(session)).value(_MAPPED, {"t": table, "id": key})


async def require_mapped(session: AsyncSession, table: str, legacy_id: Any, what: str) -> uuid.UUID:
    found = await mapped_id(session, table, legacy_id)
    if found is None:
        raise Refused(f"UNKNOWN_{what.upper().replace(' ', '_')}",
                      f"{what} {legacy_id} of the legacy data has no Tenet row (absent, or refused itself)")
    return found


async def log_difference(session: AsyncSession, ctx: Context, change: Change, code: str, detail: str, *,
                         resolved: bool = False) -> None:
    await (await statements(session)).execute(_DIFFERENCE, {"resolved": ctx.now if resolved else None,
        "now": ctx.now, "phase": ctx.phase, "t": change.source_table, "id": change.legacy_id, "op": change.operation,
        "change": change.change_id, "captured": change.captured_at, "code": code, "detail": detail[:2000],
        "row": json.dumps(change.row, default=str)})


# What the database refuses in a row (a CHECK, a unique index, a value out of range), through the ORM or through
# kernel.statements (psycopg's own classes): a refusal of that row, not a failure of the run.
DATABASE_REFUSALS = (IntegrityError, DataError, psycopg.errors.IntegrityError, psycopg.errors.DataError)


def _reason(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, Refused):
        return exc.code, exc.detail
    if isinstance(exc, DomainError):
        return str(exc.code), exc.detail or str(exc.code)
    diag = getattr(getattr(exc, "orig", exc), "diag", None)
    return "CONSTRAINT_REFUSED", f"refused by {getattr(diag, 'constraint_name', None) or type(exc).__name__}"


async def apply(session: AsyncSession, ctx: Context, change: Change, *, log_refusal: bool = True) -> bool:
    """Apply one change in a savepoint; answer whether it was applied. A refusal rolls the savepoint back and
    lands in the difference log with its operation (unless `log_refusal` is False: a replay keeps the refusal it
    retried); notes of an applied row land there too, as resolved (a known loss, nothing to replay)."""
    from tenet.social.legacy.handlers import HANDLERS

    handler = HANDLERS[change.source_table]
    ctx.notes = []
    mapped = await mapped_id(session, change.source_table, change.legacy_id)
    try:
        async with session.begin_nested():
            if change.operation == "DELETE":
                await handler.remove(session, ctx, change.row, mapped)
                new_id = None
            else:
                new_id = await handler.upsert(session, ctx, change.row, mapped)
    except (Refused, DomainError, *DATABASE_REFUSALS) as exc:
        if log_refusal:
            await log_difference(session, ctx, change, *_reason(exc))
        return False
    run = await statements(session)
    if change.operation == "DELETE" and mapped is not None and handler.unmap_on_delete:
        await run.execute(_UNMAP, {"t": change.source_table, "id": change.legacy_id})
    elif new_id is not None and new_id != mapped:
        await run.execute(_MAP, {"t": change.source_table, "id": change.legacy_id, "new": new_id, "now": ctx.now})
    for code, detail in ctx.notes:
        await log_difference(session, ctx, change, code, detail, resolved=True)
    return True
