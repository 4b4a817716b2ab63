"""Series commands: create, change, reschedule and delete a series (RFC 5545 recurrence, materialised and bounded:
D-21) with its occurrences. Each runs in the caller's unit of work and never commits (templates:
tenet.meetings.templates).

A series generates its occurrences as ordinary meetings, so every meeting rule holds for them without special
cases. An occurrence is known by its date (RECURRENCE-ID as a local date in the series' zone), never by its
instant: moving it never changes which occurrence it is, and a deleted occurrence keeps its date, so extending
the series never brings it back (MA-INV-16). Wall-clock times are kept across DST; a local time that does not
exist (spring forward) moves forward by the gap, an ambiguous one takes the first instant (RFC 5545 §3.3.5).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from typing import Any

import anyio
from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import recurrence
from tenet.kernel.audit import Actor
from tenet.kernel.errors import PreconditionFailed
from tenet.kernel.statements import statements
from tenet.kernel.transitions import lock_rows, transition
from tenet.meetings import audit, errors, lifecycles, service, times
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import (
    Meeting,
    MeetingRequiredAttendee,
    MeetingSeries,
    SeriesRequiredAttendee,
    Template,
)
from tenet.meetings.outlook import managed

_PART = re.compile(r"^[A-Z]+=[A-Za-z0-9,:+-]+\Z")
_UNTIL = re.compile(r"^(\d{8})(T(\d{6})(Z?))?\Z")
MAX_YEARS = 3
SERIES_FIELDS = ("title", "description", "location", "online_link", "city", "organizer_id", "late_grace_minutes",
                 "checkin_opens_minutes_before", "rotating_online_code", "offline_checkin_enabled")
# Fields an occurrence takes from its series (the ones series-wide edits reach): all of them.
OCCURRENCE_FIELDS = SERIES_FIELDS
# A reschedule moves many occurrences in one statement, each to its own times.
_MOVE = """
    UPDATE meeting_attendance.meetings m
       SET start_time = v.s, end_time = v.e, checkin_closes_at = v.c, schedule_changed_at = %(now)s,
           updated_at = %(now)s, version = m.version + 1
      FROM unnest(CAST(%(ids)s AS varchar[]), CAST(%(starts)s AS timestamptz[]), CAST(%(ends)s AS timestamptz[]),
                  CAST(%(closes)s AS timestamptz[])) AS v(id, s, e, c)
     WHERE m.id = v.id
