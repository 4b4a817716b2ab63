"""Launch clean-up (spec layer 8, "上线手工清理层"; docs/design/outlook.md §7): the checklist of local series that
Outlook is about to own, and the one action it offers, truncating such a series before today.

At launch a team has series that were typed into Tenet by hand and also exist in Outlook. Once the Outlook series is
bound, both would produce meetings. The checklist lists every local series with meetings still to come that no
binding manages, each with the Outlook series masters that look like it (same subject, or the same weekday and local
time of day), and the operations checklist around it. Truncating ends the series in Tenet only: its occurrences that
have not started are deleted (through the meetings service, so their agenda and pending upload tasks go with them),
past ones stay as history, and its rule gets an UNTIL. Nothing is ever written to Outlook (MA-INV-38): this module
has no Graph client at all.

The truncation point is "before today" in the series' own zone, except that an occurrence of today that has already
started stays, so the rule ends on the last occurrence that is kept (docs/decisions.md, issue 17). A series whose
occurrences are all still to come keeps nothing: it is deleted, as `DELETE /series/{id}` would.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.errors import PreconditionFailed
from tenet.kernel.transitions import lock_rows, transition
from tenet.kernel.zones import load_zone
from tenet.meetings import audit, lifecycles, series, service
from tenet.meetings.models import Meeting, MeetingSeries
from tenet.meetings.outlook import errors
from tenet.meetings.outlook.models import OutlookBinding

# Graph's daysOfWeek and RFC 5545's BYDAY, in Python's weekday() order.
_GRAPH_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RRULE_DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_BYDAY_ENTRY = re.compile(r"[+-]?\d{0,2}(MO|TU|WE|TH|FR|SA|SU)")
# Two starts this close on the clock are "the same time" (Outlook series are often typed a few minutes off).
TIME_TOLERANCE_MINUTES = 15
MAX_LOOK_ALIKES = 5
_SPACES = re.compile(r"\s+")


# --- look-alikes (pure: no SQL, no Graph) ---------------------------------------------------------------------

def _subject_key(subject: str | None) -> str:
    return _SPACES.sub(" ", (subject or "").strip()).casefold()


def series_weekdays(rrule: str, start_date: date) -> list[str]:
    """The weekdays (MO..SU) a local series falls on: its BYDAY, every day for DAILY, else its first date's."""
    parts = series.check_rule(rrule)
    if parts.get("FREQ") == "DAILY" and "BYDAY" not in parts:
        return list(_RRULE_DAYS)
    days = [m.group(1) for entry in parts.get("BYDAY", "").split(",") if (m := _BYDAY_ENTRY.fullmatch(entry))]
    return sorted(set(days), key=_RRULE_DAYS.index) if days else [_RRULE_DAYS[start_date.weekday()]]


@dataclass(frozen=True)
class _Candidate:
    row: Mapping[str, Any]
    subject: str
    weekdays: frozenset[str]
    local_time: time | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> _Candidate:
        zone = load_zone(row["timezone"]) if row.get("timezone") else None
        local = row["start_at"].astimezone(zone) if zone is not None and row.get("start_at") else None
        pattern = (row.get("recurrence") or {}).get("pattern") or {}
        graph_days = pattern.get("daysOfWeek")
        days = {_RRULE_DAYS[_GRAPH_DAYS.index(d)] for d in (graph_days if isinstance(graph_days, list) else [])
                if isinstance(d, str) and d in _GRAPH_DAYS}
        if not days and pattern.get("type") == "daily":
            days = set(_RRULE_DAYS)
        if not days and local is not None:
            days = {_RRULE_DAYS[local.weekday()]}
        return cls(row, _subject_key(row.get("subject")), frozenset(days), local.time() if local else None)


def _minutes_apart(a: time, b: time) -> int:
    difference = abs((a.hour * 60 + a.minute) - (b.hour * 60 + b.minute))
    return min(difference, 24 * 60 - difference)


