"""The sync's business policy (spec layer 6; MA-INV-39): one row, read by every job run, changed by PUT
/outlook/settings under If-Match. Credentials stay in the environment (MeetingSettings); this module never
sees a secret."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.errors import PreconditionFailed
from tenet.meetings import audit
from tenet.meetings.outlook import errors
from tenet.meetings.outlook.models import POLICY_DEFAULTS, POLICY_RANGES, OutlookPolicy
from tenet.meetings.settings import MeetingSettings


@dataclass(frozen=True)
class Policy:
    """The row as the jobs use it."""

    subscription_lifetime_minutes: int
    renewal_margin_minutes: int
    window_days_back: int
    window_days_ahead: int
    reconcile_cron: str
    batch_size: int
    max_concurrent_requests: int
    retry_max_attempts: int
    retry_base_seconds: int

    @classmethod
    def from_row(cls, row: Any) -> Policy:
        values: dict[str, Any] = {name: row[name] if isinstance(row, dict) else getattr(row, name)
                                  for name in POLICY_DEFAULTS}
        return cls(**values)


DEFAULT_POLICY = Policy(**POLICY_DEFAULTS)


# A whole common year, read from its last minute before: a schedule must fire in it. A year without 29 February, so
# "0 0 29 2 *" (once in four years) is refused like "0 0 31 2 *" (never); the answer never depends on today.
_YEAR_BEFORE, _YEAR_END = datetime(2026, 12, 31, 23, 59, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)


def fires_every_year(cron: str) -> bool:
    """Whether a well-formed cron names at least one minute of every year (croniter looks at most a year ahead, so
    the check costs a few milliseconds whatever the fields say)."""
    try:
        following = croniter(cron, _YEAR_BEFORE, max_years_between_matches=1).get_next(datetime)
    except (CroniterBadDateError, ValueError, KeyError, OverflowError):
        return False
    return isinstance(following, datetime) and following < _YEAR_END


def require_sync_on(settings: MeetingSettings) -> None:
    """409 OUTLOOK_SYNC_OFF unless the three Graph credentials are set."""
    if not settings.graph_configured:
        raise errors.SyncOff()


def problems(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """MA-INV-39 as the 422's `errors` (loc/msg/type like the kernel's validation issues); [] when valid."""
    found: list[dict[str, Any]] = []
    for name, (low, high) in POLICY_RANGES.items():
        value = fields[name]
        if not low <= value <= high:
            found.append({"loc": ["body", name], "msg": f"must be between {low} and {high}", "type": "range"})
    if fields["renewal_margin_minutes"] >= fields["subscription_lifetime_minutes"]:
        found.append({"loc": ["body", "renewal_margin_minutes"],
                      "msg": "must be below subscription_lifetime_minutes", "type": "range"})
    cron = fields["reconcile_cron"]
    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        found.append({"loc": ["body", "reconcile_cron"], "msg": "must be five cron fields", "type": "cron"})
    elif not fires_every_year(cron):
        found.append({"loc": ["body", "reconcile_cron"], "msg": "must fire at least once a year (this one never "
                      "does, or not every year, such as 31 February or 29 February)", "type": "cron"})
    return found


async def current(session: AsyncSession) -> Policy:
    row = (await session.scalars(select(OutlookPolicy).where(OutlookPolicy.id == 1))).one()
    return Policy.from_row(row)


async def update_policy(session: AsyncSession, *, principal_id: uuid.UUID, fields: dict[str, Any],
                        expected_version: int | None, now: datetime) -> OutlookPolicy:
    """Replace the policy (PUT): every field given; 422 before any write when a value is out of range; 412 when
    If-Match names another version. Audited with before and after (MA-INV-40)."""
    found = problems(fields)
    if found:
        raise errors.PolicyInvalid(errors=found)
    before = (await session.scalars(select(OutlookPolicy).where(OutlookPolicy.id == 1).with_for_update()
                                    .execution_options(populate_existing=True))).one()
    if expected_version is not None and before.version != expected_version:
        raise PreconditionFailed(current_version=before.version)
    old = {name: getattr(before, name) for name in POLICY_DEFAULTS} | {"version": before.version}
    row = (await session.scalars(
        update(OutlookPolicy).where(OutlookPolicy.id == 1)
        .values(**fields, updated_at=now, updated_by_id=principal_id, version=OutlookPolicy.version + 1)
        .returning(OutlookPolicy).execution_options(synchronize_session=False, populate_existing=True))).one()
    new = {name: getattr(row, name) for name in POLICY_DEFAULTS} | {"version": row.version}
    await audit.record(session, action=audit.Action.OUTLOOK_POLICY_UPDATED, resource=audit.Resource.OUTLOOK_POLICY,
                       resource_id=1, now=now, actor=Actor.user(principal_id), before=old, after=new)
    return row
