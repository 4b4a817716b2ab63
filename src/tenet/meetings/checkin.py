"""Check-in: signed-in users and guests (the hot path). One unit of work, two statements on the happy path: a
probe (the meeting, the person's live attendance, the device's live attendance) and one write that inserts the
attendance, its ACCEPTED scan and its audit row together (data-modifying CTEs).

The database is the arbiter of every race (MA-INV-06..09):
- one live attendance per person and per device: partial unique indexes; the insert is ON CONFLICT DO NOTHING
  and an empty result re-reads by person (answered) then by device (refused);
- the window and the meeting's status: the insert trigger judges the row's `checked_in_at` (this service's
  clock) against the meeting as committed, under a shared advisory lock that cancel / delete / reschedule take
  exclusively; lateness is set by the same trigger.
Refusals write a REFUSED scan with their code and raise an error whose unit of work commits the scan alone
(MA-INV-11): the write runs behind a savepoint the trigger's refusal takes back (tenet.kernel.refusals), so the
service never ends the transaction itself.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tenet.kernel import ratelimit, refusals
from tenet.kernel.context import current_request_id
from tenet.kernel.emails import InvalidEmail, clean_email, normalize_email
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.statements import Row, Unit, statements
from tenet.meetings import errors, times
from tenet.meetings.codes import CheckInCodes
from tenet.meetings.models import CHECKIN_MEETING_ACTIVE, CHECKIN_WINDOW

LIVE = ("PRESENT", "LATE")


@dataclass(frozen=True)
class CheckInOutcome:
    attendance_id: uuid.UUID
    meeting_id: str
    status: str
    checked_in_at: datetime | None
    mode: str | None
    already_checked_in: bool
    timezone: str
    start_time: datetime
    late_grace_minutes: int

    def answer(self) -> dict[str, Any]:
        late_by = None
        if self.status == "LATE" and self.checked_in_at is not None:
            late_by = int((self.checked_in_at - self.start_time).total_seconds())
        return {"attendance_id": self.attendance_id, "meeting_id": self.meeting_id, "status": self.status,
                "checked_in_at": self.checked_in_at,
                "checked_in_at_local": times.local(self.checked_in_at, self.timezone) if self.checked_in_at else None,
                "mode": self.mode, "already_checked_in": self.already_checked_in, "late_by_seconds": late_by}


@dataclass(frozen=True)
class Guest:
    """A guest's form, cleaned (NFC, trimmed, whitespace collapsed), and the identity key it is known by (D-17)."""

    name: str
    email: str | None
    phone: str | None
    organization: str | None

    @classmethod
    def clean(cls, *, name: str, email: str | None, phone: str | None, organization: str | None) -> Guest:
        cleaned = " ".join(unicodedata.normalize("NFC", name).split())
        if not cleaned:
            raise errors.GuestNameRequired()
        typed_email = None
        if email:
            try:
                typed_email = clean_email(email)
            except InvalidEmail:
                raise ValidationFailed("email: not a valid address",
                                       errors=[{"loc": ["body", "email"], "msg": "not a valid address",
                                                "type": "value_error"}]) from None
        org = " ".join(unicodedata.normalize("NFC", organization).split()) if organization else None
        return cls(cleaned, typed_email, phone.strip() or None if phone else None, org or None)

    def key(self) -> str:
        """The email (email-v1) when given; else the phone's digits; else the name (case-folded) with the
        organisation. Two namesakes without email or phone collide: the form asks for one (D-17)."""
        if self.email:
            return "email:" + normalize_email(self.email)
        digits = re.sub(r"[^0-9+]", "", self.phone or "")
        if len(digits.lstrip("+")) >= 5:
            return "phone:" + digits
        return "name:" + unicodedata.normalize("NFKC", self.name).casefold() + "|" + (
            unicodedata.normalize("NFKC", self.organization).casefold() if self.organization else "")

    def digest(self, meeting_id: str) -> str:
        """Per meeting, so digests cannot link one person's visits across meetings."""
        return "sha256:" + hashlib.sha256(f"{meeting_id}:{self.key()}".encode()).hexdigest()


