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
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit, ratelimit
from tenet.kernel.audit import Actor
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.statements import Row, statements
from tenet.social import errors, settings_schema
from tenet.social.common import new_feed_id

_PROFILE_FIELDS = ("username", "avatar_url", "bio")
_AGENT_FIELDS = ("llm_id", "agent_type", "status")


async def _checked(session: AsyncSession, sql: str, params: dict[str, Any],
                   refusal: Callable[[str | None], DomainError | None]) -> Row | None:
    """One UPDATE (its row, or None) in a savepoint: a CHECK it breaks answers `refusal(constraint name)`, the
    domain's error (None: not one of ours, raised as it is), and the request's transaction stays usable."""
    run = await statements(session)
    try:
        async with session.begin_nested():
            return await run.one(sql, params)
    except psycopg.errors.IntegrityError as exc:
        error = refusal(exc.diag.constraint_name)
        if error is None:
            raise
        raise error from None


def _profile_refusal(constraint: str | None) -> DomainError:
    # The CHECKs are the arbiter of shapes the schema lets through (a trailing space after trimming rules).
    return ValidationFailed(f"the profile breaks {constraint}")


async def update_profile(session: AsyncSession, *, principal_id: uuid.UUID, changes: dict[str, Any],
                         now: datetime) -> None:
    fields = [name for name in _PROFILE_FIELDS if name in changes]
    sets = "".join(f"{name} = %({name})s, " for name in fields)
    sql = (f"UPDATE social.profiles SET {sets}version = version + 1, updated_at = %(now)s, "  # noqa: S608
           "updated_by = %(me)s WHERE id = %(me)s AND deleted_at IS NULL RETURNING id")
    params = {**{name: changes[name] for name in fields}, "now": now, "me": principal_id}
    if await _checked(session, sql, params, _profile_refusal) is None:
        raise errors.ProfileNotFound()


_PATCH_SETTINGS = """
    UPDATE social.profiles SET settings = social.jsonb_merge_patch(settings, CAST(%(patch)s AS jsonb)),
           version = version + 1, updated_at = %(now)s, updated_by = %(me)s
     WHERE id = %(me)s AND deleted_at IS NULL AND settings_version = %(current)s
    RETURNING id
"""
_PROFILE_EXISTS = "SELECT 1 FROM social.profiles WHERE id = %(me)s AND deleted_at IS NULL"


def _settings_refusal(constraint: str | None) -> DomainError | None:
    if constraint != "ck_profiles_settings_valid":
        return None
    return ValidationFailed("quiet_hours_start and quiet_hours_end are set together",
                            errors=[{"loc": ["body", "notification"], "msg": "quiet hours need both ends",
                                     "type": "value_error"}])


async def patch_settings(session: AsyncSession, *, principal_id: uuid.UUID, patch: dict[str, Any],
                         default_timezone: str, now: datetime) -> None:
    """Apply an RFC 7396 merge patch in one statement; 422 for unknown keys or wrong types."""
    issues = settings_schema.patch_problems(patch)
    if issues:
        raise ValidationFailed("; ".join(".".join(map(str, i["loc"][1:])) + ": " + i["msg"] for i in issues[:5]),
                               errors=issues)
    params = {"patch": json.dumps(patch), "now": now, "me": principal_id, "current": settings_schema.CURRENT_VERSION}
    if await _checked(session, _PATCH_SETTINGS, params, _settings_refusal) is None:
        exists = await (await statements(session)).value(_PROFILE_EXISTS, {"me": principal_id})
        raise errors.SettingsVersionOutdated() if exists else errors.ProfileNotFound()
    if settings_schema.touches_timezone(patch):
        from tenet.social import automations

        await automations.reschedule_owner(session, owner_id=principal_id, default_timezone=default_timezone, now=now)


def _agent_refusal(constraint: str | None) -> DomainError | None:
    if constraint != "ck_user_agents_config_object":
        return None
    return ValidationFailed("config must stay an object of at most 16 KiB")


async def update_agent(session: AsyncSession, *, principal_id: uuid.UUID, changes: dict[str, Any],
                       now: datetime) -> None:
    """The user's own agent: llm_id, agent_type, config (merged), pause/resume. Refused while migrating."""
    sets = ["version = version + 1", "updated_at = %(now)s", "updated_by = %(me)s"]
    params: dict[str, Any] = {"now": now, "me": principal_id}
    for name in _AGENT_FIELDS:
        if name in changes:
            sets.append(f"{name} = %({name})s")
            params[name] = changes[name]
    if "config" in changes:
        sets.append("config = social.jsonb_merge_patch(config, CAST(%(config)s AS jsonb))")
        params["config"] = json.dumps(changes["config"])
    sql = (f"UPDATE social.user_agents SET {', '.join(sets)} "  # noqa: S608 (column names of this module)
           "WHERE user_id = %(me)s AND deleted_at IS NULL AND status <> 'migrating' RETURNING id")
    if await _checked(session, sql, params, _agent_refusal) is None:
        raise errors.AgentMigrating()


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


_FEED_EXISTS = ("EXISTS (SELECT 1 FROM social.profiles WHERE calendar_feed_id = %(feed_id)s "
                "AND deleted_at IS NULL)")


def feed_exists(feed_id: str) -> ratelimit.Condition:
    """The condition the feed's rate limit counts under (calendar.feed answers 404 for anything else)."""
    return ratelimit.Condition(_FEED_EXISTS, {"feed_id": feed_id})


_RESET_FEED = """
    UPDATE social.profiles SET calendar_feed_id = %(feed)s, version = version + 1, updated_at = %(now)s,
           updated_by = %(me)s
     WHERE id = %(me)s AND deleted_at IS NULL RETURNING id
"""


async def reset_feed(session: AsyncSession, *, principal_id: uuid.UUID, now: datetime) -> str:
    feed_id = new_feed_id()
    done = await (await statements(session)).value(_RESET_FEED, {"feed": feed_id, "now": now, "me": principal_id})
    if done is None:
        raise errors.ProfileNotFound()
    await audit.record(session, action="social.calendar_feed.reset", actor=Actor.user(principal_id),
                       subject=("profile", principal_id), now=now)
    return feed_id
