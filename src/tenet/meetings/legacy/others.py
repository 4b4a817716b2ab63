"""Legacy templates and audit rows -> templates and audit_logs.

Audit rows are appended once and never changed or removed (MA-INV-20 in Tenet; the legacy log was append-only
too): a legacy audit row that changed or left the file is reported as a conflict and Tenet's row kept. People
are referred to by id only: personal keys (name, email, note, ...) are dropped from the legacy `changes` and the
client address and user agent are not imported; the legacy row's id and action stay under `legacy`.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.meetings.invariants import PERSONAL_KEYS
from tenet.meetings.legacy.context import Context
from tenet.meetings.legacy.engine import PRESENT, Mapped, Plan, Refused, digest
from tenet.meetings.legacy.meetings import descriptive, grace, zone_of
from tenet.meetings.legacy.source import BadValue, instant, text_or_none, whole_number
from tenet.meetings.models import AuditLog, Template, TemplateAttendee


class Templates:
    name = "templates"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        label = text_or_none(row["name"])
        if label is None or len(label) > 200:
            raise Refused("the name is empty or longer than 200 characters")
        minutes = whole_number(row.get("durationMinutes"), "durationMinutes", 60)
        if not 1 <= minutes <= 10080:
            raise Refused(f"durationMinutes {minutes} is outside 1..10080")
        zone = zone_of(row.get("timezone"), "UTC") if text_or_none(row.get("timezone")) else None
        try:
            deleted_at = instant(row.get("deletedAt"), "deletedAt")
        except BadValue as exc:
            raise Refused(str(exc)) from None
        return Plan({"label": label, **descriptive(row), "timezone": zone, "duration_minutes": minutes,
                     "late_grace_minutes": grace(row, self.ctx.defaults.late_grace_minutes),
                     "checkin_opens_minutes_before": self.ctx.defaults.checkin_opens_minutes,
                     "created_by_id": str(self.ctx.user(row.get("createdById"), "creator")),
                     "deleted_at": deleted_at.isoformat() if deleted_at else None})

    def _columns(self, plan: Plan) -> dict[str, Any]:
        v = dict(plan.values)
        deleted_at = datetime.fromisoformat(v.pop("deleted_at")) if v["deleted_at"] else None
        return {**v, "created_by_id": uuid.UUID(v["created_by_id"]), "status": "DELETED" if deleted_at else "ACTIVE",
                "deleted_at": deleted_at, "updated_at": self.ctx.now}

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        template = Template(id=uuid.uuid4(), created_at=self.ctx.now, **self._columns(plan))
        session.add(template)
        await session.flush()
        return str(template.id), True

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        await session.execute(update(Template).where(Template.id == uuid.UUID(mapped.target)).values(
            version=Template.version + 1, **self._columns(plan)))
        return mapped.target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        template_id = uuid.UUID(mapped.target)
        await session.execute(delete(TemplateAttendee).where(TemplateAttendee.template_id == template_id))
        await session.execute(delete(Template).where(Template.id == template_id))

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        rows = (await session.execute(select(Template.id, Template.version, Template.status).where(
            Template.id.in_([uuid.UUID(t) for t in targets])))).all()
        return {str(r.id): digest([r.version, r.status]) for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        self.ctx.templates[key] = uuid.UUID(target)


def _constant(value: Any) -> str:
    cleaned = re.sub(r"[^A-Z0-9]+", "_", str(value or "").strip().upper()).strip("_")
    cleaned = re.sub(r"^[^A-Z]+", "", cleaned)
    return cleaned[:100]


def scrub(value: Any, dropped: set[str]) -> Any:
    """The legacy changes without personal keys (at any depth): the audit log refers to people by id only."""
    if isinstance(value, dict):
        kept = {}
        for key, inner in value.items():
            if str(key).lower() in PERSONAL_KEYS:
                dropped.add(str(key))
                continue
            kept[str(key)] = scrub(inner, dropped)
        return kept
    if isinstance(value, list):
        return [scrub(inner, dropped) for inner in value]
    return value


class AuditLogs:
    name = "audit_logs"
    repeatable_writes = True  # one row each, nothing remembered

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _changes(self, raw: Any, notes: list[str]) -> tuple[Any, Any]:
        if raw is None or raw == "":
            return None, None
        try:
            parsed = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            notes.append("changes are not JSON: left out")
            return None, None
        dropped: set[str] = set()
        parsed = scrub(parsed, dropped)
        if dropped:
            notes.append(f"personal keys left out of changes: {', '.join(sorted(dropped))} (MA-INV-20)")
        if isinstance(parsed, dict) and ({"before", "after"} & set(parsed)):
            return parsed.get("before"), parsed.get("after")
        return None, parsed

    def _entity(self, resource: str, entity: str | None) -> str:
        if entity is None:
            return "-"
        if resource == "MEETING" and entity in self.ctx.meetings:
            return self.ctx.meetings[entity].id
        if resource == "USER" and entity in self.ctx.users:
            return str(self.ctx.users[entity])
        return entity[:200]

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        try:
            at = instant(row["createdAt"], "createdAt", required=True)
        except BadValue as exc:
            raise Refused(str(exc)) from None
        action, resource = _constant(row["action"]), _constant(row["entityType"]) or "LEGACY"
        if not action:
            raise Refused(f"action {str(row['action'])[:40]!r} is no constant")
        notes: list[str] = []
        actor = self.ctx.optional_user(row.get("userId"))
        if actor is None and text_or_none(row.get("userId")):
            notes.append(f"actor {row['userId']} is not a user of the file: recorded as the system")
        meeting = text_or_none(row.get("meetingId")) or (text_or_none(row.get("entityId")) if resource == "MEETING"
                                                         else None)
        before, after = self._changes(row.get("changes"), notes)
        entity = self._entity(resource, text_or_none(row.get("entityId")))
        assert at is not None
        return Plan({"occurred_at": at.isoformat(), "action": action, "resource": resource, "resource_id": entity,
                     "meeting_id": self.ctx.meetings[meeting].id if meeting in self.ctx.meetings else None,
                     "actor": str(actor) if actor else None,
                     "changes": {"entityId": entity, "entityType": resource, "before": before, "after": after,
                                 "legacy": {"id": str(row["id"]), "action": str(row["action"])[:100]}}}, notes,
                    source=row)  # the legacy row itself: what other tables map to does not change an audit row

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        v = plan.values
        found = await session.execute(insert(AuditLog).values(
            occurred_at=datetime.fromisoformat(v["occurred_at"]), action=v["action"], resource=v["resource"],
            resource_id=v["resource_id"], meeting_id=v["meeting_id"], actor_type="user" if v["actor"] else "system",
            actor_id=v["actor"], changes=v["changes"]).returning(AuditLog.id))
        return str(found.scalar_one()), True

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        raise Refused("the audit log is append-only (MA-INV-20): the imported row is kept as it was")

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        """Never called (`kept_because`)."""

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        rows = (await session.execute(select(AuditLog.id).where(AuditLog.id.in_([int(t) for t in targets])))).all()
        return {str(r.id): PRESENT for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        """Nothing later refers to audit rows."""


def audit_kept_because(mapped: Mapped) -> str:
    return "gone from the file; the audit log is append-only (MA-INV-20), Tenet's row is kept"