_MEETING_COLUMNS = """m.status, m.start_time, m.end_time, m.timezone, m.late_grace_minutes,
       m.checkin_opens_minutes_before, m.checkin_closes_at, m.rotating_online_code, m.offline_checkin_enabled"""

USER_PROBE = f"""
    SELECT {_MEETING_COLUMNS},
           mine.id AS mine_id, mine.status AS mine_status, mine.checked_in_at AS mine_at, mine.mode AS mine_mode,
           dev.id AS device_attendance_id
      FROM meeting_attendance.meetings m
      LEFT JOIN meeting_attendance.attendances mine
             ON mine.meeting_id = m.id AND mine.user_id = %(user_id)s AND mine.status <> 'VOIDED'
      LEFT JOIN meeting_attendance.attendances dev
             ON dev.meeting_id = m.id AND dev.device_id = %(device_id)s AND dev.status <> 'VOIDED'
     WHERE m.id = %(meeting_id)s AND m.status <> 'DELETED'
"""  # noqa: S608  (constants of this module)

GUEST_PROBE = f"""
    SELECT {_MEETING_COLUMNS},
           g.id AS guest_id, mine.id AS mine_id, mine.status AS mine_status, mine.checked_in_at AS mine_at,
           mine.mode AS mine_mode, dev.id AS device_attendance_id
      FROM meeting_attendance.meetings m
      LEFT JOIN meeting_attendance.guests g ON g.meeting_id = m.id AND g.identity_digest = %(digest)s
      LEFT JOIN meeting_attendance.attendances mine ON mine.guest_id = g.id AND mine.status <> 'VOIDED'
      LEFT JOIN meeting_attendance.attendances dev
             ON dev.meeting_id = m.id AND dev.device_id = %(device_id)s AND dev.status <> 'VOIDED'
     WHERE m.id = %(meeting_id)s AND m.status <> 'DELETED'
"""  # noqa: S608  (constants of this module)

# The attendance, its ACCEPTED scan and its audit row in one statement: either all three exist or none.
# The audit row carries constant keys only (MA-INV-20).
_SCAN_AND_AUDIT = """
    s AS (
        INSERT INTO meeting_attendance.checkin_scans
               (meeting_id, occurred_at, channel, mode, user_id, guest_id, attendance_id, device_id, client_address,
                outcome, code_step)
        SELECT %(meeting_id)s, %(now)s, %(channel)s, %(mode)s, a.user_id, a.guest_id, a.id, %(device_id)s,
               CAST(%(client_address)s AS inet), 'ACCEPTED', %(code_step)s FROM a),
    l AS (
        INSERT INTO meeting_attendance.audit_logs
               (occurred_at, action, resource, resource_id, meeting_id, actor_type, actor_id, request_id, changes)
        SELECT %(now)s, %(action)s, 'ATTENDANCE', a.id::text, %(meeting_id)s, %(actor_type)s,
               coalesce(a.user_id, a.guest_id)::text, %(request_id)s,
               jsonb_build_object('entityId', a.id, 'entityType', 'ATTENDANCE', 'before', NULL,
                                  'after', jsonb_build_object('status', a.status, 'mode', %(mode)s)) FROM a)
"""

USER_INSERT = f"""
    WITH a AS (
        INSERT INTO meeting_attendance.attendances
               (id, meeting_id, subject_type, user_id, status, status_source, mode, device_id, checked_in_at,
                created_at, updated_at, version)
        VALUES (%(attendance_id)s, %(meeting_id)s, 'USER', %(user_id)s, 'PRESENT', 'CHECK_IN', %(mode)s,
                %(device_id)s, %(now)s, %(now)s, %(now)s, 1)
        ON CONFLICT DO NOTHING
        RETURNING id, status, checked_in_at, user_id, guest_id),
    {_SCAN_AND_AUDIT}
    SELECT id, status, checked_in_at FROM a
"""  # noqa: S608  (constants of this module)

