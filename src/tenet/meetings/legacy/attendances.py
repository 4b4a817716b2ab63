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
from tenet.meetings.checkin import Guest as GuestForm
from tenet.meetings.legacy.context import Context
from tenet.meetings.legacy.engine import Mapped, Plan, Refused, Skipped, digest
from tenet.meetings.legacy.source import BadValue, instant, text_or_none
from tenet.meetings.models import DEVICE_ID_PATTERN, Attendance, AttendanceCorrection, CheckinScan, Guest

STATUSES = ("PRESENT", "LATE", "EXCUSED", "ABSENT")
EXCUSE_NOTE = "Excused in the legacy system (imported)"


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
        guest_id = await self._insert_guest(session, v) if v["guest"] is not None else None
        attendance = Attendance(id=uuid.uuid4(), meeting_id=v["meeting"], subject_type="GUEST" if guest_id else "USER",
                                user_id=uuid.UUID(v["user"]) if v["user"] else None, guest_id=guest_id,
                                created_at=now, updated_at=now)
        if v["status"] == "EXCUSED":
            attendance.status, attendance.status_source = "EXCUSED", "MANUAL"
        else:
            attendance.status, attendance.status_source = "PRESENT", "CHECK_IN"  # the trigger judges PRESENT / LATE
            attendance.checked_in_at, attendance.mode = datetime.fromisoformat(v["at"]), v["mode"]
            attendance.device_id = v["device"]
        session.add(attendance)
        await session.flush()
        if v["status"] != "EXCUSED":  # every check-in has its accepted scan (MA-INV-11)
            session.add(CheckinScan(meeting_id=v["meeting"], occurred_at=attendance.checked_in_at,
                                    channel=attendance.subject_type, mode=attendance.mode, user_id=attendance.user_id,
                                    guest_id=guest_id, attendance_id=attendance.id, device_id=attendance.device_id,
                                    outcome="ACCEPTED"))
            await session.flush()
        if v["status"] == "EXCUSED":
            session.add(AttendanceCorrection(id=uuid.uuid4(), attendance_id=attendance.id, from_status=None,
                                             to_status="EXCUSED", note=v["note"], actor_id=facts.organizer,
                                             occurred_at=datetime.fromisoformat(v["at"])))
            await session.flush()
        return str(attendance.id), True

    async def _insert_guest(self, session: AsyncSession, v: dict[str, Any]) -> uuid.UUID:
        g = v["guest"]
        guest = Guest(id=uuid.uuid4(), meeting_id=v["meeting"], created_at=self.ctx.now)
        if g.get("erased"):
            guest.erased_at = self.ctx.now
        else:
            guest.name, guest.email, guest.phone = g["name"], g["email"], g["phone"]
            guest.organization, guest.identity_digest = g["organization"], g["digest"]
        session.add(guest)
        await session.flush()
        return guest.id

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
