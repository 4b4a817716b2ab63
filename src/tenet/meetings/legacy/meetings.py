"""Legacy series and meetings -> meeting_series and meetings.

Meeting ids are kept when they fit MA-INV-01 (Prisma's cuid ids do); any other id gets a new Tenet id, kept in
legacy_import_rows. Times are checked as Tenet checks them (MA-INV-02): a meeting that ends before it starts, lasts
over 7 days, has no readable time or a zone that is no IANA name is refused. A meeting whose series is unknown or
refused, or whose occurrence date its series already has, is imported on its own, said so in a note. Meetings are
written ACTIVE and cancelled or deleted after their attendances (`settle_statuses`): a check-in is only ever
recorded for an active meeting (MA-INV-08), and the history came first.
"""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.errors import DomainError
from tenet.meetings import times
from tenet.meetings.legacy.context import Context, MeetingFacts
from tenet.meetings.legacy.engine import Mapped, Plan, Refused, digest, problem
from tenet.meetings.legacy.report import TableReport
from tenet.meetings.legacy.source import BadValue, instant, text_or_none, whole_number
from tenet.meetings.models import MEETING_ID_PATTERN, Meeting, MeetingQrCode, MeetingRequiredAttendee, MeetingSeries
from tenet.meetings.service import new_meeting_id

RRULE = re.compile(r"^FREQ=(DAILY|WEEKLY|MONTHLY|YEARLY)(;[A-Z]+=[A-Za-z0-9,:+-]+)*\Z")
LIMITS = {"description": 10000, "location": 500, "city": 100}


def zone_of(value: Any, fallback: str) -> str:
    name = text_or_none(value) or fallback
    try:
        times.zone(name)
    except DomainError:
        raise Refused(f"timezone {name[:40]!r} is not an IANA zone name (MA-INV-02)") from None
    return name


def descriptive(row: dict[str, Any]) -> dict[str, Any]:
    title = text_or_none(row["title"])
    if title is None or len(title) > 200:
        raise Refused("the title is empty or longer than 200 characters")
    found: dict[str, Any] = {"title": title}
    for column, limit in LIMITS.items():
        value = text_or_none(row.get(column))
        if value is not None and len(value) > limit:
            raise Refused(f"{column} is longer than {limit} characters")
        found[column] = value
    return found


def grace(row: dict[str, Any], default: int) -> int:
    minutes = whole_number(row.get("lateGraceMinutes"), "lateGraceMinutes", default)
    if not 0 <= minutes <= 240:
        raise Refused(f"lateGraceMinutes {minutes} is outside 0..240")
    return minutes


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


