"""Legacy users -> platform accounts (iam.user_account), matched by the normalised email (tenet.kernel.emails).

An account that exists is used as it is and never changed or removed by the import (`owned` false); a missing
one is created with the mapped role and no usable password (the hash of a random secret nobody keeps), the same
audit row and AccountCreated event as any account creation. A second legacy user whose email differs only in case
or spaces is the same person: mapped to the same account, said so in a note.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.iam.events import AccountCreated
from tenet.iam.models import UserAccount, UserRole
from tenet.iam.permissions import Role
from tenet.kernel import audit, events
from tenet.kernel.audit import Actor
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, InvalidEmail, clean_email, normalize_email
from tenet.meetings.legacy.context import Context
from tenet.meetings.legacy.engine import Mapped, Plan, Refused, digest
from tenet.meetings.legacy.source import text_or_none

ROLES = {"ADMIN": Role.ADMINISTRATOR, "MANAGER": Role.MEETING_MANAGER, "LEADER": Role.LEADER,
         "EMPLOYEE": Role.EMPLOYEE}


class Users:
    name = "users"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.first_legacy: dict[str, str] = {}

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        try:
            typed = clean_email(str(row["email"] or ""))
        except InvalidEmail as exc:
            raise Refused(f"email {str(row['email'])[:60]!r} is not an address ({exc})") from None
        notes = []
        legacy_role = str(row["role"] or "").strip().upper()
        role = ROLES.get(legacy_role)
        if role is None:
            role = Role.EMPLOYEE
            notes.append(f"unknown legacy role {legacy_role[:30]!r}: Employee, the least privilege")
        name = (text_or_none(row["name"]) or typed.split("@")[0])[:200]
        plan = Plan({"email": typed, "normalized": normalize_email(typed), "display_name": name, "role": role.value},
                    notes)
        first = self.first_legacy.get(plan.values["normalized"])
        if first is not None and first != str(row["id"]):
            plan.notes.append(f"the same person as legacy user {first} (the email differs only in case or spaces)")
            plan.target, plan.owned = str(self.ctx.user_by_email[plan.values["normalized"]]), False
        else:
            self.first_legacy[plan.values["normalized"]] = str(row["id"])
        return plan

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        if plan.target is not None:
            return plan.target, False
        found = await iam_service.find_user_by_email(session, plan.values["email"])
        if found is not None:
            if found.status != "active":
                self.ctx.inactive_users.add(found.id)
            return str(found.id), False
        now, values = self.ctx.now, plan.values
        user = UserAccount(id=uuid.uuid4(), email=values["email"], email_normalized=values["normalized"],
                           email_normalization=EMAIL_NORMALIZATION_VERSION, display_name=values["display_name"],
                           password_hash=self.ctx.password_hash, status="active", created_at=now, updated_at=now)
        session.add(user)
        session.add(UserRole(user_id=user.id, role_name=values["role"], granted_at=now))
        await session.flush()
        await audit.record(session, action="iam.user.created", actor=Actor.system(), subject=("user", user.id),
                           now=now, data={"roles": [values["role"]], "self_registered": False,
                                          "source": "legacy import"})
        await events.publish(session, AccountCreated(user_id=user.id, actor=Actor.system(), now=now))
        return str(user.id), True

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        user_id = uuid.UUID(mapped.target)
        await session.execute(update(UserAccount).where(UserAccount.id == user_id).values(
            display_name=plan.values["display_name"], updated_at=self.ctx.now))
        roles = (await iam_service.roles_of(session, [user_id]))[user_id]
        if roles != [plan.values["role"]]:
            await iam_service.set_user_roles(session, user_id=user_id, roles=[Role(plan.values["role"])],
                                             now=self.ctx.now, actor=Actor.system())
        return mapped.target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        """Never called: accounts are the platform's (remove_absent keeps them, see `kept_because`)."""

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        ids = [uuid.UUID(t) for t in targets]
        if not ids:
            return {}
        rows = (await session.execute(select(UserAccount.id, UserAccount.display_name, UserAccount.status).where(
            UserAccount.id.in_(ids)))).all()
        roles = await iam_service.roles_of(session, ids)
        return {str(r.id): digest([r.display_name, r.status, roles.get(r.id, [])]) for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        self.ctx.users[key] = uuid.UUID(target)
        if plan is not None:
            self.ctx.user_by_email.setdefault(plan.values["normalized"], uuid.UUID(target))


def kept_because(mapped: Mapped) -> str | None:
    return "an account is the platform's: gone from the file, kept in Tenet" if mapped.owned else None