# Check-in over an EXCUSED row turns it into PRESENT / LATE by check-in (D-10); the trigger judges the window.
USER_OVER_EXCUSE = f"""
    WITH a AS (
        UPDATE meeting_attendance.attendances
           SET status = 'PRESENT', status_source = 'CHECK_IN', mode = %(mode)s, device_id = %(device_id)s,
               checked_in_at = %(now)s, updated_at = %(now)s, version = version + 1
         WHERE id = %(attendance_id)s AND status = 'EXCUSED'
        RETURNING id, status, checked_in_at, user_id, guest_id),
    {_SCAN_AND_AUDIT}
    SELECT id, status, checked_in_at FROM a
"""  # noqa: S608  (constants of this module)

# A new guest row and its attendance together: a guest row never exists without the attendance it was
# collected for (MA-INV-13; the deferred trigger guests_have_attendance refuses the commit otherwise).
GUEST_INSERT = f"""
    WITH g AS (
        INSERT INTO meeting_attendance.guests
               (id, meeting_id, name, email, phone, organization, identity_digest, created_at)
        SELECT %(guest_id)s, %(meeting_id)s, %(name)s, %(email)s, %(phone)s, %(organization)s, %(digest)s, %(now)s
         WHERE CAST(%(existing_guest_id)s AS uuid) IS NULL
        ON CONFLICT DO NOTHING
        RETURNING id),
    gid AS (SELECT id FROM g UNION ALL
             SELECT CAST(%(existing_guest_id)s AS uuid) WHERE CAST(%(existing_guest_id)s AS uuid) IS NOT NULL),
    a AS (
        INSERT INTO meeting_attendance.attendances
               (id, meeting_id, subject_type, guest_id, status, status_source, mode, device_id, checked_in_at,
                created_at, updated_at, version)
        SELECT %(attendance_id)s, %(meeting_id)s, 'GUEST', gid.id, 'PRESENT', 'CHECK_IN', %(mode)s, %(device_id)s,
               %(now)s, %(now)s, %(now)s, 1 FROM gid
        ON CONFLICT DO NOTHING
        RETURNING id, status, checked_in_at, user_id, guest_id),
    {_SCAN_AND_AUDIT}
    SELECT (SELECT count(*) FROM g) AS guests_inserted, a.id, a.status, a.checked_in_at
      FROM (SELECT 1) one LEFT JOIN a ON TRUE
"""  # noqa: S608  (constants of this module)

SCAN = """
    INSERT INTO meeting_attendance.checkin_scans
           (meeting_id, occurred_at, channel, mode, user_id, guest_id, attendance_id, device_id, client_address,
            outcome, reason, code_step)
    VALUES (%(meeting_id)s, %(now)s, %(channel)s, %(mode)s, %(user_id)s, %(guest_id)s, %(attendance_id)s,
            %(device_id)s, CAST(%(client_address)s AS inet), %(outcome)s, %(reason)s, %(code_step)s)
"""

_BY_PERSON = {
    "USER": "SELECT id, status, checked_in_at, mode FROM meeting_attendance.attendances "
            "WHERE meeting_id = %(meeting_id)s AND user_id = %(user_id)s AND status <> 'VOIDED'",
    "GUEST": "SELECT a.id, a.status, a.checked_in_at, a.mode, g.id AS guest_id "
             "FROM meeting_attendance.guests g JOIN meeting_attendance.attendances a "
             "ON a.guest_id = g.id AND a.status <> 'VOIDED' "
             "WHERE g.meeting_id = %(meeting_id)s AND g.identity_digest = %(digest)s",
}
# The insert trigger's refusals: a cancel or a reschedule committed between the probe and the write.
_TRIGGER_REFUSALS = frozenset({CHECKIN_MEETING_ACTIVE, CHECKIN_WINDOW})


@dataclass
class _Request:
    meeting_id: str
    channel: str  # USER | GUEST
    mode: str
    device_id: str
    code: str | None
    now: datetime
    client_address: str | None
    user_id: uuid.UUID | None = None
    guest: Guest | None = None
    digest: str | None = None
    guest_id: uuid.UUID | None = None
    code_step: int | None = None

    def scan(self, outcome: str, *, attendance_id: uuid.UUID | None = None, reason: str | None = None,
             guest_id: uuid.UUID | None = None) -> dict[str, Any]:
        return {"meeting_id": self.meeting_id, "now": self.now, "channel": self.channel, "mode": self.mode,
                "user_id": self.user_id, "guest_id": guest_id or self.guest_id, "attendance_id": attendance_id,
                "device_id": self.device_id, "client_address": self.client_address, "outcome": outcome,
                "reason": reason, "code_step": self.code_step if outcome == "ACCEPTED" else None}

    def probe(self) -> tuple[str, dict[str, Any]]:
        params = {"meeting_id": self.meeting_id, "user_id": self.user_id, "digest": self.digest,
                  "device_id": self.device_id}
        return (USER_PROBE if self.channel == "USER" else GUEST_PROBE), params


