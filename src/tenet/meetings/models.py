"""Tables of meeting attendance (schema `meeting_attendance`), derived from the rules MA-INV-01..20
(invariants.py). Table names are the spec's (§数据迁移与同步: meeting_series, meetings,
meeting_required_attendees, attendances, templates, template_attendees, audit_logs); the tables it does not
name (guests, checkin_scans, attendance_corrections, meeting_qr_codes, series_required_attendees) follow
the same style.

Nothing a person did is physically deleted: meetings, series and templates end in DELETED, attendances in
VOIDED, so audit rows, reports and foreign keys keep pointing at real rows. Every unique rule over live rows
is a partial unique index. Guests' personal data lives in `guests` only and is erased in place (MA-INV-13).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, time

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    Time,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, INET, JSONB
from sqlalchemy.orm import Mapped, mapped_column

import tenet.iam.models  # noqa: F401  (iam.user_account must be on the metadata for the foreign keys)
from tenet.db.base import Base

SCHEMA = "meeting_attendance"
USER_FK = "iam.user_account.id"

# Names the invariant catalog, the error mapping and the bypass tests refer to.
ATTENDANCE_USER_LIVE_INDEX = "uq_attendances_meeting_user_live"
ATTENDANCE_GUEST_LIVE_INDEX = "uq_attendances_guest_live"
ATTENDANCE_DEVICE_LIVE_INDEX = "uq_attendances_meeting_device_live"
GUEST_IDENTITY_INDEX = "uq_guests_meeting_identity"
SERIES_OCCURRENCE_INDEX = "uq_meetings_series_occurrence"
MEETING_TERMINAL_TRIGGER = "meetings_terminal_is_final"
MEETING_SCHEDULE_LOCK_TRIGGER = "meetings_schedule_lock"
MEETING_SCHEDULE_PROPAGATE_TRIGGER = "meetings_schedule_propagate"
CHECKIN_ALLOWED_TRIGGER = "attendances_checkin_allowed"
ATTENDANCE_VOIDED_TRIGGER = "attendances_voided_is_final"
GUEST_HAS_ATTENDANCE_TRIGGER = "guests_have_attendance"
AUDIT_APPEND_ONLY_TRIGGER = "audit_logs_append_only"
AUDIT_NO_TRUNCATE_TRIGGER = "audit_logs_no_truncate"
SERIES_TERMINAL_TRIGGER = "meeting_series_terminal_is_final"
TEMPLATE_TERMINAL_TRIGGER = "templates_terminal_is_final"
# The check_violation constraint names the check-in trigger raises (mapped to the same codes as the app).
CHECKIN_MEETING_ACTIVE = "attendances_meeting_active"
CHECKIN_WINDOW = "attendances_checkin_window"

MEETING_ID_PATTERN = "^[0-9A-Za-z]{16,32}$"
DEVICE_ID_PATTERN = "^[A-Za-z0-9_-]{8,64}$"
TIMEZONE_SHAPE = "^[A-Za-z]+(/[A-Za-z0-9_+-]+)*$"
ONLINE_LINK_SCHEME = "^https?://"


def _time_checks() -> tuple[CheckConstraint, ...]:
    """The ranges a meeting, a series and a template share (MA-INV-02)."""
    return (
        CheckConstraint("late_grace_minutes BETWEEN 0 AND 240", name="late_grace_range"),
        CheckConstraint("checkin_opens_minutes_before BETWEEN 0 AND 1440", name="checkin_opens_range"),
        CheckConstraint("length(btrim(title)) BETWEEN 1 AND 200", name="title_length"),
        CheckConstraint("description IS NULL OR length(description) <= 10000", name="description_length"),
        CheckConstraint("location IS NULL OR length(location) <= 500", name="location_length"),
        CheckConstraint("city IS NULL OR length(city) <= 100", name="city_length"),
        CheckConstraint(f"online_link IS NULL OR (online_link ~ '{ONLINE_LINK_SCHEME}' AND "
                        "length(online_link) <= 2000)", name="online_link_scheme"),
        CheckConstraint("version > 0", name="version_positive"),
    )


class Meeting(Base):
    """A meeting. Stored status ACTIVE / CANCELLED / DELETED; SCHEDULED / IN_PROGRESS / COMPLETED are derived
    from the clock on every read (MA-INV-03). Start and end are instants, `timezone` the business zone."""

    __tablename__ = "meetings"
    __table_args__ = (
        CheckConstraint(f"id ~ '{MEETING_ID_PATTERN}'", name="id_format"),
        CheckConstraint("end_time > start_time", name="time_order"),
        CheckConstraint("end_time - start_time <= interval '7 days'", name="duration"),
        CheckConstraint(f"timezone ~ '{TIMEZONE_SHAPE}'", name="timezone_shape"),
        CheckConstraint("checkin_closes_at IS NULL OR checkin_closes_at > "
                        "start_time - make_interval(mins => checkin_opens_minutes_before)",
                        name="checkin_window_order"),
        CheckConstraint("status IN ('ACTIVE', 'CANCELLED', 'DELETED')", name="status"),
        CheckConstraint("(status <> 'ACTIVE' OR cancelled_at IS NULL) AND "
                        "(status <> 'CANCELLED' OR (cancelled_at IS NOT NULL AND cancelled_by_id IS NOT NULL))",
                        name="cancelled_has_time"),
        CheckConstraint("(status = 'DELETED') = (deleted_at IS NOT NULL)", name="deleted_has_time"),
        CheckConstraint("cancel_reason IS NULL OR length(cancel_reason) <= 500", name="cancel_reason_length"),
        CheckConstraint("(series_id IS NULL) = (series_occurrence_date IS NULL)", name="series_occurrence"),
        CheckConstraint("NOT is_exception OR series_id IS NOT NULL", name="exception_in_series"),
        *_time_checks(),
        Index(SERIES_OCCURRENCE_INDEX, "series_id", "series_occurrence_date", unique=True,
              postgresql_where=text("series_id IS NOT NULL")),
        # Managers' window list and the report ranges (keyset on (start_time, id)).
        Index("ix_meetings_start_time_live", "start_time", "id", postgresql_where=text("status <> 'DELETED'")),
        # The "mine" list arms and the Leader report scope.
        Index("ix_meetings_organizer_start", "organizer_id", "start_time", "id",
              postgresql_where=text("status <> 'DELETED'")),
        Index("ix_meetings_created_by_start", "created_by_id", "start_time", "id",
              postgresql_where=text("status <> 'DELETED'")),
        Index("ix_meetings_series_start", "series_id", "start_time", postgresql_where=text("series_id IS NOT NULL")),
        # The guest-data retention job (meetings ended before the cutoff).
        Index("ix_meetings_end_time", "end_time"),
        {"schema": SCHEMA},
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    online_link: Mapped[str | None] = mapped_column(Text)
    city: Mapped[str | None] = mapped_column(Text)
    start_time: Mapped[datetime]
    end_time: Mapped[datetime]
    timezone: Mapped[str] = mapped_column(Text)
    organizer_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    late_grace_minutes: Mapped[int] = mapped_column(Integer)
    checkin_opens_minutes_before: Mapped[int] = mapped_column(Integer)
    checkin_closes_at: Mapped[datetime | None]
    rotating_online_code: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    offline_checkin_enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    series_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.meeting_series.id"))
    series_occurrence_date: Mapped[date | None] = mapped_column(Date)
    is_exception: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    template_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.templates.id"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'ACTIVE'"))
    cancelled_at: Mapped[datetime | None]
    cancelled_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    cancel_reason: Mapped[str | None] = mapped_column(Text)
    # Set at creation and on every change of start, end, window or grace (MA-INV-08's detector).
    schedule_changed_at: Mapped[datetime]
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class MeetingRequiredAttendee(Base):
    """A required attendee: system users only (spec: meeting_required_attendees.user_id 必填), once each."""

    __tablename__ = "meeting_required_attendees"
    __table_args__ = (
        # "My meetings" and the account-deletion handler read by user.
        Index("ix_meeting_required_attendees_user_id", "user_id", "meeting_id"),
        {"schema": SCHEMA},
    )

    meeting_id: Mapped[str] = mapped_column(ForeignKey("meeting_attendance.meetings.id"), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK), primary_key=True)
    added_at: Mapped[datetime]
    # NULL when copied by series generation or a template.
    added_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))


class Guest(Base):
    """The one place a guest's personal data lives (MA-INV-13): attendances, scans and audit rows refer to
    the row by id. Erased in place by the retention job (the id stays, so counts keep pointing at it)."""

    __tablename__ = "guests"
    __table_args__ = (
        CheckConstraint("(erased_at IS NULL) = (name IS NOT NULL AND identity_digest IS NOT NULL) AND "
                        "(erased_at IS NULL OR (email IS NULL AND phone IS NULL AND organization IS NULL))",
                        name="erased_consistent"),
        CheckConstraint("identity_digest IS NULL OR identity_digest ~ '^sha256:[0-9a-f]{64}$'",
                        name="identity_is_digest"),
        CheckConstraint("name IS NULL OR length(btrim(name)) BETWEEN 1 AND 200", name="name_length"),
        CheckConstraint("email IS NULL OR length(email) <= 320", name="email_length"),
        CheckConstraint("phone IS NULL OR length(phone) <= 40", name="phone_length"),
        CheckConstraint("organization IS NULL OR length(organization) <= 200", name="organization_length"),
        Index(GUEST_IDENTITY_INDEX, "meeting_id", "identity_digest", unique=True,
              postgresql_where=text("identity_digest IS NOT NULL")),
        Index("ix_guests_unerased", "meeting_id", postgresql_where=text("erased_at IS NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    meeting_id: Mapped[str] = mapped_column(ForeignKey("meeting_attendance.meetings.id"))
    name: Mapped[str | None] = mapped_column(Text)
    email: Mapped[str | None] = mapped_column(Text)
    phone: Mapped[str | None] = mapped_column(Text)
    organization: Mapped[str | None] = mapped_column(Text)
    identity_digest: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    erased_at: Mapped[datetime | None]


class Attendance(Base):
    """One person's attendance of one meeting. PRESENT / LATE (by check-in, decided by the database trigger
    from the meeting's start and grace), EXCUSED (a manager, users only), VOIDED (an undone check-in or excuse:
    final, frees the person and the device). ABSENT is derived: a required attendee without a live row."""

    __tablename__ = "attendances"
    __table_args__ = (
        CheckConstraint("(subject_type = 'USER' AND user_id IS NOT NULL AND guest_id IS NULL) OR "
                        "(subject_type = 'GUEST' AND guest_id IS NOT NULL AND user_id IS NULL)", name="subject"),
        CheckConstraint("status IN ('PRESENT', 'LATE', 'EXCUSED', 'VOIDED')", name="status"),
        CheckConstraint("status_source IN ('CHECK_IN', 'MANUAL')", name="status_source"),
        CheckConstraint("mode IS NULL OR mode IN ('online', 'offline')", name="mode"),
        CheckConstraint(f"device_id IS NULL OR device_id ~ '{DEVICE_ID_PATTERN}'", name="device_id_shape"),
        CheckConstraint("status_source <> 'CHECK_IN' OR (checked_in_at IS NOT NULL AND mode IS NOT NULL)",
                        name="checkin_fields"),
        CheckConstraint("status_source <> 'CHECK_IN' OR status IN ('PRESENT', 'LATE', 'VOIDED')",
                        name="checkin_status"),
        CheckConstraint("status NOT IN ('PRESENT', 'LATE') OR checked_in_at IS NOT NULL", name="present_has_time"),
        CheckConstraint("status <> 'EXCUSED' OR subject_type = 'USER'", name="excused_user"),
        CheckConstraint("(status = 'VOIDED') = (voided_at IS NOT NULL AND voided_by_id IS NOT NULL)",
                        name="voided_has_time"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(ATTENDANCE_USER_LIVE_INDEX, "meeting_id", "user_id", unique=True,
              postgresql_where=text("status <> 'VOIDED' AND user_id IS NOT NULL")),
        Index(ATTENDANCE_GUEST_LIVE_INDEX, "guest_id", unique=True,
              postgresql_where=text("status <> 'VOIDED' AND guest_id IS NOT NULL")),
        Index(ATTENDANCE_DEVICE_LIVE_INDEX, "meeting_id", "device_id", unique=True,
              postgresql_where=text("status <> 'VOIDED' AND device_id IS NOT NULL")),
        # Attendance list (keyset), report counts of guests and walk-ins.
        Index("ix_attendances_meeting_subject", "meeting_id", "subject_type", "id"),
        Index("ix_attendances_user_meeting", "user_id", "meeting_id", postgresql_where=text("user_id IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    meeting_id: Mapped[str] = mapped_column(ForeignKey("meeting_attendance.meetings.id"))
    subject_type: Mapped[str] = mapped_column(Text)
    user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    guest_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.guests.id"))
    status: Mapped[str] = mapped_column(Text)
    status_source: Mapped[str] = mapped_column(Text)
    mode: Mapped[str | None] = mapped_column(Text)
    device_id: Mapped[str | None] = mapped_column(Text)
    checked_in_at: Mapped[datetime | None]
    voided_at: Mapped[datetime | None]
    voided_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class CheckinScan(Base):
    """Every check-in request that reached a known meeting and passed the rate limiter (MA-INV-11):
    ACCEPTED (with the new attendance), ALREADY_CHECKED_IN (with the existing one) or REFUSED (with the
    stable error code as `reason`)."""

    __tablename__ = "checkin_scans"
    __table_args__ = (
        CheckConstraint("channel IN ('USER', 'GUEST')", name="channel"),
        CheckConstraint("outcome IN ('ACCEPTED', 'ALREADY_CHECKED_IN', 'REFUSED')", name="outcome"),
        CheckConstraint("(outcome = 'REFUSED') = (reason IS NOT NULL)", name="refused_has_reason"),
        CheckConstraint("outcome = 'REFUSED' OR attendance_id IS NOT NULL", name="attendance_set"),
        CheckConstraint("mode IS NULL OR mode IN ('online', 'offline')", name="mode"),
        CheckConstraint("code_step IS NULL OR mode = 'online'", name="code_step_online"),
        CheckConstraint(f"device_id IS NULL OR device_id ~ '{DEVICE_ID_PATTERN}'", name="device_id_shape"),
        CheckConstraint("erased_at IS NULL OR (device_id IS NULL AND client_address IS NULL)", name="erased"),
        Index("ix_checkin_scans_meeting_id_id", "meeting_id", "id"),
        Index("ix_checkin_scans_attendance_id", "attendance_id", postgresql_where=text("attendance_id IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    meeting_id: Mapped[str] = mapped_column(ForeignKey("meeting_attendance.meetings.id"))
    occurred_at: Mapped[datetime]
    channel: Mapped[str] = mapped_column(Text)
    mode: Mapped[str | None] = mapped_column(Text)
    user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    guest_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.guests.id"))
    attendance_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.attendances.id"))
    device_id: Mapped[str | None] = mapped_column(Text)
    client_address: Mapped[str | None] = mapped_column(INET)
    outcome: Mapped[str] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    code_step: Mapped[int | None] = mapped_column(BigInteger)
    erased_at: Mapped[datetime | None]


class AttendanceCorrection(Base):
    """A manager's change of an attendance, with its note (MA-INV-12). The note lives only here: the
    append-only audit log refers to this row by id, so retention can erase a guest's notes."""

    __tablename__ = "attendance_corrections"
    __table_args__ = (
        CheckConstraint("to_status IN ('PRESENT', 'LATE', 'EXCUSED', 'VOIDED')", name="to_status"),
        CheckConstraint("to_status NOT IN ('EXCUSED', 'VOIDED') OR erased_at IS NOT NULL OR "
                        "length(btrim(note)) > 0", name="note_required"),
        CheckConstraint("note IS NULL OR length(note) <= 1000", name="note_length"),
        CheckConstraint("erased_at IS NULL OR note IS NULL", name="erased"),
        Index("ix_attendance_corrections_attendance_id", "attendance_id", "occurred_at"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    attendance_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.attendances.id"))
    from_status: Mapped[str | None] = mapped_column(Text)
    to_status: Mapped[str] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    actor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    occurred_at: Mapped[datetime]
    erased_at: Mapped[datetime | None]


class MeetingQrCode(Base):
    """The stored codes of a meeting (the spec's qrCodeOnline / qrCodeOffline), one per mode; the payload
    is the stable check-in address (MA-INV-15). Kept out of `meetings` so hot reads never carry the images."""

    __tablename__ = "meeting_qr_codes"
    __table_args__ = (
        CheckConstraint("mode IN ('online', 'offline')", name="mode"),
        CheckConstraint("payload ~ '^https?://' AND payload LIKE "
                        "'%/meetingattendance/check-in/' || meeting_id || '?mode=' || mode", name="payload"),
        {"schema": SCHEMA},
    )

    meeting_id: Mapped[str] = mapped_column(ForeignKey("meeting_attendance.meetings.id"), primary_key=True)
    mode: Mapped[str] = mapped_column(Text, primary_key=True)
    payload: Mapped[str] = mapped_column(Text)
    svg: Mapped[str] = mapped_column(Text)
    png: Mapped[bytes] = mapped_column(LargeBinary)
    generated_at: Mapped[datetime]
    generated_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))


