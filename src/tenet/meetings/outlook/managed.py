"""OUTLOOK_MANAGED (docs/design/outlook.md §7; issue 17): a meeting the sync wrote, or the series it wrote, keeps the
fields Outlook owns as Outlook has them. The meetings service asks here before it changes one (one place, so the
API and the console pages refuse alike); the sync itself writes with `outlook_sync=True` and is not asked.

Managed means linked through a live binding: once the binding is RELEASED its meetings are ordinary again."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.meetings.outlook import errors

# Title, description, location, online link, start, end, time zone and cancellation are Outlook's.
MEETING_OWNED = frozenset({"title", "description", "location", "online_link", "start_time", "end_time", "timezone"})
SERIES_OWNED = frozenset({"title", "description", "location", "online_link", "rrule", "timezone",
                          "start_local_time", "duration_minutes", "shift_minutes"})

_MEETING = """
    SELECT l.binding_id FROM meeting_attendance.outlook_event_links l
      JOIN meeting_attendance.outlook_bindings b ON b.id = l.binding_id
     WHERE l.meeting_id = %(meeting)s AND b.status IN ('PENDING', 'ACTIVE')
     LIMIT 1"""
_SERIES = """
    SELECT b.id AS binding_id FROM meeting_attendance.outlook_bindings b
     WHERE b.series_id = %(series)s AND b.status IN ('PENDING', 'ACTIVE')
     LIMIT 1"""


async def refuse_owned_meeting_changes(session: AsyncSession, meeting_id: str, fields: Iterable[str]) -> None:
    """409 OUTLOOK_MANAGED when `fields` touch what Outlook owns of a managed meeting (`cancel` for cancellation)."""
    owned = sorted(set(fields) & (MEETING_OWNED | {"cancel"}))
    if not owned:
        return
    row = await (await statements(session)).one(_MEETING, {"meeting": meeting_id})
    if row is not None:
        raise errors.Managed(binding_id=str(row["binding_id"]), fields=owned)


async def refuse_owned_series_changes(session: AsyncSession, series_id: uuid.UUID, fields: Iterable[str]) -> None:
    owned = sorted(set(fields) & SERIES_OWNED)
    if not owned:
        return
    row = await (await statements(session)).one(_SERIES, {"series": series_id})
    if row is not None:
        raise errors.Managed(binding_id=str(row["binding_id"]), fields=owned)
