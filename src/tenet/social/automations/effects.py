"""What each job type does when one of its runs executes (spec 000 §C.7): an effect gets the session of the run's
savepoint, the job, the claim and the clock's now, writes inside that savepoint and answers the run's result.
Raising `PermanentError` fails the run without retries and disables the job; any other error is retried.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.social import errors, items, queries, recurrence, todos
from tenet.social.automations.registry import param, zone_of
from tenet.social.models import AutomationJob, ScheduleItem, Todo
from tenet.social.permissions import EDIT


@dataclass(frozen=True)
class Claim:
    """A run a drainer holds: its attempt and the token its conditional updates name."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    scheduled_at: datetime
    token: str


class PermanentError(Exception):
    """The run cannot succeed by retrying (its target is gone or forbidden): fail it and disable the job."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


Effect = Callable[[AsyncSession, AutomationJob, Claim, datetime, str], Awaitable[dict[str, Any]]]


async def _todo_digest(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                       default_timezone: str) -> dict[str, Any]:
    at = claimed.scheduled_at
    horizon = at + timedelta(days=param(job, "horizon_days"))
    # The owner decides how many todos are pending: the database counts them, only the listed ones are read.
    due = [Todo.owner_id == job.owner_id, Todo.status == "pending", Todo.due_at.is_not(None), Todo.due_at < horizon]
    if not param(job, "include_overdue"):
        due.append(Todo.due_at >= at)
    rows = (await session.execute(
        select(Todo.id, Todo.title, Todo.due_at, Todo.priority, func.count().over().label("total"),
               func.count().filter(Todo.due_at < at).over().label("overdue"))
        .where(*due).order_by(Todo.due_at, Todo.id).limit(param(job, "max_items")))).mappings().all()
    total, overdue = (rows[0]["total"], rows[0]["overdue"]) if rows else (0, 0)
    if not rows and param(job, "skip_if_empty"):
        return {"pending_count": 0, "overdue_count": 0, "message_id": None}
    listed = [{"id": str(r["id"]), "title": r["title"], "due_at": r["due_at"].isoformat(), "priority": r["priority"]}
              for r in rows]
    message_id = await _message(session, recipient=job.owner_id, kind="todo_digest", job=job, run_id=claimed.run_id,
                                dedup=f"todo_digest:{claimed.run_id}", now=now,
                                content={"pending_count": total - overdue, "overdue_count": overdue,
                                         "todos": listed})
    return {"pending_count": total - overdue, "overdue_count": overdue, "message_id": message_id}


# Written once per (recipient, dedup key): a run repeated after a crash writes nothing twice.
_MESSAGE = """
    INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id,
                                       actionable, status, dedup_key, automation_run_id, created_at)
    VALUES (%(id)s, %(r)s, %(kind)s, CAST(%(content)s AS jsonb), %(rt)s, %(rid)s, false, 'pending', %(dedup)s,
            %(run)s, %(now)s)
    ON CONFLICT (recipient_id, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING RETURNING id
"""


async def _message(session: AsyncSession, *, recipient: uuid.UUID, kind: str, job: AutomationJob,
                   run_id: uuid.UUID, dedup: str, content: dict[str, Any], now: datetime,
                   related: tuple[str, uuid.UUID] | None = None) -> uuid.UUID | None:
    related_type, related_id = related or ("automation_job", job.id)
    made: uuid.UUID | None = await (await statements(session)).value(_MESSAGE, {
        "id": uuid.uuid4(), "r": recipient, "kind": kind, "content": json.dumps(content), "rt": related_type,
        "rid": related_id, "dedup": dedup, "run": run_id, "now": now})
    return made


_REMINDER_RECIPIENTS = """
    WITH wanted AS (
        SELECT CAST(%(owner)s AS uuid) AS user_id
        UNION SELECT s.subscriber_user_id FROM social.schedule_subscriptions s
         WHERE s.item_id = %(item)s AND s.subject_type = 'user' AND s.status = 'active' AND s.notify_level <> 'none'
        UNION SELECT m.user_id FROM social.schedule_subscriptions s
          JOIN social.groups g ON g.id = s.subscriber_group_id AND g.status = 'active'
          JOIN social.group_members m ON m.group_id = g.id AND m.status = 'active'
         WHERE s.item_id = %(item)s AND s.subject_type = 'group' AND s.status = 'active' AND s.notify_level <> 'none')
    SELECT u.id FROM wanted w JOIN iam.user_account u ON u.id = w.user_id AND u.status = 'active'
      LEFT JOIN social.profiles p ON p.id = u.id
     WHERE coalesce(p.settings #> '{notification,enabled}', 'true'::jsonb) <> 'false'::jsonb
     ORDER BY u.id FOR SHARE OF u SKIP LOCKED
"""


async def _reminder_recipients(session: AsyncSession, item_id: uuid.UUID, owner_id: uuid.UUID) -> list[uuid.UUID]:
    """The owner, direct subscribers (active, notify level not none) and active members of groups with an
    active group subscription (notify level not none), minus anyone whose notifications are off; active
    accounts only, share-locked (id order, SKIP LOCKED: see common.active_account_ids)."""
    rows = await (await statements(session)).all(_REMINDER_RECIPIENTS, {"owner": owner_id, "item": item_id})
    return [row["id"] for row in rows]


async def _schedule_reminder(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                             default_timezone: str) -> dict[str, Any]:
    start = claimed.scheduled_at
    end = start + timedelta(hours=param(job, "hours_ahead"))
    if job.target_type == "schedule_item":
        try:
            decision = await items.decide(session, job.target_id, job.owner_id)
        except errors.ScheduleItemNotFound:
            raise PermanentError("TARGET_GONE", "the item is gone or no longer visible") from None
        if not decision.bits & EDIT:
            raise PermanentError("TARGET_FORBIDDEN", "the owner no longer holds edit on the item")
        targets = [decision.item]
    else:
        targets = list((await session.scalars(select(ScheduleItem).where(
            ScheduleItem.owner_id == job.owner_id, ScheduleItem.status == "active", ScheduleItem.start_at < end,
            (ScheduleItem.series_end_at.is_(None)) | (ScheduleItem.series_end_at > start)))).all())
    written = 0
    occurrences = 0
    # Every series of the owner expanded: CPU work, off the event loop (plain values: no ORM object in the thread).
    due = await anyio.to_thread.run_sync(_starting_in, [(item.start_at, item.end_at, item.timezone,
                                                         item.recurrence_rule, item.series_end_at)
                                                        for item in targets], start, end)
    for item, found in zip(targets, due, strict=True):
        for occurrence in found:
            occurrences += 1
            recipients = await _reminder_recipients(session, item.id, item.owner_id)
            for recipient in recipients:
                made = await _message(
                    session, recipient=recipient, kind="schedule_reminder", job=job, run_id=claimed.run_id,
                    dedup=f"schedule_reminder:{item.id}:{occurrence.start_at.isoformat()}", now=now,
                    related=("schedule_item", item.id),
                    content={"title": item.title, "occurrence_start": occurrence.start_at.isoformat(),
                             "occurrence_end": occurrence.end_at.isoformat(), "timezone": item.timezone})
                written += made is not None
    return {"occurrences": occurrences, "reminders": written}


def _starting_in(series: list[tuple[datetime, datetime, str, str | None, datetime | None]], start: datetime,
                 end: datetime) -> list[list[recurrence.Occurrence]]:
    """Each series' occurrences that start in (start, end]."""
    return [[o for o in recurrence.occurrences(start_at=first, end_at=first_end, timezone=zone, recurrence_rule=rule,
                                               series_end_at=series_end, window_from=start, window_to=end)
             if start < o.start_at <= end]
            for first, first_end, zone, rule, series_end in series]


async def _todo_from_schedule(session: AsyncSession, job: AutomationJob, claimed: Claim, now: datetime,
                              default_timezone: str) -> dict[str, Any]:
    zone = await zone_of(session, job.owner_id, default_timezone)
    tz = ZoneInfo(zone)
    tomorrow = claimed.scheduled_at.astimezone(tz).date() + timedelta(days=1)
    window = (datetime.combine(tomorrow, time(0), tzinfo=tz).astimezone(UTC),
              datetime.combine(tomorrow + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC))
    candidates = await (await statements(session)).all(queries.WINDOW_IDS_SQL, {
        "me": job.owner_id, "from": window[0], "to": window[1], "limit": todos.MAX_EXTRACTED})
    if not candidates:
        return {"created": 0, "existing": 0}
    _, created, existing = await todos.extract(session, principal_id=job.owner_id,
                                               item_ids=[row["id"] for row in candidates],
                                               window=window, priority=param(job, "priority"), now=now)
    return {"created": len(created), "existing": len(existing)}


EFFECTS: dict[str, Effect] = {"todo_digest": _todo_digest, "schedule_reminder": _schedule_reminder,
                              "todo_from_schedule": _todo_from_schedule}