class Series:
    name = "meeting_series"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        try:
            start = instant(row["startTime"], "startTime", required=True)
            end = instant(row["endTime"], "endTime", required=True)
            deleted_at = instant(row.get("deletedAt"), "deletedAt")
        except BadValue as exc:
            raise Refused(str(exc)) from None
        assert start is not None and end is not None
        rule = str(row["recurrenceRule"] or "").strip().upper().removeprefix("RRULE:")
        if not RRULE.match(rule) or re.search(r"(^|;)BY(HOUR|MINUTE|SECOND)=", rule):
            raise Refused(f"recurrence rule {rule[:60]!r} is not one Tenet supports")
        if not re.search(r"(^|;)(COUNT|UNTIL)=", rule):
            raise Refused(f"recurrence rule {rule[:60]!r} is unbounded (no COUNT or UNTIL, MA-INV-18)")
        count = re.search(r"(^|;)COUNT=(\d+)", rule)
        if count and int(count.group(2)) > self.ctx.defaults.series_max_occurrences:
            raise Refused(f"COUNT={count.group(2)} exceeds {self.ctx.defaults.series_max_occurrences} occurrences")
        minutes = int((end - start).total_seconds() // 60)
        if not 1 <= minutes <= 10080:
            raise Refused("an occurrence must last 1 minute to 7 days")
        zone = zone_of(row.get("timezone"), self.ctx.defaults.default_timezone)
        organizer = self.ctx.user(row.get("organizerId") or row.get("createdById"), "organizer")
        local = start.astimezone(times.zone(zone))
        return Plan({**descriptive(row), "timezone": zone, "rrule": rule, "start_date": local.date().isoformat(),
                     "start_local_time": local.time().replace(tzinfo=None).isoformat(), "duration_minutes": minutes,
                     "organizer_id": str(organizer),
                     "created_by_id": str(self.ctx.optional_user(row.get("createdById")) or organizer),
                     "late_grace_minutes": grace(row, self.ctx.defaults.late_grace_minutes),
                     "checkin_opens_minutes_before": self.ctx.defaults.checkin_opens_minutes,
                     "deleted_at": _iso(deleted_at)})

    def _columns(self, plan: Plan) -> dict[str, Any]:
        v = dict(plan.values)
        deleted_at = datetime.fromisoformat(v.pop("deleted_at")) if v["deleted_at"] else None
        return {**v, "start_date": date.fromisoformat(v["start_date"]),
                "start_local_time": datetime.fromisoformat("2000-01-01T" + v["start_local_time"]).time(),
                "organizer_id": uuid.UUID(v["organizer_id"]), "created_by_id": uuid.UUID(v["created_by_id"]),
                "status": "DELETED" if deleted_at else "ACTIVE", "deleted_at": deleted_at, "updated_at": self.ctx.now}

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        series = MeetingSeries(id=uuid.uuid4(), created_at=self.ctx.now, **self._columns(plan))
        session.add(series)
        await session.flush()
        return str(series.id), True

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        await session.execute(update(MeetingSeries).where(MeetingSeries.id == uuid.UUID(mapped.target)).values(
            version=MeetingSeries.version + 1, **self._columns(plan)))
        return mapped.target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        await session.execute(delete(MeetingSeries).where(MeetingSeries.id == uuid.UUID(mapped.target)))

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        rows = (await session.execute(select(MeetingSeries.id, MeetingSeries.version, MeetingSeries.status).where(
            MeetingSeries.id.in_([uuid.UUID(t) for t in targets])))).all()
        return {str(r.id): digest([r.version, r.status]) for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        if plan is not None:
            self.ctx.series[key] = (uuid.UUID(target), plan.values["timezone"])


class Meetings:
    name = "meetings"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.occurrences: dict[tuple[uuid.UUID, str], str] = {}

    def _times(self, row: dict[str, Any]) -> tuple[datetime, datetime, dict[str, datetime | None]]:
        try:
            start = instant(row["startTime"], "startTime", required=True)
            end = instant(row["endTime"], "endTime", required=True)
            extra = {c: instant(row.get(c), c) for c in ("cancelledAt", "deletedAt", "updatedAt", "createdAt")}
        except BadValue as exc:
            raise Refused(str(exc)) from None
        assert start is not None and end is not None
        try:
            times.check_times(start, end, self.ctx.defaults.checkin_opens_minutes, None)
        except DomainError as exc:
            raise Refused(f"{exc.detail} (MA-INV-02)") from None
        return start, end, extra

    def _series(self, row: dict[str, Any], key: str, start: datetime, zone: str, notes: list[str]) -> tuple[Any, str]:
        legacy = text_or_none(row.get("seriesId"))
        if legacy is None:
            return None, zone
        if legacy not in self.ctx.series:
            why = "was refused" if legacy in self.ctx.refused.get("meeting_series", set()) else "is not in the file"
            notes.append(f"its series {legacy} {why}: imported as a meeting on its own")
            return None, zone
        series_id, series_zone = self.ctx.series[legacy]
        if series_zone != zone:
            notes.append(f"timezone {zone} differs from its series': {series_zone} kept (MA-INV-16)")
        day = start.astimezone(times.zone(series_zone)).date().isoformat()
        taken = self.occurrences.setdefault((series_id, day), key)
        if taken != key:
            notes.append(f"its series already has meeting {taken} on {day}: imported as a meeting on its own")
            return None, zone
        return (str(series_id), day), series_zone

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        key = str(row["id"])
        start, end, extra = self._times(row)
        notes: list[str] = []
        zone = zone_of(row.get("timezone"), self.ctx.defaults.default_timezone)
        organizer = self.ctx.user(row.get("organizerId") or row.get("createdById"), "organizer")
        fields, minutes = descriptive(row), grace(row, self.ctx.defaults.late_grace_minutes)
        series, zone = self._series(row, key, start, zone, notes)  # last: a refused row takes no occurrence date
        link = text_or_none(row.get("onlineLink"))
        if link is not None and (not re.match(r"^https?://", link) or len(link) > 2000):
            notes.append("onlineLink is not an http(s) address: left out")
            link = None
        cancelled = str(row.get("status") or "").strip().upper() == "CANCELLED"
        reason = (text_or_none(row.get("cancelReason")) or "")[:500] or None
        target = key if re.match(MEETING_ID_PATTERN, key) else (existing.target if existing else new_meeting_id())
        if target != key:
            notes.append(f"id {key[:40]!r} does not fit MA-INV-01: imported as {target}")
        return Plan({**fields, "online_link": link, "start_time": start.isoformat(),
                     "end_time": end.isoformat(), "timezone": zone, "organizer_id": str(organizer),
                     "created_by_id": str(self.ctx.optional_user(row.get("createdById")) or organizer),
                     "late_grace_minutes": minutes,
                     "checkin_opens_minutes_before": self.ctx.defaults.checkin_opens_minutes,
                     "series": series, "cancelled": cancelled, "cancel_reason": reason,
                     "cancelled_at": _iso(extra["cancelledAt"] or extra["updatedAt"] or self.ctx.now) if cancelled
                     else None, "deleted_at": _iso(extra["deletedAt"])}, notes, target=target)

    def _columns(self, plan: Plan) -> dict[str, Any]:
        v = plan.values
        series_id, day = v["series"] or (None, None)
        return {"title": v["title"], "description": v["description"], "location": v["location"], "city": v["city"],
                "online_link": v["online_link"], "start_time": datetime.fromisoformat(v["start_time"]),
                "end_time": datetime.fromisoformat(v["end_time"]), "timezone": v["timezone"],
                "organizer_id": uuid.UUID(v["organizer_id"]), "late_grace_minutes": v["late_grace_minutes"],
                "checkin_opens_minutes_before": v["checkin_opens_minutes_before"],
                "series_id": uuid.UUID(series_id) if series_id else None,
                "series_occurrence_date": date.fromisoformat(day) if day else None, "updated_at": self.ctx.now}

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        assert plan.target is not None
        session.add(Meeting(id=plan.target, status="ACTIVE", schedule_changed_at=self.ctx.now,
                            created_by_id=uuid.UUID(plan.values["created_by_id"]), created_at=self.ctx.now,
                            **self._columns(plan)))
        await session.flush()
        return plan.target, True

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        await session.execute(update(Meeting).where(Meeting.id == mapped.target).values(
            version=Meeting.version + 1, **self._columns(plan)))
        return mapped.target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        await session.execute(delete(MeetingQrCode).where(MeetingQrCode.meeting_id == mapped.target))
        await session.execute(delete(MeetingRequiredAttendee).where(
            MeetingRequiredAttendee.meeting_id == mapped.target))
        await session.execute(delete(Meeting).where(Meeting.id == mapped.target))

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        rows = (await session.execute(select(Meeting.id, Meeting.version, Meeting.status).where(
            Meeting.id.in_(targets)))).all()
        return {r.id: digest([r.version, r.status]) for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        if plan is None:
            return
        v = plan.values
        wanted = "DELETED" if v["deleted_at"] else "CANCELLED" if v["cancelled"] else "ACTIVE"
        self.ctx.meetings[key] = MeetingFacts(
            id=target, start=datetime.fromisoformat(v["start_time"]), end=datetime.fromisoformat(v["end_time"]),
            opens_minutes=v["checkin_opens_minutes_before"], grace_minutes=v["late_grace_minutes"],
            organizer=uuid.UUID(v["organizer_id"]), tenet_status="ACTIVE", wanted_status=wanted,
            cancelled_at=datetime.fromisoformat(v["cancelled_at"]) if v["cancelled_at"] else None,
            cancel_reason=v["cancel_reason"], deleted_at=datetime.fromisoformat(v["deleted_at"]) if v["deleted_at"]
            else None)


async def read_statuses(db: Database, ctx: Context) -> None:
    """Each mapped meeting's status in Tenet now (a rerun finds some cancelled or deleted already)."""
    ids = [facts.id for facts in ctx.meetings.values()]
    async with db.read_only() as session:
        found = dict((await session.execute(select(Meeting.id, Meeting.status).where(Meeting.id.in_(ids)))).all())
    for facts in ctx.meetings.values():
        facts.tenet_status = found.get(facts.id, "ACTIVE")


async def settle_statuses(db: Database, ctx: Context, report: TableReport, touched: set[str],
                          conflicted: set[str]) -> None:
    """After the attendances: cancel and delete the meetings the legacy file has cancelled or deleted. Leaving
    CANCELLED or DELETED is refused by Tenet (MA-INV-03): such a meeting is a conflict, kept."""
    for key, facts in sorted(ctx.meetings.items()):
        if facts.wanted_status == facts.tenet_status or key in conflicted:
            continue
        if facts.tenet_status == "DELETED" or (facts.tenet_status == "CANCELLED" and facts.wanted_status == "ACTIVE"):
            report.conflicts.append((key, f"{facts.tenet_status} in Tenet, {facts.wanted_status} in the file: a "
                                          "meeting never leaves CANCELLED or DELETED (MA-INV-03); kept"))
            continue
        values: dict[str, Any] = {"status": facts.wanted_status, "updated_at": ctx.now}
        if facts.wanted_status == "CANCELLED":
            values.update(cancelled_at=facts.cancelled_at, cancelled_by_id=facts.organizer,
                          cancel_reason=facts.cancel_reason)
        else:
            values.update(deleted_at=facts.deleted_at or ctx.now)
        try:
            async with db.unit_of_work() as session:
                await session.execute(update(Meeting).where(Meeting.id == facts.id).values(values))
        except DBAPIError as exc:
            report.conflicts.append((key, "its status could not be set: " + problem(exc)))
            continue
        facts.tenet_status = facts.wanted_status
        touched.add(key)
