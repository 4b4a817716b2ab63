"""Reconciliation (spec layer 5; docs/design/outlook.md §8): on the policy's `reconcile_cron`, every live binding of
a mailbox is compared in full with Graph (the master, its `/instances` over the window, each linked meeting's owned
fields and attendees) and the drift repaired: what a lost notification (`missed`), a crash between a page and its
binding sync, or a silent deletion left behind. Each run records what it found and fixed by kind (created,
updated, cancelled, excluded, skipped, superseded) in outlook_sync_runs, kind RECONCILE (GET /sync-status)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.meetings.outlook import apply, runs
from tenet.meetings.outlook.policy import Policy

_BINDINGS = """
    SELECT id FROM meeting_attendance.outlook_bindings
     WHERE mailbox_id = %(mailbox)s AND status IN ('PENDING', 'ACTIVE') ORDER BY created_at, id"""
_DUE = """
    SELECT id FROM meeting_attendance.outlook_mailboxes WHERE state IN ('OK', 'DEGRADED') ORDER BY id"""


def due(rules: Policy, now: datetime) -> bool:
    """Whether the policy's cron names this minute (checked each minute by `outlook_schedule`)."""
    return bool(croniter.match(rules.reconcile_cron, now.replace(second=0, microsecond=0)))


async def mailboxes(db: Database) -> list[uuid.UUID]:
    async with db.read_only() as session:
        return [r["id"] for r in await (await statements(session)).all(_DUE)]


async def reconcile(db: Database, sync: apply.BindingSync, *, mailbox_id: uuid.UUID, now: datetime
                    ) -> dict[str, Any]:
    async with db.read_only() as session:
        ids = [r["id"] for r in await (await statements(session)).all(_BINDINGS, {"mailbox": mailbox_id})]
    counts = apply.new_counts()

    async def every_binding() -> None:
        for binding_id in ids:
            await sync.run(binding_id, now=now, counts=counts)

    result = await runs.recorded(db, sync.client, mailbox_id=mailbox_id, kind="RECONCILE", now=now, counts=counts,
                                 body=every_binding)
    return {**result, "bindings": len(ids)}
