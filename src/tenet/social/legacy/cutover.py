"""The read switch (spec 000 §G phase 3): a percentage of users read from the new model, chosen by a stable
hash bucket of their Tenet account id, so a user stays on one side while the percentage only grows, and the
same users move first on every server. The percentage is a row (`social_legacy.read_switch`), read on every
question: a change takes effect without a restart, and `--rollback` (back to 0 %: everyone reads the legacy
tables again) is one command at any phase."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements

BUCKETS = 100

_READ = "SELECT read_percent, changed_at, previous_percent FROM social_legacy.read_switch"
_SET = """
    INSERT INTO social_legacy.read_switch AS s (id, read_percent, changed_at, previous_percent)
    VALUES (true, %(p)s, %(now)s, 0)
    ON CONFLICT (id) DO UPDATE SET previous_percent = s.read_percent, read_percent = EXCLUDED.read_percent,
           changed_at = EXCLUDED.changed_at
    RETURNING read_percent, changed_at, previous_percent"""
_LEGACY_USER = "SELECT new_id FROM social_legacy.id_map WHERE source_table = 'users' AND legacy_id = %(id)s"
_ACCOUNT = "SELECT id FROM iam.user_account WHERE id = %(id)s AND status <> 'deleted'"


def bucket(user_id: uuid.UUID) -> int:
    """0..99, the same for a user forever (sha-256 of the id's bytes: no process's hash seed in it)."""
    return int.from_bytes(hashlib.sha256(user_id.bytes).digest()[:8], "big") % BUCKETS


@dataclass(frozen=True)
class Switch:
    read_percent: int
    changed_at: datetime | None
    previous_percent: int | None


@dataclass(frozen=True)
class Side:
    user_id: uuid.UUID | None
    legacy_user_id: int | None
    bucket: int | None
    read_percent: int
    reads_from: str  # "tenet" | "legacy"


async def current(session: AsyncSession) -> Switch:
    row = await (await statements(session)).one(_READ)
    return Switch(0, None, None) if row is None else Switch(**row)


async def set_percent(session: AsyncSession, *, percent: int, now: datetime) -> Switch:
    if not 0 <= percent <= 100:
        raise ValueError("a percentage is 0..100")
    row = await (await statements(session)).one(_SET, {"p": percent, "now": now})
    assert row is not None
    return Switch(**row)


def parse_user(user: str) -> uuid.UUID | int:
    """A Tenet account id (UUID) or a legacy user id (digits, a bigint); ValueError for anything else."""
    if user.isdigit() and len(user) <= 18:
        return int(user)
    return uuid.UUID(user)


async def side_of(session: AsyncSession, user: uuid.UUID | int) -> Side | None:
    """Which side a user reads from: `user` is a Tenet account id, or a legacy user id; a legacy user never
    migrated reads the legacy tables whatever the percentage. None: no such (live) Tenet account."""
    switch = await current(session)
    run = await statements(session)
    legacy_id: int | None = None
    if isinstance(user, int):
        legacy_id = user
        user_id = await run.value(_LEGACY_USER, {"id": legacy_id})
    else:
        user_id = await run.value(_ACCOUNT, {"id": user})
        if user_id is None:
            return None
    if user_id is None:
        return Side(None, legacy_id, None, switch.read_percent, "legacy")
    slot = bucket(user_id)
    return Side(user_id, legacy_id, slot, switch.read_percent, "tenet" if slot < switch.read_percent else "legacy")


class CleanUpRefused(Exception):  # a precondition a person must meet first
    pass


async def clean_up(session: AsyncSession, legacy: psycopg.AsyncConnection, schema: str, *,
                   archive_as: str) -> list[str]:
    """Phase 4 (spec 000 §G): once everyone reads from Tenet, the dual write ends (triggers and the capture
    function go) and the legacy schema is archived under another name: a cold copy kept, out of the old app's
    way; dropping it later is a person's decision (after `pg_dump -n`)."""
    from tenet.social.legacy import sync

    state = await current(session)
    if state.read_percent != 100:
        raise CleanUpRefused(f"the read switch is at {state.read_percent} %: clean up once everyone reads from "
                             "Tenet (`cutover --percent 100`)")
    lines = await sync.uninstall(legacy, schema)
    async with legacy.transaction():
        await legacy.execute("DROP FUNCTION IF EXISTS social_legacy.capture_change()")
        await legacy.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(schema),
                                                                            sql.Identifier(archive_as)))
    return [*lines, f"legacy schema {schema} archived as {archive_as}"]
