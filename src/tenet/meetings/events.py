"""Handlers of identity's events (run in identity's unit of work, after the account's row lock: lock order).

- AccountDeleted (MA-INV-19): the account leaves the required lists of meetings that have not started (ACTIVE or
  CANCELLED), the lists of live series and live templates. Past meetings, attendances and audit rows keep it:
  last month's report still counts it as expected, present or absent (D-29). Its PENDING upload tasks are cancelled.
  Never refuses the deletion.
- AccountRolesChanged: a change of the meeting roles goes to the meeting-attendance audit log (issue 10).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.events import AccountDeleted, AccountRolesChanged
from tenet.kernel.statements import statements
from tenet.meetings import audit
from tenet.meetings.agenda import attachments as agenda
from tenet.meetings.audit import Action, Resource
from tenet.meetings.permissions import ADMINISTRATOR, EMPLOYEE, LEADER, MEETING_MANAGER

MEETING_ROLES = {ADMINISTRATOR, MEETING_MANAGER, LEADER, EMPLOYEE}


async def _account_deleted(session: AsyncSession, event: AccountDeleted) -> None:
    sql = await statements(session)
    removed = [row["meeting_id"] for row in await sql.all("""
        DELETE FROM meeting_attendance.meeting_required_attendees r
         USING meeting_attendance.meetings m
         WHERE r.user_id = %(user_id)s AND m.id = r.meeting_id AND m.status <> 'DELETED' AND m.start_time > %(now)s
        RETURNING r.meeting_id""", {"user_id": event.user_id, "now": event.now})]
    await sql.execute("""
        DELETE FROM meeting_attendance.series_required_attendees r USING meeting_attendance.meeting_series s
         WHERE r.user_id = %(user_id)s AND s.id = r.series_id AND s.status = 'ACTIVE'""", {"user_id": event.user_id})
    await sql.execute("""
        DELETE FROM meeting_attendance.template_attendees a USING meeting_attendance.templates t
         WHERE a.user_id = %(user_id)s AND t.id = a.template_id AND t.status = 'ACTIVE'""", {"user_id": event.user_id})
    # A deleted account holds no PENDING upload task (MA-INV-19; its uploads stay).
    await agenda.cancel_pending_tasks(session, assignee_id=event.user_id, actor=event.actor, actor_id=None,
                                      now=event.now, reason="account_deleted")
    for meeting_id in sorted(set(removed)):
        await audit.record(session, action=Action.REQUIRED_ATTENDEES_UPDATED, resource=Resource.MEETING,
                           resource_id=meeting_id, meeting_id=meeting_id, now=event.now, actor=event.actor,
                           after={"added": [], "removed": [event.user_id]}, reason="account_deleted")


async def _roles_changed(session: AsyncSession, event: AccountRolesChanged) -> None:
    before = sorted(set(event.before) & MEETING_ROLES)
    after = sorted(set(event.after) & MEETING_ROLES)
    if before != after:
        await audit.record(session, action=Action.USER_ROLES_CHANGED, resource=Resource.USER,
                           resource_id=event.user_id, now=event.now, actor=event.actor,
                           before={"roles": before}, after={"roles": after})


HANDLERS = {AccountDeleted: _account_deleted, AccountRolesChanged: _roles_changed}
