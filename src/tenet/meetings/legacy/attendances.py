"""Legacy attendances -> attendances (and guests, and the correction row of an excuse).

A check-in (PRESENT / LATE with its time) is written as Tenet writes one: status_source CHECK_IN, and the database
decides PRESENT or LATE from the meeting's start and grace (MA-INV-09; a legacy status that disagrees is said in a
note); it must lie in the meeting's check-in window (MA-INV-08) or it is refused. EXCUSED is a manager's change in
Tenet: a MANUAL row with its correction (MA-INV-12), by the meeting's organizer, with the legacy note. ABSENT is not
stored in Tenet (a required attendee without a live attendance is absent) and is skipped. A check-in has its
accepted scan (MA-INV-11). A guest's details live in `guests` only (MA-INV-13), erased at once when the meeting
ended longer ago than the retention period.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError
from tenet.kernel.statements import statements
from tenet.meetings.checkin import Guest as GuestForm
from tenet.meetings.legacy.context import Context
from tenet.meetings.legacy.engine import Mapped, Plan, Refused, Skipped, digest
from tenet.meetings.legacy.source import BadValue, instant, text_or_none
from tenet.meetings.models import DEVICE_ID_PATTERN, Attendance, AttendanceCorrection, CheckinScan, Guest

STATUSES = ("PRESENT", "LATE", "EXCUSED", "ABSENT")
EXCUSE_NOTE = "Excused in the legacy system (imported)"


# The rows of one legacy attendance, sent together (kernel.statements: rows the import never reads back through
# the session; the ORM's flush of three objects per row was half the import's CPU).
GUEST_SQL = """
    INSERT INTO meeting_attendance.guests
           (id, meeting_id, name, email, phone, organization, identity_digest, created_at, erased_at)
    VALUES (%(guest_id)s, %(meeting_id)s, %(name)s, %(email)s, %(phone)s, %(organization)s, %(digest)s, %(now)s,
            %(erased_at)s)"""
ATTENDANCE_SQL = """
    INSERT INTO meeting_attendance.attendances
           (id, meeting_id, subject_type, user_id, guest_id, status, status_source, mode, device_id, checked_in_at,
            created_at, updated_at)
    VALUES (%(attendance_id)s, %(meeting_id)s, %(subject_type)s, %(user_id)s, %(guest_id)s, %(status)s,
            %(status_source)s, %(mode)s, %(device_id)s, %(checked_in_at)s, %(now)s, %(now)s)"""
SCAN_SQL = """
    INSERT INTO meeting_attendance.checkin_scans
           (meeting_id, occurred_at, channel, mode, user_id, guest_id, attendance_id, device_id, outcome)
    VALUES (%(meeting_id)s, %(checked_in_at)s, %(subject_type)s, %(mode)s, %(user_id)s, %(guest_id)s,
            %(attendance_id)s, %(device_id)s, 'ACCEPTED')"""
CORRECTION_SQL = """
    INSERT INTO meeting_attendance.attendance_corrections
           (id, attendance_id, from_status, to_status, note, actor_id, occurred_at)
    VALUES (%(correction_id)s, %(attendance_id)s, NULL, 'EXCUSED', %(note)s, %(actor_id)s, %(at)s)"""


def _device(value: Any) -> str | None:
    device = text_or_none(value)
    return device if device and re.match(DEVICE_ID_PATTERN, device) else None


class Attendances:
    name = "attendances"
    repeatable_writes = True  # what a plan reads (people, devices) is settled when planned, not when written

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.people: dict[tuple[str, str], str] = {}
        self.devices: set[tuple[str, str]] = set()
        self.by_id: dict[str, Any] = {}

    def _guest(self, row: dict[str, Any], meeting_id: str, erase: bool) -> dict[str, Any]:
        try:
            form = GuestForm.clean(name=str(row.get("guestName") or ""), email=text_or_none(row.get("guestEmail")),
                                   phone=text_or_none(row.get("guestPhone")),
                                   organization=text_or_none(row.get("guestOrganization")))
        except DomainError as exc:
            raise Refused(f"a guest without a usable name or email ({exc.detail})") from None
        if erase:
            return {"erased": True}
        return {"name": form.name, "email": form.email, "phone": form.phone, "organization": form.organization,
                "digest": form.digest(meeting_id)}

    def _subject(self, row: dict[str, Any], key: str, meeting: Any) -> tuple[str, dict[str, Any] | None]:
        if text_or_none(row.get("userId")) is not None:
            user = str(self.ctx.user(row["userId"], "user"))
            first = self.people.setdefault((meeting.id, user), key)
            if first != key:
                raise Refused(f"a second attendance of the same person at this meeting (legacy {first} kept)")
            return user, None
        if text_or_none(row.get("guestName")) is None:
            raise Refused("neither a user nor a guest")
        erase = meeting.end < self.ctx.now - timedelta(days=self.ctx.defaults.guest_retention_days)
        guest = self._guest(row, meeting.id, erase)
        if "digest" in guest:
            first = self.people.setdefault((meeting.id, guest["digest"]), key)
            if first != key:
                raise Refused(f"the same guest checked in twice (legacy {first} kept)")
        return "", guest

    def plan(self, row: dict[str, Any], existing: Mapped | None) -> Plan:
        key = str(row["id"])
        meeting = self.ctx.meeting(row["meetingId"])
        status = str(row.get("status") or "").strip().upper()
        if status not in STATUSES:
            raise Refused(f"unknown attendance status {status[:30]!r}")
        if status == "ABSENT":
            raise Skipped("ABSENT is not stored in Tenet: a required attendee without an attendance is absent")
        user, guest = self._subject(row, key, meeting)
        notes: list[str] = []
        values: dict[str, Any] = {"meeting": meeting.id, "user": user or None, "guest": guest}
        if status == "EXCUSED":
            if guest is not None:
                raise Refused("a guest cannot be excused (only users are, MA-INV-10)")
            note = (text_or_none(row.get("note")) or EXCUSE_NOTE)[:1000]
            try:
                at = instant(row.get("updatedAt"), "updatedAt") or self.ctx.now
            except BadValue:
                at = self.ctx.now
            return Plan({**values, "status": "EXCUSED", "note": note, "at": at.isoformat()}, notes)
        return Plan({**values, **self._check_in(row, meeting, status, notes)}, notes)

    def _check_in(self, row: dict[str, Any], meeting: Any, status: str, notes: list[str]) -> dict[str, Any]:
        try:
            at = instant(row.get("checkInTime"), "checkInTime", required=True)
        except BadValue as exc:
            raise Refused(f"a {status} attendance needs its check-in time: {exc}") from None
        assert at is not None
        opens = meeting.start - timedelta(minutes=meeting.opens_minutes)
        if not opens <= at < meeting.end:
            raise Refused(f"checked in at {at.isoformat()}, outside the check-in window "
                          f"[{opens.isoformat()}, {meeting.end.isoformat()}) (MA-INV-08)")
        judged = "LATE" if at > meeting.start + timedelta(minutes=meeting.grace_minutes) else "PRESENT"
        if judged != status:
            notes.append(f"legacy status {status}; Tenet's rule (grace {meeting.grace_minutes} min) says {judged}")
        device = _device(row.get("deviceId"))
        if device is not None and (meeting.id, device) in self.devices:
            notes.append("its device checked in someone else at this meeting already: device left out (MA-INV-07)")
            device = None
        if device is not None:
            self.devices.add((meeting.id, device))
        mode = "online" if str(row.get("checkInMode") or "").strip().upper() == "ONLINE" else "offline"
        return {"status": "CHECK_IN", "at": at.isoformat(), "mode": mode, "device": device}

    async def insert(self, session: AsyncSession, plan: Plan) -> tuple[str, bool]:
        v, now = plan.values, self.ctx.now
        if not self.by_id:
            self.by_id = {f.id: f for f in self.ctx.meetings.values()}
        facts = self.by_id[v["meeting"]]
        if facts.tenet_status != "ACTIVE":
            raise Refused(f"the meeting is {facts.tenet_status} in Tenet: no attendance can be added to it")
        row: dict[str, Any] = {
            "attendance_id": uuid.uuid4(), "meeting_id": v["meeting"], "user_id": uuid.UUID(v["user"]) if v["user"]
            else None, "guest_id": uuid.uuid4() if v["guest"] is not None else None, "now": now}
        row["subject_type"] = "GUEST" if row["guest_id"] else "USER"
        if v["status"] == "EXCUSED":
            row.update(status="EXCUSED", status_source="MANUAL", mode=None, device_id=None, checked_in_at=None,
                       correction_id=uuid.uuid4(), note=v["note"], actor_id=facts.organizer,
                       at=datetime.fromisoformat(v["at"]))
        else:  # the trigger judges PRESENT / LATE (and the window) as for a check-in
            row.update(status="PRESENT", status_source="CHECK_IN", mode=v["mode"], device_id=v["device"],
                       checked_in_at=datetime.fromisoformat(v["at"]))
        handle = await statements(session)
        async with handle.pipeline():  # one round trip; a refusal is raised at the block's end
            if v["guest"] is not None:
                await handle.execute(GUEST_SQL, {**row, **self._guest_columns(v["guest"])})
            await handle.execute(ATTENDANCE_SQL, row)
            # Every check-in has its accepted scan (MA-INV-11); an excuse its correction (MA-INV-12).
            await handle.execute(CORRECTION_SQL if v["status"] == "EXCUSED" else SCAN_SQL, row)
        return str(row["attendance_id"]), True

    def _guest_columns(self, g: dict[str, Any]) -> dict[str, Any]:
        if g.get("erased"):
            return dict.fromkeys(("name", "email", "phone", "organization", "digest")) | {"erased_at": self.ctx.now}
        return {"name": g["name"], "email": g["email"], "phone": g["phone"], "organization": g["organization"],
                "digest": g["digest"], "erased_at": None}

    async def update(self, session: AsyncSession, mapped: Mapped, plan: Plan) -> str:
        await self.remove(session, mapped)
        target, _ = await self.insert(session, plan)
        return target

    async def remove(self, session: AsyncSession, mapped: Mapped) -> None:
        attendance_id = uuid.UUID(mapped.target)
        guest_id = (await session.execute(select(Attendance.guest_id).where(Attendance.id == attendance_id))).scalar()
        await session.execute(delete(AttendanceCorrection).where(AttendanceCorrection.attendance_id == attendance_id))
        await session.execute(delete(CheckinScan).where(CheckinScan.attendance_id == attendance_id))
        await session.execute(delete(Attendance).where(Attendance.id == attendance_id))
        if guest_id is not None:
            await session.execute(delete(Guest).where(Guest.id == guest_id))

    async def fingerprints(self, session: AsyncSession, targets: list[str]) -> dict[str, str]:
        rows = (await session.execute(select(Attendance.id, Attendance.version, Attendance.status).where(
            Attendance.id.in_([uuid.UUID(t) for t in targets])))).all()
        return {str(r.id): digest([r.version, r.status]) for r in rows}

    def remember(self, key: str, target: str, plan: Plan | None) -> None:
        """Nothing later refers to attendances."""
