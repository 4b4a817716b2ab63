"""Jobs of the agenda (a blueprint of its own, registered under the meetings domain): the purge of soft-deleted
rows and files after MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS (spec §软删 + cron 物理清理, MA-INV-27), and the
sweep of what interrupted uploads leave behind (spec: "cron 兜底")."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import procrastinate

from tenet.db.database import Database
from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import section
from tenet.meetings.agenda import attachments, queries, storage
from tenet.meetings.settings import MeetingSettings

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()

TEMP_MAX_AGE = timedelta(hours=1)
ORPHAN_MIN_AGE = timedelta(hours=24)


async def purge(db: Database, store: storage.Storage, *, now: datetime, days: int) -> dict[str, Any]:
    """Children first, batch by batch, each its own transaction (a long backlog never holds one long transaction)."""
    cutoff = now - timedelta(days=days)
    counts: dict[str, Any] = {}
    removed_bytes = 0
    for table in attachments._PURGE_TABLES:
        total = 0
        while True:
            async with db.unit_of_work() as session:
                rows, size = await attachments.purge_batch(session, table=table, storage=store, cutoff=cutoff)
            total += rows
            removed_bytes += size
            if rows < attachments.PURGE_BATCH:
                break
        counts[table] = total
    counts["bytes"] = removed_bytes
    return counts


@job(blueprint, name="purge_deleted_agenda", cron="23 * * * *", unit_of_work=False, history=True)
async def purge_deleted_agenda(scope: JobScope, timestamp: int) -> dict[str, Any]:
    days = section(scope.settings, MeetingSettings).meeting_attachment_physical_delete_days
    counts = await purge(scope.db, storage.build(scope.settings), now=scope.now, days=days)
    if any(counts.values()):
        log.info("purged deleted agenda rows and files", extra=counts)
    return counts


async def sweep(db: Database, store: storage.Storage, temp_dir: Any) -> dict[str, int]:
    """Temp files older than an hour (a process died mid-upload), then stored files older than a day that no row
    names (a process died between moving the file into place and committing its row). Ages are read against the
    wall clock: the file system (or the bucket) dates the files, not the service's clock."""
    cutoff = time.time() - TEMP_MAX_AGE.total_seconds()
    now = datetime.now(UTC)

    def stale_temp_files() -> int:
        removed = 0
        if temp_dir.is_dir():
            for path in temp_dir.iterdir():
                try:
                    if path.is_file() and path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed

    temp = await asyncio.to_thread(stale_temp_files)
    keys = await store.keys_older_than(now - ORPHAN_MIN_AGE)
    orphans = 0
    for start in range(0, len(keys), 500):
        batch = keys[start:start + 500]
        known = await queries.known_storage_keys(db.reads, batch)
        for key in batch:
            if key not in known:
                await store.delete(key)
                orphans += 1
    return {"temp_files": temp, "orphan_files": orphans}


@job(blueprint, name="sweep_upload_leftovers", cron="41 * * * *", unit_of_work=False, history=True)
async def sweep_upload_leftovers(scope: JobScope, timestamp: int) -> dict[str, int]:
    counts = await sweep(scope.db, storage.build(scope.settings), storage.temp_dir(scope.settings))
    if any(counts.values()):
        log.info("swept upload leftovers", extra=counts)
    return counts