def _signals(local: Mapping[str, Any], weekdays: set[str], subject: str, candidate: _Candidate) -> list[str]:
    found = []
    if subject and candidate.subject and (
            subject == candidate.subject
            or (min(len(subject), len(candidate.subject)) >= 4
                and (subject in candidate.subject or candidate.subject in subject))):
        found.append("subject")
    if weekdays & candidate.weekdays:
        found.append("weekday")
    if candidate.local_time is not None and _minutes_apart(
            local["start_local_time"], candidate.local_time) <= TIME_TOLERANCE_MINUTES:
        found.append("time")
    return found


def look_alikes(local: Mapping[str, Any], candidates: Iterable[_Candidate]) -> list[dict[str, Any]]:
    """The Outlook series masters that look like a local series: the same subject, or the same weekday and time of
    day (within TIME_TOLERANCE_MINUTES). Best first (more signals, then the nearer time), at most MAX_LOOK_ALIKES."""
    weekdays = set(local["weekdays"])
    subject = _subject_key(local["title"])
    found = []
    for candidate in candidates:
        signals = _signals(local, weekdays, subject, candidate)
        if "subject" not in signals and not {"weekday", "time"} <= set(signals):
            continue
        apart = (_minutes_apart(local["start_local_time"], candidate.local_time)
                 if candidate.local_time is not None else 24 * 60)
        row = candidate.row
        found.append((-len(signals), apart, str(row["graph_event_id"]), {
            "mailbox_id": row["mailbox_id"], "graph_event_id": row["graph_event_id"], "subject": row["subject"],
            "timezone": row["timezone"], "weekdays": sorted(candidate.weekdays, key=_RRULE_DAYS.index),
            "local_time": candidate.local_time, "managed": row["managed"], "binding_id": row["binding_id"],
            "signals": signals}))
    found.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in found[:MAX_LOOK_ALIKES]]


def candidate_index(rows: Iterable[Mapping[str, Any]]) -> list[_Candidate]:
    return [_Candidate.of(row) for row in rows]


@dataclass(frozen=True)
class Step:
    """One line of the operations checklist; `done` is read from the data, never ticked by hand."""

    step: str
    title: str
    done: bool
    count: int | None = None


def operations(*, credentials: bool, mailboxes: Mapping[str, int], active_bindings: int,
               unbound_series: int) -> list[Step]:
    """The launch's order of work, each step done or not by what the database holds now."""
    healthy = mailboxes.get("OK", 0)
    failing = sum(n for state, n in mailboxes.items() if state in ("DEGRADED", "ACCESS_DENIED", "INVALID"))
    return [
        Step("credentials", "Set GRAPH_TENANT_ID, GRAPH_CLIENT_ID, GRAPH_CLIENT_SECRET and "
             "GRAPH_NOTIFICATION_CLIENT_STATE, and scope the app to the mailboxes (Exchange RBAC for Applications)",
             credentials),
        Step("mailboxes", "Add the source mailboxes (POST /outlook/mailboxes); each must reach state OK",
             healthy > 0 and failing == 0, healthy),
        Step("bindings", "Bind the Outlook series and events Tenet should manage (POST /outlook/bindings)",
             active_bindings > 0, active_bindings),
        Step("truncate_local_series", "Truncate each local series below before today "
             "(POST /outlook/cleanup/series/{id}/truncate); Outlook's own series is never written",
             unbound_series == 0, unbound_series),
        Step("watch_sync", "Watch GET /outlook/sync-status for a day: subscriptions renewed, delta rounds recent, "
             "reconciliations with nothing to repair", healthy > 0 and failing == 0),
    ]


def checklist(series_rows: Sequence[Mapping[str, Any]], masters: Sequence[Mapping[str, Any]],
              counts: Mapping[str, Any], *, credentials: bool) -> dict[str, Any]:
    """The launch checklist (CPU-bound with many series and masters: the route runs it off the event loop)."""
    index = candidate_index(masters)
    items = []
    for row in series_rows:
        local = {**row, "weekdays": series_weekdays(row["rrule"], row["start_date"])}
        items.append({**local, "look_alikes": look_alikes(local, index)})
    steps = operations(credentials=credentials, mailboxes=counts["mailboxes"] or {},
                       active_bindings=int(counts["active_bindings"]), unbound_series=len(items))
    return {"series": items, "operations": [vars(step) for step in steps]}


# --- the truncation (a command) -----------------------------------------------------------------------------

