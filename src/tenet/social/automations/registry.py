"""What automations can do and when they run: the registry of job types (their parameters, targets and misfire
grace) and the slots of a schedule.

A job runs at `schedule_time` (wall time) in its owner's `preferences.timezone`, every day or on one ISO weekday.
The next slot after an instant is computed in Python with zoneinfo (fold 0): a wall time that does not exist runs
with the offset before the gap (02:30 on the spring-forward night runs at 03:30 new time), one that occurs twice
runs once, at its first occurrence (D-18, RFC 5545's rule, as for items).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.social import errors, items
from tenet.social.models import AutomationJob

# --- the registry of job types ------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    kind: type
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        kind = {bool: "boolean", int: "integer", str: "string"}[self.kind]
        out: dict[str, Any] = {"type": kind, "default": self.default}
        if self.low is not None:
            out.update(minimum=self.low, maximum=self.high)
        if self.choices:
            out["enum"] = list(self.choices)
        return out


@dataclass(frozen=True)
class JobType:
    name: str
    description: str
    target_types: tuple[str, ...]
    params: dict[str, Param]
    grace: timedelta

    def params_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False,
                "properties": {name: p.schema() for name, p in self.params.items()}}


REGISTRY: dict[str, JobType] = {t.name: t for t in (
    JobType("todo_digest", "An inbox message summarising your pending todos due soon and the overdue ones.",
            ("user",), {"include_overdue": Param(bool, True), "horizon_days": Param(int, 1, 1, 14),
                        "max_items": Param(int, 20, 1, 50), "skip_if_empty": Param(bool, True)},
            timedelta(hours=12)),
    JobType("schedule_reminder", "Reminds the owner and the subscribers (notify level other than none) of "
            "occurrences starting within the next hours_ahead hours.",
            ("user", "schedule_item"), {"hours_ahead": Param(int, 24, 1, 72)}, timedelta(hours=1)),
    JobType("todo_from_schedule", "Extracts todos for the occurrences of your items (owned or subscribed) that "
            "start tomorrow in your time zone.",
            ("user",), {"priority": Param(str, "medium", choices=("low", "medium", "high", "urgent"))},
            timedelta(hours=12)),
)}


def invalid(loc: list[str], msg: str) -> errors.AutomationInvalid:
    return errors.AutomationInvalid(f"{'.'.join(loc)}: {msg}",
                                    errors=[{"loc": ["body", *loc], "msg": msg, "type": "value_error"}])


def validated_params(job_type: str, params: dict[str, Any]) -> dict[str, Any]:
    kind = REGISTRY.get(job_type)
    if kind is None:
        raise invalid(["job_type"], f"one of {', '.join(REGISTRY)}")
    out = {}
    for name, value in params.items():
        spec = kind.params.get(name)
        if spec is None:
            raise invalid(["params", name], f"unknown parameter of {job_type}")
        out_of_range = (spec.low is not None and spec.high is not None and isinstance(value, int)
                        and not spec.low <= value <= spec.high)
        if type(value) is not spec.kind or out_of_range or (spec.choices and value not in spec.choices):
            raise invalid(["params", name], f"must match {spec.schema()}")
        out[name] = value
    return out


def param(job: AutomationJob, name: str) -> Any:
    return job.params.get(name, REGISTRY[job.job_type].params[name].default)


# --- slots ---------------------------------------------------------------------------------------------


def next_slot(after: datetime, *, schedule_type: str, schedule_time: time, weekday: int | None,
              zone: str) -> datetime:
    """The first slot strictly after `after` (UTC): wall time `schedule_time` in `zone`, fold 0."""
    tz = ZoneInfo(zone)
    first = after.astimezone(tz).date()
    for delta in range(9):
        day = first + timedelta(days=delta)
        if schedule_type == "weekly" and day.isoweekday() != weekday:
            continue
        slot = datetime.combine(day, schedule_time, tzinfo=tz).astimezone(UTC)
        if slot > after:
            return slot
    raise AssertionError("a slot exists within 9 days")


def slot_of(job: AutomationJob, after: datetime, zone: str) -> datetime:
    return next_slot(after, schedule_type=job.schedule_type, schedule_time=job.schedule_time,
                     weekday=job.schedule_weekday, zone=zone)


async def zone_of(session: AsyncSession, owner_id: uuid.UUID, default_timezone: str) -> str:
    """The zone the owner's jobs run in: their settings', else the service's default."""
    return await items.default_timezone_of(session, owner_id, default_timezone)
