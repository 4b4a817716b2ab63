"""Guests' personal data is erased after TENET_GUEST_DATA_RETENTION_DAYS past their meeting's end (MA-INV-13,
D-16, D-18; issue 7 asks where guest data lives: docs/decisions.md "Meeting attendance").

Erasure is in place: the guest row keeps its id (attendances, scans and audit rows keep pointing at it, so counts
and reports are unchanged) and loses its name, email, phone, organisation and identity digest; the device ids and
client addresses of the guest's scans and attendances and the notes of corrections to them go too.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.meetings import audit
from tenet.meetings.audit import Action, Resource

BATCH = 500

_PICK = """
    SELECT g.id, g.meeting_id FROM meeting_attendance.guests g
      JOIN meeting_attendance.meetings m ON m.id = g.meeting_id
     WHERE g.erased_at IS NULL AND m.end_time < %(cutoff)s
     ORDER BY g.id LIMIT %(limit)s
       FOR UPDATE OF g SKIP LOCKED
"""
_ERASE = [
    ("UPDATE meeting_attendance.guests SET name = NULL, email = NULL, phone = NULL, organization = NULL, "
     "identity_digest = NULL, erased_at = %(now)s WHERE id = ANY(%(ids)s)"),
    ("UPDATE meeting_attendance.checkin_scans SET device_id = NULL, client_address = NULL, erased_at = %(now)s "
     "WHERE guest_id = ANY(%(ids)s) AND erased_at IS NULL"),
    ("UPDATE meeting_attendance.attendances SET device_id = NULL WHERE guest_id = ANY(%(ids)s) "
     "AND device_id IS NOT NULL"),
    ("UPDATE meeting_attendance.attendance_corrections c SET note = NULL, erased_at = %(now)s "
     "FROM meeting_attendance.attendances a WHERE a.id = c.attendance_id AND a.guest_id = ANY(%(ids)s) "
     "AND c.erased_at IS NULL"),
]


async def erase_guest_data(session: AsyncSession, *, now: datetime, retention_days: int,
                           limit: int = BATCH) -> int:
    """Erase up to `limit` guests of meetings that ended before the cutoff; answers how many. Locks the guest rows
    SKIP LOCKED, so two runs never erase the same guest and never wait for each other."""
    sql = await statements(session)
    rows = await sql.all(_PICK, {"cutoff": now - timedelta(days=retention_days), "limit": limit})
    if not rows:
        return 0
    ids = [row["id"] for row in rows]
    for statement in _ERASE:
        await sql.execute(statement, {"ids": ids, "now": now})
    per_meeting: dict[str, int] = {}
    for row in rows:
        per_meeting[row["meeting_id"]] = per_meeting.get(row["meeting_id"], 0) + 1
    for meeting_id, count in sorted(per_meeting.items()):
        await audit.record(session, action=Action.GUEST_DATA_ERASED, resource=Resource.GUEST, resource_id=meeting_id,
                           meeting_id=meeting_id, now=now, actor=None, after={"guests": count},
                           retention_days=retention_days)
    return len(ids)
