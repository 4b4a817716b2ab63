"""Template commands: create, change, delete a meeting template and its attendees. Each runs in the caller's unit of
work and never commits. A template is provenance only: meetings and series made from it copied its fields and
attendees (tenet.meetings.service.create_meeting, tenet.meetings.series.create_series) and do not change with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.errors import PreconditionFailed
from tenet.kernel.transitions import lock_rows, transition
from tenet.meetings import audit, errors, lifecycles, service, times
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import Template, TemplateAttendee


async def create_template(session: AsyncSession, *, principal_id: uuid.UUID, fields: Mapping[str, Any],
                          policy: service.MeetingPolicy, now: datetime) -> Template:
    values = dict(fields)
    attendees = sorted(set(values.pop("attendee_user_ids", None) or []))
    if values.get("timezone"):
        times.zone(values["timezone"])
    await service.require_users(session, attendees)
    template = Template(
        id=uuid.uuid4(), label=values["label"], title=values["title"], description=values.get("description"),
        location=values.get("location"), online_link=values.get("online_link"), city=values.get("city"),
        timezone=values.get("timezone"), duration_minutes=values["duration_minutes"],
        late_grace_minutes=policy.late_grace_minutes if values.get("late_grace_minutes") is None
        else values["late_grace_minutes"],
        checkin_opens_minutes_before=policy.checkin_opens_minutes if values.get("checkin_opens_minutes_before") is None
        else values["checkin_opens_minutes_before"],
        rotating_online_code=bool(values.get("rotating_online_code") or False),
        offline_checkin_enabled=values.get("offline_checkin_enabled") is not False, status="ACTIVE",
        created_by_id=principal_id, created_at=now, updated_at=now, version=1)
    session.add(template)
    await session.flush()
    if attendees:
        await session.execute(pg_insert(TemplateAttendee).values(
            [{"template_id": template.id, "user_id": u, "added_at": now, "added_by_id": principal_id}
             for u in attendees]))
    await audit.record(session, action=Action.TEMPLATE_CREATED, resource=Resource.TEMPLATE, resource_id=template.id,
                       now=now, actor=Actor.user(principal_id), after={"attendees": len(attendees)})
    return template


async def update_template(session: AsyncSession, *, template_id: uuid.UUID, principal_id: uuid.UUID,
                          changes: Mapping[str, Any], expected_version: int | None, now: datetime) -> Template:
    values = dict(changes)
    attendees = values.pop("attendee_user_ids", None)
    for required in ("label", "title", "duration_minutes", "late_grace_minutes", "checkin_opens_minutes_before",
                     "rotating_online_code", "offline_checkin_enabled"):
        if required in values and values[required] is None:
            raise errors.MeetingTimeInvalid(f"{required} cannot be cleared", reason="required_field")
    if values.get("timezone"):
        times.zone(values["timezone"])
    if attendees is not None:
        await service.require_users(session, attendees)
    await lock_rows(session, Template, [template_id])
    template = await session.get(Template, template_id, populate_existing=True)
    if template is None or template.status != "ACTIVE":
        raise errors.TemplateNotFound()
    if expected_version is not None and template.version != expected_version:
        raise PreconditionFailed(current_version=template.version)
    if attendees is not None:
        await session.execute(delete(TemplateAttendee).where(TemplateAttendee.template_id == template_id))
        wanted = sorted(set(attendees))
        if wanted:
            await session.execute(pg_insert(TemplateAttendee).values(
                [{"template_id": template_id, "user_id": u, "added_at": now, "added_by_id": principal_id}
                 for u in wanted]))
    template = await transition(session, lifecycles.TEMPLATE, "update", model=Template, id=template_id,
                                values={**values, "updated_at": now})
    await audit.record(session, action=Action.TEMPLATE_UPDATED, resource=Resource.TEMPLATE, resource_id=template_id,
                       now=now, actor=Actor.user(principal_id),
                       after={**service.audit_values(values), "attendees_replaced": attendees is not None})
    return template


async def delete_template(session: AsyncSession, *, template_id: uuid.UUID, principal_id: uuid.UUID,
                          now: datetime) -> None:
    """DELETED; meetings and series made from it are unchanged (it was provenance only)."""
    moved = await transition(session, lifecycles.TEMPLATE, "delete", model=Template,
                             where=(Template.id == template_id,),
                             values={"deleted_at": now, "deleted_by_id": principal_id, "updated_at": now})
    if not moved:
        raise errors.TemplateNotFound()
    await audit.record(session, action=Action.TEMPLATE_DELETED, resource=Resource.TEMPLATE, resource_id=template_id,
                       now=now, actor=Actor.user(principal_id), after={"status": "DELETED"})