class MeetingSeries(Base):
    """A recurrence (RFC 5545 RRULE, bounded) whose occurrences are materialised as meetings (D-21)."""

    __tablename__ = "meeting_series"
    __table_args__ = (
        CheckConstraint("rrule ~ '^FREQ=(DAILY|WEEKLY|MONTHLY|YEARLY)(;[A-Z]+=[A-Za-z0-9,:+-]+)*$' AND "
                        "rrule ~ '(^|;)(COUNT|UNTIL)=' AND rrule !~ '(^|;)BY(HOUR|MINUTE|SECOND)='",
                        name="rrule_shape"),
        CheckConstraint("status IN ('ACTIVE', 'DELETED')", name="status"),
        CheckConstraint("(status = 'DELETED') = (deleted_at IS NOT NULL)", name="deleted_has_time"),
        CheckConstraint(f"timezone ~ '{TIMEZONE_SHAPE}'", name="timezone_shape"),
        CheckConstraint("duration_minutes BETWEEN 1 AND 10080", name="duration_range"),
        CheckConstraint("generation_shift_minutes BETWEEN -10080 AND 10080", name="shift_range"),
        *_time_checks(),
        Index("ix_meeting_series_created_at_id", "created_at", "id", postgresql_where=text("status = 'ACTIVE'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    online_link: Mapped[str | None] = mapped_column(Text)
    city: Mapped[str | None] = mapped_column(Text)
    timezone: Mapped[str] = mapped_column(Text)
    rrule: Mapped[str] = mapped_column(Text)
    start_date: Mapped[date] = mapped_column(Date)
    start_local_time: Mapped[time] = mapped_column(Time)
    duration_minutes: Mapped[int] = mapped_column(Integer)
    # Wall-clock minutes added to occurrences generated later (after a "shift" reschedule, D-22).
    generation_shift_minutes: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    exdates: Mapped[list[date]] = mapped_column(ARRAY(Date), server_default=text("'{}'"))
    organizer_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    late_grace_minutes: Mapped[int] = mapped_column(Integer)
    checkin_opens_minutes_before: Mapped[int] = mapped_column(Integer)
    rotating_online_code: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    offline_checkin_enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    template_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("meeting_attendance.templates.id"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'ACTIVE'"))
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class SeriesRequiredAttendee(Base):
    __tablename__ = "series_required_attendees"
    __table_args__ = (Index("ix_series_required_attendees_user_id", "user_id"), {"schema": SCHEMA})

    series_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.meeting_series.id"),
                                                 primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK), primary_key=True)
    added_at: Mapped[datetime]
    added_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))


