"""Profile, settings, agent and calendar feed commands (spec 000 §C.1, §C.3; SOC-INV-01..03, 18).

Settings change only by one UPDATE that merges the patch inside PostgreSQL (`social.jsonb_merge_patch`, RFC
7396): no read-modify-write, so concurrent PATCHes of different keys all survive (SOC-INV-03) — the row lock
of the UPDATE serialises them and READ COMMITTED re-evaluates the SET on the row the other committed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import violated_constraint
from tenet.kernel.errors import ValidationFailed
from tenet.social import errors, settings_schema
from tenet.social.common import new_feed_id
from tenet.social.models import Profile

PROFILE_COLUMNS = "id, username, avatar_url, bio, created_at, updated_at, version"
AGENT_COLUMNS = "id, user_id, llm_id, agent_type, status, capability_version, config, updated_at, version"


async def update_profile(session: AsyncSession, *, user_id: uuid.UUID, changes: dict[str, Any],
                         now: datetime) -> dict[str, Any]:
    sets = ", ".join(f"{name} = :{name}" for name in changes if name in ("username", "avatar_url", "bio"))
    try:
        async with session.begin_nested():
            row = (await session.execute(text(
                f"UPDATE social.profiles SET {sets + ', ' if sets else ''}version = version + 1, "  # noqa: S608
                f"updated_at = :now, updated_by = :me WHERE id = :me AND deleted_at IS NULL "
                f"RETURNING {PROFILE_COLUMNS}"), {**changes, "now": now, "me": user_id})).mappings().one_or_none()
    except IntegrityError as exc:
        # The CHECKs are the arbiter of shapes the schema lets through (a trailing space after trimming rules).
        raise ValidationFailed(f"the profile breaks {violated_constraint(exc)}") from None
    if row is None:
        raise errors.ProfileNotFound()
    return dict(row)


async def patch_settings(session: AsyncSession, *, user_id: uuid.UUID, patch: dict[str, Any],
                         default_timezone: str, now: datetime) -> dict[str, Any]:
    """Apply an RFC 7396 merge patch in one statement; 422 for unknown keys or wrong types."""
    issues = settings_schema.patch_problems(patch)
    if issues:
        raise ValidationFailed("; ".join(".".join(map(str, i["loc"][1:])) + ": " + i["msg"] for i in issues[:5]),
                               errors=issues)
    try:
        async with session.begin_nested():
            row = (await session.execute(text("""
                UPDATE social.profiles SET settings = social.jsonb_merge_patch(settings, CAST(:patch AS jsonb)),
                       version = version + 1, updated_at = :now, updated_by = :me
                 WHERE id = :me AND deleted_at IS NULL AND settings_version = :current
                RETURNING settings, settings_version"""),
                {"patch": json.dumps(patch), "now": now, "me": user_id,
                 "current": settings_schema.CURRENT_VERSION})).mappings().one_or_none()
    except IntegrityError as exc:
        if violated_constraint(exc) == "ck_profiles_settings_valid":
            raise ValidationFailed("quiet_hours_start and quiet_hours_end are set together",
                                   errors=[{"loc": ["body", "notification"], "msg": "quiet hours need both ends",
                                            "type": "value_error"}]) from None
        raise
    if row is None:
        exists = (await session.execute(text(
            "SELECT 1 FROM social.profiles WHERE id = :me AND deleted_at IS NULL"), {"me": user_id})).scalar()
        raise errors.SettingsVersionOutdated() if exists else errors.ProfileNotFound()
    if settings_schema.touches_timezone(patch):
        from tenet.social import automations

        await automations.reschedule_owner(session, owner_id=user_id, default_timezone=default_timezone, now=now)
    return dict(row)


async def update_agent(session: AsyncSession, *, user_id: uuid.UUID, changes: dict[str, Any],
                       now: datetime) -> dict[str, Any]:
    """The user's own agent: llm_id, agent_type, config (merged), pause/resume. Refused while migrating."""
    sets = ["version = version + 1", "updated_at = :now", "updated_by = :me"]
    params: dict[str, Any] = {"now": now, "me": user_id}
    for name in ("llm_id", "agent_type", "status"):
        if name in changes:
            sets.append(f"{name} = :{name}")
            params[name] = changes[name]
    if "config" in changes:
        sets.append("config = social.jsonb_merge_patch(config, CAST(:config AS jsonb))")
        params["config"] = json.dumps(changes["config"])
    try:
        async with session.begin_nested():
            row = (await session.execute(text(
                f"UPDATE social.user_agents SET {', '.join(sets)} "  # noqa: S608 (column names of this module)
                f"WHERE user_id = :me AND deleted_at IS NULL AND status <> 'migrating' RETURNING {AGENT_COLUMNS}"),
                params)).mappings().one_or_none()
    except IntegrityError as exc:
        if violated_constraint(exc) == "ck_user_agents_config_object":
            raise ValidationFailed("config must stay an object of at most 16 KiB") from None
        raise
    if row is None:
        raise errors.AgentMigrating()
    return dict(row)


# --- the calendar feed (SOC-INV-18, D-15) --------------------------------------------------------------

TOKEN_PREFIX = "scal"


def feed_token(secret: str, feed_id: str) -> str:
    """`scal_<feed id>_<HMAC>`: only the random feed id is stored, so the token can be shown again while a
    copy of the database alone cannot read anyone's calendar."""
    mac = hmac.new(secret.encode(), f"social.calendar-feed:{feed_id}".encode(), hashlib.sha256).digest()
    return f"{TOKEN_PREFIX}_{feed_id}_{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()[:32]}"


def feed_id_of(secret: str, token: str) -> str | None:
    """The feed id a token names, when its HMAC verifies (constant-time); else None."""
    if not token.startswith(TOKEN_PREFIX + "_") or len(token) != len(TOKEN_PREFIX) + 1 + 22 + 1 + 32:
        return None
    feed_id = token[len(TOKEN_PREFIX) + 1: len(TOKEN_PREFIX) + 1 + 22]
    return feed_id if hmac.compare_digest(feed_token(secret, feed_id), token) else None


def feed_exists(feed_id: str) -> ColumnElement[bool]:
    """The condition the feed's rate limit counts under (calendar.feed answers 404 for anything else)."""
    return select(Profile.id).where(Profile.calendar_feed_id == feed_id, Profile.deleted_at.is_(None)).exists()


async def reset_feed(session: AsyncSession, *, user_id: uuid.UUID, now: datetime) -> str:
    feed_id = new_feed_id()
    done = (await session.execute(text("""
        UPDATE social.profiles SET calendar_feed_id = :feed, version = version + 1, updated_at = :now,
               updated_by = :me
         WHERE id = :me AND deleted_at IS NULL RETURNING id"""), {"feed": feed_id, "now": now, "me": user_id})).scalar()
    if done is None:
        raise errors.ProfileNotFound()
    await audit.record(session, action="social.calendar_feed.reset", actor=Actor.user(user_id),
                       subject=("profile", user_id), now=now)
    return feed_id