"""


def _parts(rule: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    for part in rule.strip().upper().split(";"):
        if not _PART.match(part):
            raise errors.RecurrenceInvalid(f"not an RRULE part: {part[:40]!r}")
        name, value = part.split("=", 1)
        if name in parts:
            raise errors.RecurrenceInvalid(f"{name} given twice")
        parts[name] = value
    return parts


def check_rule(rule: str) -> dict[str, str]:
    """MA-INV-18: daily / weekly / monthly / yearly, bounded by COUNT or UNTIL, no time-of-day parts."""
    parts = _parts(rule)
    if parts.get("FREQ") not in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY") or next(iter(parts)) != "FREQ":
        raise errors.RecurrenceInvalid("FREQ must come first and be DAILY, WEEKLY, MONTHLY or YEARLY")
    if "COUNT" not in parts and "UNTIL" not in parts:
        raise errors.RecurrenceInvalid("A series needs COUNT or UNTIL (open-ended series are refused)")
    if {"BYHOUR", "BYMINUTE", "BYSECOND", "DTSTART"} & set(parts):
        raise errors.RecurrenceInvalid("The time of day is the series' start_local_time, not part of the rule")
    return parts


def normalise_rule(rule: str) -> str:
    return ";".join(f"{k}={v}" for k, v in check_rule(rule).items())


def _pattern(rule: str) -> dict[str, str]:
    return {k: v for k, v in check_rule(rule).items() if k not in ("COUNT", "UNTIL")}


def dates(rule: str, start_date: date, zone_name: str, *, limit: int) -> list[date]:
    """The occurrence dates of `rule` from `start_date` (at most `limit`, within MAX_YEARS), or
    RECURRENCE_INVALID / RECURRENCE_TOO_LONG."""
    parts = check_rule(rule)
    if not times.in_range(datetime.combine(start_date, time(0, 0), tzinfo=UTC)):
        raise errors.MeetingTimeInvalid(f"A series lies {times.RANGE_TEXT}", reason="out_of_range")
    if "UNTIL" in parts:
        match = _UNTIL.match(parts["UNTIL"])
        if match is None:
            raise errors.RecurrenceInvalid("UNTIL must be a date (YYYYMMDD) or a UTC time (YYYYMMDDTHHMMSSZ)")
        try:
            until = datetime.strptime(match.group(1), "%Y%m%d").date()
            moment = datetime.strptime(match.group(1) + (match.group(3) or "000000"), "%Y%m%d%H%M%S")
        except ValueError:
            raise errors.RecurrenceInvalid("UNTIL is not a real date or time") from None
        if match.group(4) and date(1, 1, 2) <= until <= date(9999, 12, 30):
            # A UTC instant: the local date it falls on (at the ends of datetime's range, its UTC date).
            until = moment.replace(tzinfo=UTC).astimezone(times.zone(zone_name)).date()
        if until < start_date:
            raise errors.RecurrenceInvalid("The rule has no occurrence")
        parts["UNTIL"] = f"{until:%Y%m%d}T235959"
    text_rule = ";".join(f"{k}={v}" for k, v in parts.items())
    horizon = start_date + timedelta(days=366 * MAX_YEARS)
    try:
        # Bounded (kernel.recurrence): a rule that never matches stops within the supported range.
        occurrences = recurrence.expand(text_rule, datetime.combine(start_date, time(0, 0)))
    except ValueError as exc:
        raise errors.RecurrenceInvalid(str(exc)[:200]) from None
    found: list[date] = []
    for occurrence in occurrences:
        if occurrence.date() > horizon:
            raise errors.RecurrenceTooLong(f"A series spans at most {MAX_YEARS} years", limit=limit)
        found.append(occurrence.date())
        if len(found) > limit:
            raise errors.RecurrenceTooLong(limit=limit)
    if occurrences.truncated:
        raise errors.MeetingTimeInvalid(f"The series runs past {recurrence.SUPPORTED_UNTIL:%Y-%m-%d}",
                                        reason="out_of_range")
    if not found:
        raise errors.RecurrenceInvalid("The rule has no occurrence")
    return found


async def _dates_off_loop(rule: str, start_date: date, zone_name: str, *, limit: int) -> list[date]:
    """`dates` in a worker thread: a rule that stops matching walks to the end of the supported range (bounded,
    but CPU work a client's rule decides)."""
    return await anyio.to_thread.run_sync(partial(dates, rule, start_date, zone_name, limit=limit))


def check_span(days: list[date], local_time: time, zone_name: str, shift_minutes: int, duration_minutes: int) -> None:
    """The first and the last occurrence (sorted dates) start and end inside the supported range: a date before
    2200 can still be an instant after it in its zone."""
    if days:
        first = instant(days[0], local_time, zone_name, shift_minutes)
        last = instant(days[-1], local_time, zone_name, shift_minutes)
        times.check_range(first, last, last + timedelta(minutes=duration_minutes))


def instant(day: date, local_time: time, zone_name: str, shift_minutes: int = 0) -> datetime:
    """The UTC instant of a wall-clock time on a local date (fold 0: gap forward, first of an overlap)."""
    wall = datetime.combine(day, local_time) + timedelta(minutes=shift_minutes)
    return wall.replace(tzinfo=times.zone(zone_name)).astimezone(UTC)


async def _series_attendees(session: AsyncSession, series_id: uuid.UUID) -> list[uuid.UUID]:
    return list((await session.scalars(select(SeriesRequiredAttendee.user_id).where(
        SeriesRequiredAttendee.series_id == series_id).order_by(SeriesRequiredAttendee.user_id))).all())


async def _generate(session: AsyncSession, series: MeetingSeries, days: Iterable[date], attendees: list[uuid.UUID],
                    *, base_url: str, now: datetime, actor_id: uuid.UUID | None) -> list[str]:
    """Insert the occurrences of `days` that do not exist yet (deleted ones included: ON CONFLICT DO NOTHING on
    uq_meetings_series_occurrence), with their attendees and codes. Answers the new meeting ids."""
    rows = []
    for day in days:
        start = instant(day, series.start_local_time, series.timezone, series.generation_shift_minutes)
        rows.append({
            "id": service.new_meeting_id(), "title": series.title, "description": series.description,
            "location": series.location, "online_link": series.online_link, "city": series.city,
            "start_time": start, "end_time": start + timedelta(minutes=series.duration_minutes),
            "timezone": series.timezone, "organizer_id": series.organizer_id,
            "late_grace_minutes": series.late_grace_minutes,
            "checkin_opens_minutes_before": series.checkin_opens_minutes_before,
            "rotating_online_code": series.rotating_online_code,
            "offline_checkin_enabled": series.offline_checkin_enabled, "series_id": series.id,
            "series_occurrence_date": day, "is_exception": False, "template_id": series.template_id,
            "status": "ACTIVE", "schedule_changed_at": now, "created_by_id": actor_id or series.created_by_id,
            "created_at": now, "updated_at": now, "version": 1})
    if not rows:
        return []
    created = list((await session.scalars(
        pg_insert(Meeting).values(rows).on_conflict_do_nothing(
            index_elements=[Meeting.series_id, Meeting.series_occurrence_date],
            index_where=Meeting.series_id.is_not(None)).returning(Meeting.id))).all())
    if created and attendees:
        await (await statements(session)).execute(
            "INSERT INTO meeting_attendance.meeting_required_attendees (meeting_id, user_id, added_at) "
            "SELECT m, u, %(now)s FROM unnest(CAST(%(meetings)s AS varchar[])) m "
            "CROSS JOIN unnest(CAST(%(users)s AS uuid[])) u",
            {"meetings": created, "users": attendees, "now": now})
    await service.store_codes(session, created, base_url=base_url, now=now, actor_id=actor_id)
    return created


def _fill_from_template(values: dict[str, Any], template: Template) -> None:
    for name in ("title", "description", "location", "online_link", "city", "timezone", "duration_minutes",
                 "late_grace_minutes", "checkin_opens_minutes_before", "rotating_online_code",
                 "offline_checkin_enabled"):
        if values.get(name) is None and getattr(template, name) is not None:
            values[name] = getattr(template, name)


async def create_series(session: AsyncSession, *, principal_id: uuid.UUID, fields: Mapping[str, Any],
                        template_id: uuid.UUID | None, policy: service.MeetingPolicy,
                        now: datetime) -> tuple[MeetingSeries, list[str], list[uuid.UUID]]:
    """A series and all its occurrences, with attendees and codes, in one transaction. Answers the series, the
    new meeting ids and the template attendees skipped as inactive."""
    values = dict(fields)
    explicit = set(values.pop("required_attendee_ids", None) or [])
    from_template: list[uuid.UUID] = []
    if template_id is not None:
        template, from_template = await service.load_template(session, template_id)
        _fill_from_template(values, template)
    if not values.get("title") or not values.get("duration_minutes"):
        raise errors.MeetingTimeInvalid("A series needs a title and a duration (or a template with them)",
                                        reason="no_title_or_duration")
    zone_name = values.get("timezone") or policy.default_timezone
    times.zone(zone_name)
    rule = normalise_rule(values["rrule"])
    exdates = sorted(set(values.get("exdates") or []))
    days = [d for d in await _dates_off_loop(rule, values["start_date"], zone_name,
                                             limit=policy.series_max_occurrences) if d not in exdates]
    check_span(days, values["start_local_time"], zone_name, 0, values["duration_minutes"])
    organizer_id = values.get("organizer_id") or principal_id
    await service.require_users(session, explicit | {organizer_id})
    kept, skipped = await service.active_only(session, set(from_template) - explicit)
    attendees = sorted(explicit | set(kept))
    grace = values.get("late_grace_minutes")
    opens = values.get("checkin_opens_minutes_before")
    series = MeetingSeries(
        id=uuid.uuid4(), title=values["title"], description=values.get("description"),
        location=values.get("location"), online_link=values.get("online_link"), city=values.get("city"),
        timezone=zone_name, rrule=rule, start_date=values["start_date"], start_local_time=values["start_local_time"],
        duration_minutes=values["duration_minutes"], generation_shift_minutes=0, exdates=exdates,
        organizer_id=organizer_id, late_grace_minutes=policy.late_grace_minutes if grace is None else grace,
        checkin_opens_minutes_before=policy.checkin_opens_minutes if opens is None else opens,
        rotating_online_code=bool(values.get("rotating_online_code") or False),
        offline_checkin_enabled=values.get("offline_checkin_enabled") is not False, template_id=template_id,
        status="ACTIVE", created_by_id=principal_id, created_at=now, updated_at=now, version=1)
    session.add(series)
    await session.flush()
    if attendees:
        await session.execute(pg_insert(SeriesRequiredAttendee).values(
            [{"series_id": series.id, "user_id": u, "added_at": now, "added_by_id": principal_id} for u in attendees]))
    created = await _generate(session, series, days, attendees, base_url=policy.public_base_url, now=now,
                              actor_id=principal_id)
    await audit.record(session, action=Action.SERIES_CREATED, resource=Resource.SERIES, resource_id=series.id,
                       series_id=series.id, now=now, actor=Actor.user(principal_id),
                       after={"rrule": rule, "occurrences": len(created), "required_attendees": len(attendees)})
    return series, created, skipped


async def lock_series(session: AsyncSession, series_id: uuid.UUID) -> MeetingSeries:
    await lock_rows(session, MeetingSeries, [series_id])
    series = await session.get(MeetingSeries, series_id, populate_existing=True)
    if series is None or series.status != "ACTIVE":
        raise errors.SeriesNotFound()
    return series


async def _future_occurrences(session: AsyncSession, series_id: uuid.UUID, now: datetime, *,
                              include_exceptions: bool, from_date: date | None = None) -> list[Meeting]:
    """Occurrences that have not started, are ACTIVE, and (unless asked) not edited alone; row-locked in id
    order."""
    conditions = [Meeting.series_id == series_id, Meeting.status == "ACTIVE", Meeting.start_time > now]
    if not include_exceptions:
        conditions.append(Meeting.is_exception.is_(False))
    if from_date is not None:
        conditions.append(Meeting.series_occurrence_date >= from_date)
    ids = list((await session.scalars(select(Meeting.id).where(*conditions))).all())
    locked = await lock_rows(session, Meeting, ids, mode="no key update", where=tuple(conditions))
    if not locked:
        return []
    return list((await session.scalars(select(Meeting).where(Meeting.id.in_(locked)).order_by(
        Meeting.series_occurrence_date).execution_options(populate_existing=True))).all())


_REQUIRED = ("title", "organizer_id", "late_grace_minutes", "checkin_opens_minutes_before", "rotating_online_code",
             "offline_checkin_enabled")


@dataclass
class _Edit:
    """What a series-wide edit did to the occurrences: the meetings it created, changed and deleted."""

    created: list[str] = field(default_factory=list)
    updated: set[str] = field(default_factory=set)
    deleted: list[str] = field(default_factory=list)


async def _lock_for_edit(session: AsyncSession, series_id: uuid.UUID, values: Mapping[str, Any],
                         attendees: list[uuid.UUID] | None, new_rule: str | None,
                         expected_version: int | None) -> tuple[MeetingSeries, str | None]:
    """Accounts first, then the series (lock order); the checks of the edit. Answers the series and its new rule
    (normalised), if any."""
    if attendees is not None:
        await service.require_users(session, attendees)
    if values.get("organizer_id") is not None:
        await service.require_users(session, [values["organizer_id"]])
    series = await lock_series(session, series_id)
    if expected_version is not None and series.version != expected_version:
        raise PreconditionFailed(current_version=series.version)
    for required in _REQUIRED:
        if required in values and values[required] is None:
            raise errors.MeetingTimeInvalid(f"{required} cannot be cleared", reason="required_field")
    if new_rule is not None:
        if _pattern(new_rule) != _pattern(series.rrule):
            raise errors.RecurrenceChangeUnsupported()
        new_rule = normalise_rule(new_rule)
    return series, new_rule


async def _update_fields(session: AsyncSession, meetings: list[Meeting], values: Mapping[str, Any], now: datetime,
                         edit: _Edit) -> None:
    """The series' fields onto its future occurrences (one statement)."""
    field_values = {k: v for k, v in values.items() if k in OCCURRENCE_FIELDS}
    if not field_values or not meetings:
        return
    schedule = {"schedule_changed_at": now} if {"late_grace_minutes", "checkin_opens_minutes_before"} & set(
        field_values) else {}
    await session.execute(update(Meeting).where(Meeting.id.in_([m.id for m in meetings])).values(
        **field_values, updated_at=now, version=Meeting.version + 1, **schedule))
    edit.updated |= {m.id for m in meetings}


async def _replace_attendees(session: AsyncSession, series_id: uuid.UUID, meetings: list[Meeting],
                             attendees: list[uuid.UUID] | None, principal_id: uuid.UUID, now: datetime,
                             edit: _Edit) -> list[uuid.UUID]:
    """The series' required attendees replaced (and on its future occurrences) when they changed. Answers the list
    as it is now."""
    current = await _series_attendees(session, series_id)
    if attendees is None or sorted(set(attendees)) == current:
        return current
    wanted = sorted(set(attendees))
    await session.execute(delete(SeriesRequiredAttendee).where(SeriesRequiredAttendee.series_id == series_id))
    if wanted:
        await session.execute(pg_insert(SeriesRequiredAttendee).values(
            [{"series_id": series_id, "user_id": u, "added_at": now, "added_by_id": principal_id} for u in wanted]))
    ids = [m.id for m in meetings]
    if ids:
        await session.execute(delete(MeetingRequiredAttendee).where(
            MeetingRequiredAttendee.meeting_id.in_(ids), MeetingRequiredAttendee.user_id.not_in(wanted)))
        await service.add_attendees(session, ids, wanted, now=now, added_by=principal_id)
        edit.updated |= set(ids)
    return wanted


async def _change_rule(session: AsyncSession, series: MeetingSeries, new_rule: str, series_values: dict[str, Any],
                       attendees: list[uuid.UUID], *, policy: service.MeetingPolicy, principal_id: uuid.UUID,
                       now: datetime, edit: _Edit) -> MeetingSeries:
    """A new COUNT / UNTIL: future occurrences beyond the new end are deleted, the series is updated, and the new
    future dates are generated (a deleted occurrence never comes back: MA-INV-16)."""
    days = await _dates_off_loop(new_rule, series.start_date, series.timezone, limit=policy.series_max_occurrences)
    keep = set(days) - set(series.exdates)
    check_span(sorted(keep), series.start_local_time, series.timezone, series.generation_shift_minutes,
               series.duration_minutes)
    beyond = [m for m in await _future_occurrences(session, series.id, now, include_exceptions=False)
              if m.series_occurrence_date not in keep]
    if beyond:
        gone = await service.delete_meetings(session, meeting_ids=[m.id for m in beyond],
                                             actor=Actor.user(principal_id), now=now, actor_id=principal_id)
        edit.deleted = [m.id for m in gone]
    series = await transition(session, lifecycles.SERIES, "update", model=MeetingSeries, id=series.id,
                              values={**series_values, "rrule": new_rule})
    future_days = [d for d in sorted(keep) if instant(d, series.start_local_time, series.timezone,
                                                      series.generation_shift_minutes) > now]
    edit.created = await _generate(session, series, future_days, attendees, base_url=policy.public_base_url,
                                   now=now, actor_id=principal_id)
    return series


async def update_series(session: AsyncSession, *, series_id: uuid.UUID, principal_id: uuid.UUID,
                        changes: Mapping[str, Any], apply_to_exceptions: bool, expected_version: int | None,
                        policy: service.MeetingPolicy, now: datetime) -> tuple[MeetingSeries, list[str], list[str],
                                                                               list[str]]:
    """Series-wide edit: fields and attendees reach its future occurrences (not those edited alone unless
    asked); a new COUNT / UNTIL extends (new dates generated) or truncates (future dates beyond it deleted).
    Answers (series, created, updated, deleted meeting ids)."""
    values = dict(changes)
    attendees = values.pop("required_attendee_ids", None)
    series, new_rule = await _lock_for_edit(session, series_id, values, attendees, values.pop("rrule", None),
                                            expected_version)
    changed = [k for k, v in values.items() if getattr(series, k, None) != v]
    await managed.refuse_owned_series_changes(
        session, series_id, changed + (["rrule"] if new_rule is not None and new_rule != series.rrule else []))
    edit = _Edit()
    meetings = await _future_occurrences(session, series_id, now, include_exceptions=apply_to_exceptions)
    await _update_fields(session, meetings, values, now, edit)
    current_attendees = await _replace_attendees(session, series_id, meetings, attendees, principal_id, now, edit)
    series_values = {**{k: v for k, v in values.items() if k in SERIES_FIELDS}, "updated_at": now}
    if new_rule is not None and new_rule != series.rrule:
        series = await _change_rule(session, series, new_rule, series_values, current_attendees, policy=policy,
                                    principal_id=principal_id, now=now, edit=edit)
    else:
        series = await transition(session, lifecycles.SERIES, "update", model=MeetingSeries, id=series_id,
                                  values=series_values)
    await audit.record(session, action=Action.SERIES_UPDATED, resource=Resource.SERIES, resource_id=series_id,
                       series_id=series_id, now=now, actor=Actor.user(principal_id),
                       after={**service.audit_values(values), "rrule": new_rule, "created": len(edit.created),
                              "updated": len(edit.updated), "deleted": len(edit.deleted)})
    return series, edit.created, sorted(edit.updated - set(edit.deleted)), edit.deleted


async def reschedule_series(session: AsyncSession, *, series_id: uuid.UUID, from_meeting_id: str,
                            principal_id: uuid.UUID, shift_minutes: int | None, start_local_time: time | None,
                            duration_minutes: int | None, include_exceptions: bool,
                            now: datetime) -> tuple[list[str], list[dict[str, str]]]:
    """Move an occurrence and the later ones that have not started (D-22): by `shift_minutes` of wall-clock time,
    or to a new local time of day (and duration). Lateness is recomputed by the meetings' trigger."""
    if (shift_minutes is None) == (start_local_time is None):
        raise errors.MeetingTimeInvalid("Give exactly one of shift_minutes and start_local_time",
                                        reason="one_of_shift_or_time")
    series = await lock_series(session, series_id)
    await managed.refuse_owned_series_changes(session, series_id, ["shift_minutes"])  # times are Outlook's
    first = await session.get(Meeting, from_meeting_id, populate_existing=True)
    if first is None or first.series_id != series_id or first.status == "DELETED":
        raise errors.SeriesOccurrenceNotFound(meeting_id=from_meeting_id)
    if first.start_time <= now:
        raise errors.SeriesOccurrenceStarted(meeting_id=from_meeting_id)
    assert first.series_occurrence_date is not None
    everything = await _future_occurrences(session, series_id, now, include_exceptions=True,
                                           from_date=first.series_occurrence_date)
    targets = [m for m in everything if include_exceptions or not m.is_exception]
    skipped = [{"meeting_id": m.id, "reason": "exception"} for m in everything if m not in targets]
    zone = times.zone(series.timezone)
    moves = []
    for meeting in targets:
        duration = timedelta(minutes=duration_minutes) if duration_minutes else meeting.end_time - meeting.start_time
        if shift_minutes is not None:
            wall = meeting.start_time.astimezone(zone).replace(tzinfo=None) + timedelta(minutes=shift_minutes)
            start = wall.replace(tzinfo=zone).astimezone(UTC)
        else:
            assert meeting.series_occurrence_date is not None and start_local_time is not None
            start = instant(meeting.series_occurrence_date, start_local_time, series.timezone)
        closes = None
        if meeting.checkin_closes_at is not None:
            closes = meeting.checkin_closes_at + (start - meeting.start_time)
        times.check_times(start, start + duration, meeting.checkin_opens_minutes_before, closes)
        moves.append((meeting.id, start, start + duration, closes))
    if moves:
        await (await statements(session)).execute(_MOVE, {
            "ids": [m[0] for m in moves], "starts": [m[1] for m in moves], "ends": [m[2] for m in moves],
            "closes": [m[3] for m in moves], "now": now})
    series_values: dict[str, Any] = {"updated_at": now}
    if shift_minutes is not None:
        series_values["generation_shift_minutes"] = max(-10080, min(10080, series.generation_shift_minutes
                                                                    + shift_minutes))
    else:
        series_values |= {"start_local_time": start_local_time, "generation_shift_minutes": 0}
    if duration_minutes:
        series_values["duration_minutes"] = duration_minutes
    await transition(session, lifecycles.SERIES, "update", model=MeetingSeries, id=series_id, values=series_values)
    await audit.record(session, action=Action.SERIES_RESCHEDULED, resource=Resource.SERIES, resource_id=series_id,
                       series_id=series_id, now=now, actor=Actor.user(principal_id),
                       after={"from_meeting_id": from_meeting_id, "shift_minutes": shift_minutes,
                              "start_local_time": start_local_time, "duration_minutes": duration_minutes,
                              "moved": len(moves)})
    return [m[0] for m in moves], skipped


async def delete_series(session: AsyncSession, *, series_id: uuid.UUID, principal_id: uuid.UUID,
                        now: datetime) -> list[str]:
    """DELETED, with every meeting of it that has not started (MA-INV-17); started and past ones stay as
    history. Answers the deleted meeting ids."""
    await lock_series(session, series_id)
    await transition(session, lifecycles.SERIES, "delete", model=MeetingSeries, id=series_id,
                     values={"deleted_at": now, "deleted_by_id": principal_id, "updated_at": now})
    conditions = (Meeting.series_id == series_id, Meeting.status.in_(["ACTIVE", "CANCELLED"]),
                  Meeting.start_time > now)
    ids = list((await session.scalars(select(Meeting.id).where(*conditions))).all())
    locked = await lock_rows(session, Meeting, ids, mode="no key update", where=conditions)
    gone = await service.delete_meetings(session, meeting_ids=locked, actor=Actor.user(principal_id), now=now,
                                         actor_id=principal_id)
    await audit.record(session, action=Action.SERIES_DELETED, resource=Resource.SERIES, resource_id=series_id,
                       series_id=series_id, now=now, actor=Actor.user(principal_id),
                       after={"deleted_meetings": len(gone)})
    return [m.id for m in gone]


# --- mirrored series (the Outlook sync: occurrences come from Graph's /instances, not from the RRULE) -----------

async def create_mirrored_series(session: AsyncSession, *, principal_id: uuid.UUID, fields: Mapping[str, Any],
                                 policy: service.MeetingPolicy, actor: Actor, now: datetime) -> MeetingSeries:
    """The series row only: its RRULE describes the pattern (docs/design/outlook.md §4); the caller adds each
    occurrence with `add_occurrence` at the instants the source gives."""
    series = MeetingSeries(
        id=uuid.uuid4(), title=fields["title"], description=fields.get("description"),
        location=fields.get("location"), online_link=fields.get("online_link"), city=None,
        timezone=fields["timezone"], rrule=normalise_rule(fields["rrule"]), start_date=fields["start_date"],
        start_local_time=fields["start_local_time"], duration_minutes=fields["duration_minutes"],
        generation_shift_minutes=0, exdates=[], organizer_id=principal_id,
        late_grace_minutes=policy.late_grace_minutes, checkin_opens_minutes_before=policy.checkin_opens_minutes,
        rotating_online_code=False, offline_checkin_enabled=True, template_id=None, status="ACTIVE",
        created_by_id=principal_id, created_at=now, updated_at=now, version=1)
    session.add(series)
    await session.flush()
    await audit.record(session, action=Action.SERIES_CREATED, resource=Resource.SERIES, resource_id=series.id,
                       series_id=series.id, now=now, actor=actor, after={"rrule": series.rrule, "occurrences": 0})
    return series


async def mirror_series_fields(session: AsyncSession, *, series_id: uuid.UUID, values: Mapping[str, Any],
                               actor: Actor, now: datetime) -> MeetingSeries:
    """The series row as its source now describes it (the fields that differ; audited when any did)."""
    series = await lock_series(session, series_id)
    changed = {k: v for k, v in values.items() if getattr(series, k) != v}
    if "rrule" in changed:
        changed["rrule"] = normalise_rule(changed["rrule"])
    if not changed:
        return series
    series = await transition(session, lifecycles.SERIES, "update", model=MeetingSeries, id=series_id,
                              values={**changed, "updated_at": now})
    await audit.record(session, action=Action.SERIES_UPDATED, resource=Resource.SERIES, resource_id=series_id,
                       series_id=series_id, now=now, actor=actor, after=service.audit_values(changed))
    return series


async def add_occurrence(session: AsyncSession, series: MeetingSeries, *, day: date, fields: Mapping[str, Any],
                         attendees: list[uuid.UUID], policy: service.MeetingPolicy, principal_id: uuid.UUID,
                         actor: Actor, now: datetime) -> str | None:
    """One occurrence of a mirrored series at the instants given (`fields` has title, description, location,
    online_link, start_time, end_time). None when the date has a meeting already, a deleted one included: a
    deleted occurrence never comes back (MA-INV-16)."""
    times.check_times(fields["start_time"], fields["end_time"], series.checkin_opens_minutes_before, None)
    row = {name: getattr(series, name) for name in ("city", "timezone", "organizer_id", "late_grace_minutes",
                                                  "checkin_opens_minutes_before", "rotating_online_code",
                                                  "offline_checkin_enabled")}
    row.update({name: fields.get(name) for name in ("title", "description", "location", "online_link",
                                                    "start_time", "end_time")})
    row.update(id=service.new_meeting_id(), series_id=series.id, series_occurrence_date=day, is_exception=False,
               template_id=None, status="ACTIVE", schedule_changed_at=now, created_by_id=principal_id,
               created_at=now, updated_at=now, version=1)
    made = (await session.scalars(pg_insert(Meeting).values([row]).on_conflict_do_nothing(
        index_elements=[Meeting.series_id, Meeting.series_occurrence_date],
        index_where=Meeting.series_id.is_not(None)).returning(Meeting.id))).one_or_none()
    if made is None:
        return None
    await service.add_attendees(session, [made], attendees, now=now, added_by=principal_id)
    await service.store_codes(session, [made], base_url=policy.public_base_url, now=now, actor_id=principal_id)
    await audit.record(session, action=Action.MEETING_CREATED, resource=Resource.MEETING, resource_id=made,
                       meeting_id=made, series_id=series.id, now=now, actor=actor,
                       after={"start_time": fields["start_time"], "end_time": fields["end_time"],
                              "timezone": series.timezone, "required_attendees": len(attendees)})
    return made