@dataclass
class Truncation:
    series_id: uuid.UUID
    status: str  # the series' status after: ACTIVE (ends at `until`) or DELETED (nothing of it had started)
    rrule: str
    until: date | None
    deleted_meeting_ids: list[str] = field(default_factory=list)
    changed: bool = True


def truncated_rule(rule: str, until: date) -> str:
    """The rule with its COUNT / UNTIL replaced by UNTIL=<until> (the series' own local date)."""
    kept = [f"{k}={v}" for k, v in series.check_rule(rule).items() if k not in ("COUNT", "UNTIL")]
    return ";".join([*kept, f"UNTIL={until:%Y%m%d}"])


async def _refuse_if_managed(session: AsyncSession, series_id: uuid.UUID) -> None:
    bound = await session.scalar(select(OutlookBinding.id).where(
        OutlookBinding.series_id == series_id, OutlookBinding.status.in_(("PENDING", "ACTIVE"))))
    if bound is not None:
        raise errors.Managed(binding_id=str(bound))


async def _last_started(session: AsyncSession, series_id: uuid.UUID, now: datetime) -> date | None:
    return await session.scalar(select(func.max(Meeting.series_occurrence_date)).where(
        Meeting.series_id == series_id, Meeting.status != "DELETED", Meeting.start_time <= now))


async def _delete_not_started(session: AsyncSession, series_id: uuid.UUID, principal_id: uuid.UUID,
                              now: datetime) -> list[str]:
    conditions = (Meeting.series_id == series_id, Meeting.status.in_(("ACTIVE", "CANCELLED")),
                  Meeting.start_time > now)
    ids = list((await session.scalars(select(Meeting.id).where(*conditions))).all())
    locked = await lock_rows(session, Meeting, ids, mode="no key update", where=conditions)
    gone = await service.delete_meetings(session, meeting_ids=locked, actor=Actor.user(principal_id), now=now,
                                         actor_id=principal_id)
    return [m.id for m in gone]


async def truncate_series(session: AsyncSession, *, principal_id: uuid.UUID, series_id: uuid.UUID,
                          expected_version: int | None, now: datetime) -> Truncation:
    """End a local series before today, in Tenet only (see the module's docstring). Lock order: the series, then
    its meetings. A series an Outlook binding manages is refused (409 OUTLOOK_MANAGED): the sync owns it. Running
    it again changes nothing and writes no audit row (`changed` false)."""
    row = await series.lock_series(session, series_id)
    await _refuse_if_managed(session, series_id)
    if expected_version is not None and row.version != expected_version:
        raise PreconditionFailed(current_version=row.version)
    today = now.astimezone(load_zone(row.timezone)).date()
    last_started = await _last_started(session, series_id, now)
    until = max(today - timedelta(days=1), last_started) if last_started else today - timedelta(days=1)
    if until < row.start_date:
        deleted = await series.delete_series(session, series_id=series_id, principal_id=principal_id, now=now)
        await _audit(session, principal_id, series_id, now, before=row.rrule, after=None, deleted=len(deleted))
        return Truncation(series_id, "DELETED", row.rrule, None, deleted)
    before, rule = row.rrule, truncated_rule(row.rrule, until)
    deleted = await _delete_not_started(session, series_id, principal_id, now)
    if rule == before and not deleted:
        return Truncation(series_id, "ACTIVE", rule, until, [], changed=False)
    await transition(session, lifecycles.SERIES, "update", model=MeetingSeries, id=series_id,
                     values={"rrule": rule, "updated_at": now})
    await _audit(session, principal_id, series_id, now, before=before, after=rule, deleted=len(deleted))
    return Truncation(series_id, "ACTIVE", rule, until, deleted)


async def _audit(session: AsyncSession, principal_id: uuid.UUID, series_id: uuid.UUID, now: datetime, *,
                 before: str, after: str | None, deleted: int) -> None:
    await audit.record(session, action=audit.Action.OUTLOOK_SERIES_TRUNCATED, resource=audit.Resource.SERIES,
                       resource_id=series_id, series_id=series_id, now=now, actor=Actor.user(principal_id),
                       before={"rrule": before}, after={"rrule": after, "deleted_meetings": deleted})
