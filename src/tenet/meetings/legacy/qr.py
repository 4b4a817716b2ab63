"""Both QR codes of meetings, regenerated and stored from the current TENET_PUBLIC_BASE_URL (spec §关键决策 3:
after the migration, and whenever the public address changes): `tenet meetings regenerate-qr`. In batches, one
unit of work each, with progress; each batch leaves one system audit row."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select

from tenet.db.database import Database
from tenet.meetings import audit, codes
from tenet.meetings.audit import Action, Resource
from tenet.meetings.legacy.engine import NoProgress, Progress
from tenet.meetings.models import Meeting, MeetingQrCode
from tenet.meetings.service import store_codes

BATCH = 200


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
    progress = progress or NoProgress()
    progress.start("qr codes", len(meeting_ids))
    for start in range(0, len(meeting_ids), BATCH):
        chunk = meeting_ids[start:start + BATCH]
        async with db.unit_of_work() as session:
            await store_codes(session, chunk, base_url=base_url, now=now, actor_id=None)
            await session.execute(insert(audit.AuditLog).values(
                occurred_at=now, action=Action.QR_CODES_REGENERATED.value, resource=Resource.QR_CODE.value,
                resource_id="*", actor_type="system",
                changes={"entityId": "*", "entityType": Resource.QR_CODE.value, "before": None,
                         "after": {"meetings": len(chunk), "base_url": base_url}}))
        progress.advance(len(chunk))
    return len(meeting_ids)
