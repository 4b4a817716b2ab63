"""Both QR codes of meetings, regenerated and stored from the current TENET_PUBLIC_BASE_URL (spec §关键决策 3:
after the migration, and whenever the public address changes): `tenet meetings regenerate-qr`. In batches, one
unit of work each, with progress; each batch leaves one system audit row."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select

from tenet.db.database import Database
from tenet.meetings import audit, codes
from tenet.meetings.audit import Action, Resource
from tenet.meetings.legacy.engine import NoProgress, Progress
from tenet.meetings.models import Meeting, MeetingQrCode
from tenet.meetings.service import store_rendered_codes

BATCH = 200
MAX_RENDERERS = 8


async def live_meeting_ids(db: Database, only: str | None = None) -> list[str]:
    """Every meeting that is not DELETED (or the one named, when it is not)."""
    query = select(Meeting.id).where(Meeting.status != "DELETED").order_by(Meeting.id)
    if only is not None:
        query = query.where(Meeting.id == only)
    async with db.read_only() as session:
        return list((await session.scalars(query)).all())


async def stale(db: Database, meeting_ids: list[str], *, base_url: str) -> list[str]:
    """The meetings among `meeting_ids` whose stored codes are missing or encode another address than the current
    base URL's (a code depends on nothing else: a changed meeting keeps its codes)."""
    found: dict[str, dict[str, str]] = {}
    async with db.read_only() as session:
        for start in range(0, len(meeting_ids), 5000):
            rows = await session.execute(select(MeetingQrCode.meeting_id, MeetingQrCode.mode, MeetingQrCode.payload)
                                         .where(MeetingQrCode.meeting_id.in_(meeting_ids[start:start + 5000])))
            for meeting_id, mode, payload in rows:
                found.setdefault(meeting_id, {})[mode] = payload
    return [m for m in meeting_ids
            if any(found.get(m, {}).get(mode) != codes.check_in_url(base_url, m, mode) for mode in codes.MODES)]


async def store_codes_of(db: Database, meeting_ids: list[str], *, base_url: str, now: datetime,
                         progress: Progress | None = None) -> int:
    """Render and store both codes of each meeting, a batch per unit of work. Rendering is most of the work (about
    16 ms a meeting, pure Python), so more than one batch is rendered in worker processes, one per core, while
    this process writes the batches rendered before, in order; a single batch renders in a thread."""
    progress = progress or NoProgress()
    progress.start("qr codes", len(meeting_ids))
    chunks = [meeting_ids[start:start + BATCH] for start in range(0, len(meeting_ids), BATCH)]
    loop = asyncio.get_running_loop()
    with _renderers(len(chunks)) as (executor, ahead):
        rendering: deque[tuple[list[str], asyncio.Future[list[dict[str, Any]]]]] = deque()
        for chunk in chunks:
            rendering.append((chunk, loop.run_in_executor(executor, codes.rendered_rows, base_url, chunk)))
            if len(rendering) > ahead:  # a bounded look-ahead: memory stays a few batches of images
                await _store(db, *rendering.popleft(), base_url=base_url, now=now, progress=progress)
        while rendering:
            await _store(db, *rendering.popleft(), base_url=base_url, now=now, progress=progress)
    return len(meeting_ids)


@contextmanager
def _renderers(batches: int) -> Iterator[tuple[Executor, int]]:
    """Worker processes when there is more than one batch (spawned: the caller runs an event loop and threads, which
    a fork would copy mid-flight), else one thread; and how many batches may be rendered ahead of the writes."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if batches <= 1 or cores <= 1:
        with ThreadPoolExecutor(max_workers=1) as threads:
            yield threads, 1
        return
    workers = min(cores, batches, MAX_RENDERERS)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as processes:
        yield processes, workers + 1


async def _store(db: Database, chunk: list[str], rendering: asyncio.Future[list[dict[str, Any]]], *, base_url: str,
                 now: datetime, progress: Progress) -> None:
    rendered = await rendering
    async with db.unit_of_work() as session:
        await store_rendered_codes(session, rendered, now=now, actor_id=None)
        await session.execute(insert(audit.AuditLog).values(
            occurred_at=now, action=Action.QR_CODES_REGENERATED.value, resource=Resource.QR_CODE.value,
            resource_id="*", actor_type="system",
            changes={"entityId": "*", "entityType": Resource.QR_CODE.value, "before": None,
                     "after": {"meetings": len(chunk), "base_url": base_url}}))
    progress.advance(len(chunk))
