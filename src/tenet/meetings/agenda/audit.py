"""The agenda's audit rows (spec §审计扩展, MA-INV-28): the meetings audit log with the spec's constants, `changes`
= {entityId, entityType, before, after} plus the meeting's end at write time (`meetingEndTime`, so a later
reschedule cannot make an old row look wrong) and `agendaModifiedAfterMeetingEnd: true` once the meeting ended."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.meetings import audit
from tenet.meetings.audit import Action, Resource


async def record(session: AsyncSession, *, action: Action, resource: Resource, resource_id: object, meeting_id: str,
                 meeting_end: datetime, now: datetime, actor: Actor | None, before: dict[str, Any] | None = None,
                 after: dict[str, Any] | None = None, **flags: Any) -> None:
    if now >= meeting_end:
        flags["agendaModifiedAfterMeetingEnd"] = True
    await audit.record(session, action=action, resource=resource, resource_id=resource_id, meeting_id=meeting_id,
                       now=now, actor=actor, before=before, after=after, meetingEndTime=meeting_end, **flags)