_MEETING_EXISTS = ("EXISTS (SELECT 1 FROM meeting_attendance.meetings WHERE id = %(meeting_id)s "
                   "AND status <> 'DELETED')")


def meeting_exists(meeting_id: str) -> ratelimit.Condition:
    """The condition the guest limiter counts under: the meeting exists (not DELETED)."""
    return ratelimit.Condition(_MEETING_EXISTS, {"meeting_id": meeting_id})


async def _refuse(session: Unit, request: _Request, error: DomainError) -> DomainError:
    """The error to raise, with its REFUSED scan written: the scan commits, the error travels on (MA-INV-11)."""
    return await refusals.refuse(session, error, record=(SCAN, request.scan("REFUSED", reason=str(error.code))))


def _outcome(request: _Request, meeting: Row, row: Row, *, already: bool) -> CheckInOutcome:
    return CheckInOutcome(attendance_id=row["id"], meeting_id=request.meeting_id, status=row["status"],
                          checked_in_at=row["checked_in_at"], mode=row["mode"] if already else request.mode,
                          already_checked_in=already, timezone=meeting["timezone"],
                          start_time=meeting["start_time"], late_grace_minutes=meeting["late_grace_minutes"])


def _judge(meeting: Row, request: _Request, codes: CheckInCodes) -> DomainError | None:
    """Why the meeting refuses this check-in now, if it does (the friendly first answer; the trigger decides
    races)."""
    if meeting["status"] == "CANCELLED":
        return errors.MeetingCancelled(meeting_id=request.meeting_id)
    if request.mode == "offline":
        if not meeting["offline_checkin_enabled"]:
            return errors.CheckInModeDisabled(mode="offline")
        # The mode is the client's word: only the offline code (the printed QR's) proves it, else naming
        # `offline` would skip the rotating online code (issue 24 item 4).
        try:
            codes.verify_offline(request.meeting_id, request.code)
        except DomainError as error:
            return error
    if request.mode == "online" and meeting["rotating_online_code"]:
        try:
            request.code_step = codes.verify(request.meeting_id, request.code, request.now)
        except DomainError as error:
            return error
    opens, closes = times.window(meeting["start_time"], meeting["end_time"], meeting["checkin_opens_minutes_before"],
                                 meeting["checkin_closes_at"])
    if request.now < opens:
        return errors.CheckInWindowNotOpen(opens_at=opens.isoformat())
    if request.now >= closes:
        return errors.CheckInWindowClosed(closed_at=closes.isoformat())
    return None


async def _probed(request: _Request) -> None:
    """Between the probe and the write. The race tests widen this gap (tests/concurrency) to show that the
    database, not the probe, decides: two scans that both saw "no attendance yet" still make one."""


async def _write(session: Unit, request: _Request, meeting: Row) -> refusals.Attempt:
    """The attendance with its ACCEPTED scan and audit row (one statement, behind a savepoint: the trigger may
    refuse it)."""
    params = {"meeting_id": request.meeting_id, "now": request.now, "mode": request.mode,
              "device_id": request.device_id, "client_address": request.client_address,
              "code_step": request.code_step, "request_id": current_request_id(), "attendance_id": uuid.uuid4(),
              "channel": request.channel}
    if request.channel == "USER" and meeting["mine_id"] is not None:  # EXCUSED, now present (D-10)
        sql, params = USER_OVER_EXCUSE, {**params, "attendance_id": meeting["mine_id"], "action": "CHECK_IN",
                                         "actor_type": "user"}
    elif request.channel == "USER":
        sql, params = USER_INSERT, {**params, "user_id": request.user_id, "action": "CHECK_IN", "actor_type": "user"}
    else:
        assert request.guest is not None
        guest = request.guest
        sql, params = GUEST_INSERT, {
            **params, "guest_id": uuid.uuid4(), "existing_guest_id": request.guest_id, "name": guest.name,
            "email": guest.email, "phone": guest.phone, "organization": guest.organization, "digest": request.digest,
            "action": "GUEST_CHECK_IN", "actor_type": "guest"}
    return await refusals.attempt(session, sql, params, refused_by=_TRIGGER_REFUSALS)