class Template(Base):
    """What a manager starts meetings and series from: the meeting fields and the attendee list (D-25)."""

    __tablename__ = "templates"
    __table_args__ = (
        CheckConstraint("length(btrim(label)) BETWEEN 1 AND 200", name="label_length"),
        CheckConstraint("status IN ('ACTIVE', 'DELETED')", name="status"),
        CheckConstraint("(status = 'DELETED') = (deleted_at IS NOT NULL)", name="deleted_has_time"),
        CheckConstraint(f"timezone IS NULL OR timezone ~ '{TIMEZONE_SHAPE}'", name="timezone_shape"),
        CheckConstraint("duration_minutes BETWEEN 1 AND 10080", name="duration_range"),
        *_time_checks(),
        Index("ix_templates_label_live", text("lower(label)"), "id", postgresql_where=text("status = 'ACTIVE'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    label: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    online_link: Mapped[str | None] = mapped_column(Text)
    city: Mapped[str | None] = mapped_column(Text)
    timezone: Mapped[str | None] = mapped_column(Text)
    duration_minutes: Mapped[int] = mapped_column(Integer)
    late_grace_minutes: Mapped[int] = mapped_column(Integer)
    checkin_opens_minutes_before: Mapped[int] = mapped_column(Integer)
    rotating_online_code: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    offline_checkin_enabled: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'ACTIVE'"))
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class TemplateAttendee(Base):
    __tablename__ = "template_attendees"
    __table_args__ = (Index("ix_template_attendees_user_id", "user_id"), {"schema": SCHEMA})

    template_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.templates.id"), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK), primary_key=True)
    added_at: Mapped[datetime]
    added_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))


class AuditLog(Base):
    """The spec's MeetingAttendanceAuditLog (D-01): `action` a string constant (audit.py), `changes` JSONB
    with entityId / entityType / before / after. Append-only (triggers); people by id only (MA-INV-20)."""

    __tablename__ = "audit_logs"
    __table_args__ = (
        CheckConstraint("action ~ '^[A-Z][A-Z0-9_]*$'", name="action_shape"),
        CheckConstraint("resource ~ '^[A-Z][A-Z0-9_]*$'", name="resource_shape"),
        CheckConstraint("actor_type IN ('user', 'guest', 'client', 'system')", name="actor_type"),
        CheckConstraint("actor_type = 'system' OR actor_id IS NOT NULL", name="actor_named"),
        CheckConstraint("changes ? 'entityId' AND changes ? 'entityType'", name="changes_shape"),
        Index("ix_audit_logs_occurred_at_id", "occurred_at", "id"),
        Index("ix_audit_logs_resource", "resource", "resource_id", "id"),
        Index("ix_audit_logs_action_id", "action", "id"),
        Index("ix_audit_logs_meeting_id_id", "meeting_id", "id", postgresql_where=text("meeting_id IS NOT NULL")),
        Index("ix_audit_logs_actor", "actor_id", "id"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    occurred_at: Mapped[datetime]
    action: Mapped[str] = mapped_column(String(100))
    resource: Mapped[str] = mapped_column(String(50))
    resource_id: Mapped[str] = mapped_column(Text)
    # No foreign keys: audit rows outlive nothing, but stay importable (spec §数据迁移与同步).
    meeting_id: Mapped[str | None] = mapped_column(String(32))
    series_id: Mapped[uuid.UUID | None]
    actor_type: Mapped[str] = mapped_column(Text)
    actor_id: Mapped[str | None] = mapped_column(Text)
    request_id: Mapped[str | None] = mapped_column(Text)
    changes: Mapped[dict] = mapped_column(JSONB)
