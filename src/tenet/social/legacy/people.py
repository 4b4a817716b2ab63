"""Legacy users, profiles and friend requests into accounts, profiles and friendships.

Users are mapped by normalised email: a legacy user whose address an account already has (a Tenet user, or an
earlier legacy row differing only in case or spaces) maps to that account; the others become accounts with
the Employee role and no usable password (they set one through the reset flow), made like identity makes
them, so social's AccountCreated handler gives each its profile and agent.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.iam.events import AccountCreated
from tenet.iam.models import UserAccount, UserRole
from tenet.iam.permissions import Role
from tenet.kernel import audit, events
from tenet.kernel.audit import Actor
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, InvalidEmail, clean_email, normalize_email
from tenet.kernel.statements import statements
from tenet.kernel.zones import is_iana_zone
from tenet.social import friends, profiles
from tenet.social.legacy.engine import Context, Refused, require_mapped

_TRUE, _FALSE = {"1", "true", "yes", "y", "on", "t"}, {"0", "false", "no", "n", "off", "f"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clean_text(value: Any, limit: int) -> str | None:
    """A legacy free text as Tenet stores it: control characters out, trimmed, at most `limit` characters."""
    if value is None:
        return None
    text = _CONTROL.sub("", str(value)).strip()
    return text[:limit] or None


def loose_boolean(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


async def user_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> uuid.UUID:
    if row.get("is_deleted"):
        raise Refused("LEGACY_USER_DELETED", "the user is deleted in the legacy app: no account is made or kept")
    name = clean_text(row.get("name"), 200)
    if mapped is not None:
        if name:
            await (await statements(session)).execute(
                "UPDATE iam.user_account SET display_name = %(n)s, updated_at = %(now)s WHERE id = %(id)s "
                "AND display_name IS DISTINCT FROM %(n)s", {"n": name, "now": ctx.now, "id": mapped})
        return mapped
    try:
        typed = clean_email(str(row.get("email") or ""))
    except InvalidEmail as exc:
        raise Refused("EMAIL_INVALID", f"email {row.get('email')!r}: {exc}") from None
    found = await iam_service.find_user_by_email(session, typed)
    if found is not None:
        ctx.note("MAPPED_BY_EMAIL", f"{typed} is the existing account {found.id}: mapped to it, not duplicated")
        return found.id
    user = UserAccount(id=uuid.uuid4(), email=typed, email_normalized=normalize_email(typed),
                       email_normalization=EMAIL_NORMALIZATION_VERSION, display_name=name or typed.split("@")[0],
                       password_hash=ctx.password_hash, status="active", created_at=ctx.now, updated_at=ctx.now)
    session.add(user)
    session.add(UserRole(user_id=user.id, role_name=Role.EMPLOYEE.value, granted_at=ctx.now))
    await session.flush()
    await audit.record(session, action="iam.user.created", actor=Actor.system(), subject=("user", user.id),
                       now=ctx.now, data={"roles": [Role.EMPLOYEE.value], "self_registered": False,
                                          "source": "social legacy back-fill"})
    await events.publish(session, AccountCreated(user_id=user.id, actor=Actor.system(), now=ctx.now))
    return user.id


async def user_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    raise Refused("NOT_MIRRORED", "a legacy user was deleted; the Tenet account is kept (an administrator deletes "
                                  "accounts: `DELETE /api/v1/users/{id}`)")


def _settings_patch(ctx: Context, row: dict[str, Any]) -> dict[str, Any]:
    """The loose legacy columns as a settings merge patch; a value that fits no setting is dropped (the default
    applies) and noted, never stored."""
    patch: dict[str, dict[str, Any]] = {}
    theme = clean_text(row.get("theme"), 20)
    if theme is not None:
        if theme.lower() in ("light", "dark", "system"):
            patch.setdefault("preferences", {})["theme"] = theme.lower()
        else:
            ctx.note("VALUE_DROPPED", f"theme {theme!r} is none of light, dark, system")
    lang = clean_text(row.get("lang"), 35)
    if lang is not None:
        if re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}", lang):
            patch.setdefault("preferences", {})["language"] = lang
        else:
            ctx.note("VALUE_DROPPED", f"language {lang!r} is not a BCP 47 tag")
    zone = clean_text(row.get("tz"), 64)
    if zone is not None:
        if is_iana_zone(zone):
            patch.setdefault("preferences", {})["timezone"] = zone
        else:
            ctx.note("VALUE_DROPPED", f"time zone {zone!r} is not an IANA zone")
    for column, section, key in (("notify", "notification", "enabled"),
                                 ("allow_friend_requests", "privacy", "allow_friend_requests")):
        if row.get(column) is None:
            continue
        flag = loose_boolean(row[column])
        if flag is None:
            ctx.note("VALUE_DROPPED", f"{column} {row[column]!r} is neither yes nor no")
        else:
            patch.setdefault(section, {})[key] = flag
    return patch


async def profile_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any],
                         mapped: uuid.UUID | None) -> uuid.UUID:
    user_id = await require_mapped(session, "users", row.get("user_id"), "user")
    changes: dict[str, Any] = {}
    if (nickname := clean_text(row.get("nickname"), 200)) is not None:
        changes["username"] = nickname
    if "bio" in row:
        changes["bio"] = clean_text(row.get("bio"), 2000)
    avatar = clean_text(row.get("avatar"), 2048)
    if avatar is not None and not avatar.startswith("https://"):
        ctx.note("VALUE_DROPPED", f"avatar {avatar!r} is not an https URL")
        avatar = None
    if "avatar" in row:
        changes["avatar_url"] = avatar
    if changes:
        await profiles.update_profile(session, principal_id=user_id, changes=changes, now=ctx.now)
    patch = _settings_patch(ctx, row)
    if patch:
        await profiles.patch_settings(session, principal_id=user_id, patch=patch,
                                      default_timezone=ctx.default_timezone, now=ctx.now)
    return user_id


async def profile_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    raise Refused("NOT_MIRRORED", "a legacy profile row was deleted; the Tenet profile lives as long as its account")


_PAIR = """SELECT id, status, initiator_id FROM social.friendships
            WHERE user_low_id = least(%(a)s, %(b)s) AND user_high_id = greatest(%(a)s, %(b)s)"""
# legacy status -> (who acts, the action) once the request exists
_ANSWERS = {"pending": None, "accepted": ("to", "accept"), "rejected": ("to", "decline"), "declined": ("to", "decline"),
            "canceled": ("from", "cancel"), "cancelled": ("from", "cancel")}


def _status(row: dict[str, Any]) -> str:
    status = str(row.get("status") or "").strip().lower()
    if status not in _ANSWERS:
        raise Refused("STATUS_UNKNOWN", f"friend request status {row.get('status')!r} is none of {', '.join(_ANSWERS)}")
    return status


async def friendship_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any],
                            mapped: uuid.UUID | None) -> uuid.UUID:
    status = _status(row)
    people = {"from": await require_mapped(session, "users", row.get("from_user_id"), "user"),
              "to": await require_mapped(session, "users", row.get("to_user_id"), "user")}
    if people["from"] == people["to"]:
        raise Refused("SELF_REQUEST", "a friend request to oneself")
    if mapped is None:
        existing = await (await statements(session)).one(_PAIR, {"a": people["from"], "b": people["to"]})
        if existing is not None:
            raise Refused("DUPLICATE_PAIR", f"the pair already has friendship {existing['id']} (from another legacy "
                                            "request, or made in Tenet): one row per pair")
        friendship, _ = await friends.request(session, principal_id=people["from"], target_id=people["to"],
                                              cooldown=timedelta(0), inbox_limit=None, now=ctx.now)
        friendship_id, current = friendship.id, "pending"  # type: uuid.UUID, str | None
    else:
        friendship_id = mapped
        pair = await (await statements(session)).one(_PAIR, {"a": people["from"], "b": people["to"]})
        current = None if pair is None else pair["status"]
    answer = _ANSWERS[status]
    if current == "pending" and answer is not None:
        await friends.act(session, friendship_id=friendship_id, principal_id=people[answer[0]], action=answer[1],
                          now=ctx.now)
    elif current != {"rejected": "declined", "cancelled": "canceled"}.get(status, status):
        raise Refused("TRANSITION_NOT_MIRRORED", f"Tenet's friendship is {current}; legacy says {status}")
    return friendship_id


async def friendship_remove(session: AsyncSession, ctx: Context, row: dict[str, Any],
                            mapped: uuid.UUID | None) -> None:
    if mapped is None:
        return
    found = await (await statements(session)).one(
        "SELECT status, initiator_id FROM social.friendships WHERE id = %(id)s", {"id": mapped})
    if found is None or found["status"] not in ("pending", "accepted"):
        return
    action = "cancel" if found["status"] == "pending" else "unfriend"
    await friends.act(session, friendship_id=mapped, principal_id=found["initiator_id"], action=action, now=ctx.now)