async def _refused_by_the_trigger(session: Unit, request: _Request, codes: CheckInCodes) -> DomainError:
    """A cancel or reschedule committed between the probe and the write, and the trigger refused it (the attempt
    was taken back): judge the meeting as it is now for the code to answer."""
    current = await (await statements(session)).one(*request.probe())
    if current is None:
        return errors.MeetingNotFound()
    return await _refuse(session, request, _judge(current, request, codes) or errors.MeetingCancelled())


async def _check_in(session: Unit, request: _Request, codes: CheckInCodes) -> CheckInOutcome:
    sql = await statements(session)
    meeting = await sql.one(*request.probe())
    if meeting is None:
        raise errors.MeetingNotFound()
    await _probed(request)
    if request.channel == "GUEST":
        request.guest_id = meeting["guest_id"]
    if meeting["mine_id"] is not None and meeting["mine_status"] in LIVE:
        # Scanning again answers the existing attendance, never a second one (MA-INV-06).
        await sql.execute(SCAN, request.scan("ALREADY_CHECKED_IN", attendance_id=meeting["mine_id"]))
        return CheckInOutcome(meeting["mine_id"], request.meeting_id, meeting["mine_status"], meeting["mine_at"],
                              meeting["mine_mode"], True, meeting["timezone"], meeting["start_time"],
                              meeting["late_grace_minutes"])
    refusal = _judge(meeting, request, codes)
    device = meeting["device_attendance_id"]
    if refusal is None and device is not None and device != meeting["mine_id"]:
        refusal = errors.DeviceAlreadyUsed()
    if refusal is not None:
        raise await _refuse(session, request, refusal)
    written = await _write(session, request, meeting)
    if written.refused is not None:
        raise await _refused_by_the_trigger(session, request, codes)
    if written.row is not None and written.row["id"] is not None:
        return _outcome(request, meeting, written.row, already=False)
    if written.row is not None and written.row.get("guests_inserted"):
        # The attendance lost a race: the guest row written with it must not stay (MA-INV-13).
        await written.undo()
    # Nothing inserted: a concurrent check-in of the same person won (answer it) or the device was taken.
    winner = await sql.one(_BY_PERSON[request.channel], {
        "meeting_id": request.meeting_id, "user_id": request.user_id, "digest": request.digest})
    if winner is not None:
        if request.channel == "GUEST":
            request.guest_id = winner["guest_id"]
        await sql.execute(SCAN, request.scan("ALREADY_CHECKED_IN", attendance_id=winner["id"]))
        return _outcome(request, meeting, winner, already=True)
    raise await _refuse(session, request, errors.DeviceAlreadyUsed())


async def check_in_user(session: Unit, *, meeting_id: str, principal_id: uuid.UUID, mode: str,
                        device_id: str, code: str | None, now: datetime, codes: CheckInCodes) -> CheckInOutcome:
    """A signed-in user checks themself in (any non-deleted meeting whose id they have: the code is the
    capability, D-08; one not on the required list is a walk-in)."""
    request = _Request(meeting_id, "USER", mode, device_id, code, now, None, user_id=principal_id)
    return await _check_in(session, request, codes)


async def check_in_guest(session: Unit, *, meeting_id: str, guest: Guest, mode: str, device_id: str,
                         code: str | None, now: datetime, client_address: str | None,
                         codes: CheckInCodes) -> CheckInOutcome:
    """A guest without an account; their personal data goes to `guests` only (MA-INV-13)."""
    request = _Request(meeting_id, "GUEST", mode, device_id, code, now, client_address, guest=guest,
                       digest=guest.digest(meeting_id))
    return await _check_in(session, request, codes)
