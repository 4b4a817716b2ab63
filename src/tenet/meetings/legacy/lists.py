"""Legacy required attendees and template attendees -> meeting_required_attendees and template_attendees.

Only system users may be listed (spec: 参会名单仅允许系统用户, MA-INV-04): a row names its user by `userId`, or by
an `email` that is a platform account's; a row that maps to no active account is refused with its reason. The
same person listed twice (two legacy users merged into one account) is listed once. A list row has no fields of
its own: a changed legacy row is the old Tenet row removed and the new one added.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.kernel.emails import normalize_email
from tenet.kernel.statements import statements
from tenet.meetings.legacy.context import Context
from tenet.meetings.legacy.engine import PRESENT, Mapped, Plan, Refused
from tenet.meetings.legacy.source import text_or_none
from tenet.meetings.models import MeetingRequiredAttendee, TemplateAttendee


class _List:
    name = ""
    repeatable_writes = True  # a row written again (its batch rolled back) lists the same person by the same key
    parent_column = ""
    model: Any = None
    insert_sql = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.listed: dict[str, str] = {}

    def parent(self, row: dict[str, Any]) -> str:
        raise NotImplementedError

    def person(self, row: dict[str, Any]) -> tuple[uuid.UUID | None, str | None]:
        """The account by userId; else the email to look up (None, email); Refused when there is neither."""
        if text_or_none(row.get("userId")) is not None:
            user = self.ctx.user(row["userId"], "user")
            if user in self.ctx.inactive_users:
                raise Refused(f"user {row['userId']} is an account that is not active")
            return user, None
        email = text_or_none(row.get("email"))
        if email is None:
            raise Refused("not a system user: no userId and no email")
        found = self.ctx.user_by_email.get(normalize_email(email))
        return (found, None) if found is not None else (None, email)

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        parent = self.parent(row)
        user, email = self.person(row)
        return Plan({"parent": parent, "user": str(user) if user else None, "email": email})

    async def _resolve(self, session: AsyncSession, plan: Plan, key: str) -> uuid.UUID:
        if plan.values["user"] is not None:
            user = uuid.UUID(plan.values["user"])
        else:
            account = await iam_service.find_user_by_email(session, plan.values["email"])
            if account is None or account.status != "active":
                raise Refused(f"not a system user: {plan.values['email'][:60]!r} is no active account's email")
            user = account.id
        first = self.listed.setdefault(f"{plan.values['parent']}/{user}", key)
        if first != key:
            raise Refused(f"the same person is already listed by legacy row {first}")
        return user

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        user = await self._resolve(session, plan, plan.key)
        parent = self._parent_value(plan.values["parent"])
        # A plain statement (kernel.statements), not an ORM insert built per row: a large file lists as many
        # attendees as it has attendances.
        done = await (await statements(session)).one(self.insert_sql, {"parent": parent, "user": user,
                                                                       "now": self.ctx.now})
        return f"{plan.values['parent']}/{user}", done is not None

    def _parent_value(self, parent: str) -> Any:
        return parent

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        await self.remove(session, mapped)
        target, _ = await self.insert(session, plan)
        return target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        parent, user = mapped.target.rsplit("/", 1)
        await session.execute(delete(self.model).where(getattr(self.model, self.parent_column) ==
                                                       self._parent_value(parent),
                                                       self.model.user_id == uuid.UUID(user)))

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        pairs = [t.rsplit("/", 1) for t in targets]
        parents = sorted({self._parent_value(p) for p, _ in pairs})
        if not parents:
            return {}
        column = getattr(self.model, self.parent_column)
        rows = (await session.execute(select(column, self.model.user_id).where(column.in_(parents)))).all()
        present = {f"{parent}/{user}" for parent, user in rows}
        return {t: PRESENT for t in targets if t in present}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        self.listed.setdefault(target, key)


def _insert_sql(table: str, parent_column: str) -> str:
    """The listing of one person; an existing listing (the person already there in Tenet) is left as it is."""
    return (f"INSERT INTO meeting_attendance.{table} ({parent_column}, user_id, added_at, added_by_id) "  # noqa: S608
            "VALUES (%(parent)s, %(user)s, %(now)s, NULL) ON CONFLICT DO NOTHING RETURNING user_id")


class RequiredAttendees(_List):
    name = "meeting_required_attendees"
    parent_column = "meeting_id"
    model = MeetingRequiredAttendee
    insert_sql = _insert_sql("meeting_required_attendees", "meeting_id")

    def parent(self, row: dict[str, Any]) -> str:
        return self.ctx.meeting(row["meetingId"]).id


class TemplateAttendees(_List):
    name = "template_attendees"
    parent_column = "template_id"
    model = TemplateAttendee
    insert_sql = _insert_sql("template_attendees", "template_id")

    def parent(self, row: dict[str, Any]) -> str:
        legacy = str(row["templateId"] or "")
        if legacy in self.ctx.templates:
            return str(self.ctx.templates[legacy])
        if legacy in self.ctx.refused.get("templates", set()):
            raise Refused(f"its template {legacy} was refused (see templates)")
        raise Refused(f"its template {legacy or '(none)'} is not in the file")

    def _parent_value(self, parent: str) -> Any:
        return uuid.UUID(parent)
