"""Request and response DTOs of meeting attendance (API.md "Meeting attendance"; snake_case, ids as strings,
instants as RFC 3339 with an offset on input and UTC on output, each beside its meeting-local rendering)."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Text500 = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500)]
City = Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)]
Description = Annotated[str, StringConstraints(max_length=10000)]
OnlineLink = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000, pattern=r"^https?://\S+$")]
ZoneName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
DeviceId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{8,64}$")]
Grace = Annotated[int, Field(ge=0, le=240)]
Opens = Annotated[int, Field(ge=0, le=1440)]
UserIds = Annotated[list[uuid.UUID], Field(max_length=2000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClockStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


class Mode(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"


class MeetingFields(Strict):
    title: Title | None = None
    description: Description | None = None
    location: Text500 | None = None
    online_link: OnlineLink | None = None
    city: City | None = None
    timezone: ZoneName | None = Field(None, description="IANA zone; default TENET_DEFAULT_TIMEZONE")
    organizer_id: uuid.UUID | None = Field(None, description="Default: the creator")
    late_grace_minutes: Grace | None = None
    checkin_opens_minutes_before: Opens | None = None
    checkin_closes_at: AwareDatetime | None = Field(None, description="Default: the meeting's end")
    rotating_online_code: bool | None = None
    offline_checkin_enabled: bool | None = None


class MeetingCreate(MeetingFields):
    title: Title | None = Field(None, description="Required unless a template gives it")
    start_time: AwareDatetime
    end_time: AwareDatetime | None = Field(None, description="Required unless a template gives a duration")
    required_attendee_ids: UserIds = Field(default_factory=list)
    template_id: uuid.UUID | None = None


class MeetingUpdate(MeetingFields):
    """JSON merge semantics: an absent field is unchanged, null clears a nullable one."""

    start_time: AwareDatetime | None = None
    end_time: AwareDatetime | None = None


class MeetingCancel(Strict):
    reason: Text500 | None = None


class RequiredAttendees(Strict):
    user_ids: UserIds


class RequiredAttendeesResult(BaseModel):
    user_ids: list[uuid.UUID]
    added: list[uuid.UUID]
    removed: list[uuid.UUID]


class CheckInWindow(BaseModel):
    opens_at: datetime
    closes_at: datetime
    open: bool
    modes: list[Mode]
    requires_code: bool


class PersonRef(BaseModel):
    user_id: uuid.UUID
    display_name: str


class MyAttendance(BaseModel):
    attendance_id: uuid.UUID
    status: str
    checked_in_at: datetime | None


class AttendanceSummary(BaseModel):
    expected: int
    present: int
    late: int
    excused: int
    absent: int
    guests: int
    walk_ins: int


class QrCodeRef(BaseModel):
    check_in_url: str
    svg_url: str
    png_url: str
    generated_at: datetime


class MeetingRead(BaseModel):
    id: str
    title: str
    description: str | None
    location: str | None
    online_link: str | None
    city: str | None
    start_time: datetime
    end_time: datetime
    timezone: str
    start_time_local: str
    end_time_local: str
    status: ClockStatus
    organizer: PersonRef
    late_grace_minutes: int
    checkin_opens_minutes_before: int
    checkin_closes_at: datetime | None
    rotating_online_code: bool
    offline_checkin_enabled: bool
    check_in: CheckInWindow
    series_id: uuid.UUID | None
    series_occurrence_date: date | None
    is_exception: bool
    template_id: uuid.UUID | None
    required_attendee_count: int
    my_identity: str
    my_attendance: MyAttendance | None
    attendance_summary: AttendanceSummary | None = Field(None, description="Managers, creator and organizer")
    qr_code_online: QrCodeRef | None = Field(None, description="Managers, creator and organizer")
    qr_code_offline: QrCodeRef | None = Field(None, description="Managers, creator and organizer")
    cancelled_at: datetime | None
    cancel_reason: str | None
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int


class MeetingSummary(BaseModel):
    id: str
    title: str
    location: str | None
    city: str | None
    start_time: datetime
    end_time: datetime
    timezone: str
    start_time_local: str
    status: ClockStatus
    series_id: uuid.UUID | None = Field(description="Null for an external attendee (the restricted view)")
    organizer_id: uuid.UUID | None = Field(description="Null for an external attendee (the restricted view)")
    my_identity: str
    my_attendance_status: str | None


class AttendeeRead(BaseModel):
    user_id: uuid.UUID
    display_name: str
    email: str
    account_status: str
    added_at: datetime


class PersonRead(BaseModel):
    """A person who can be made a required attendee (the people search)."""

    user_id: uuid.UUID
    display_name: str
    email: str


class DisplayCode(BaseModel):
    mode: Mode
    url: str
    svg: str
    expires_at: datetime | None
    refresh_after_seconds: int | None


class QrCodesRegenerated(BaseModel):
    online: QrCodeRef
    offline: QrCodeRef


# --- public ----------------------------------------------------------------------------------------------


class PublicMeetingRead(BaseModel):
    """What the meeting id (printed on posters, in screenshots) reveals: no description, link, organizer or
    counts (D-15)."""

    id: str
    title: str
    location: str | None
    city: str | None
    start_time: datetime
    end_time: datetime
    timezone: str
    start_time_local: str
    end_time_local: str
    status: ClockStatus
    late_grace_minutes: int
    check_in: CheckInWindow


class MeetingExternalRead(PublicMeetingRead):
    """The restricted view of an external attendee (a signed-in walk-in: a live attendance, on no list), the
    agenda's rule for the meeting itself (spec: 外部访客视图在后端剥离): what the public check-in page shows, and
    their own attendance. Never the description, online link, organizer, cancel reason, series, counts or codes."""

    view: Literal["restricted"] = "restricted"
    my_identity: Literal["external"] = "external"
    my_attendance: MyAttendance | None


# --- check-in --------------------------------------------------------------------------------------------


class CheckInRequest(Strict):
    mode: Mode
    device_id: DeviceId
    code: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        None, description="The `code` of the scanned address: required offline (the meeting's offline code), and "
                          "online when the meeting asks for a rotating code (from the display page)")


class GuestCheckInRequest(CheckInRequest):
    name: Annotated[str, StringConstraints(max_length=200)]
    email: Annotated[str, StringConstraints(strip_whitespace=True, max_length=320)] | None = None
    phone: Annotated[str, StringConstraints(strip_whitespace=True, max_length=40,
                                            pattern=r"^[0-9+() .-]*$")] | None = None
    organization: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] | None = None


class CheckInResult(BaseModel):
    attendance_id: uuid.UUID
    meeting_id: str
    status: Literal["PRESENT", "LATE", "EXCUSED"]
    checked_in_at: datetime | None
    checked_in_at_local: str | None
    mode: str | None
    already_checked_in: bool
    late_by_seconds: int | None


# --- attendances -----------------------------------------------------------------------------------------


class AttendanceStatus(StrEnum):
    PRESENT = "PRESENT"
    LATE = "LATE"
    EXCUSED = "EXCUSED"
    ABSENT = "ABSENT"


Note = Annotated[str, StringConstraints(strip_whitespace=True, max_length=1000)]


class AttendanceCreate(Strict):
    user_id: uuid.UUID
    status: Literal["PRESENT", "LATE", "EXCUSED"]
    note: Note | None = None
    checked_in_at: AwareDatetime | None = None


class AttendanceUpdate(Strict):
    status: AttendanceStatus = Field(description="ABSENT undoes the attendance (it becomes VOIDED, D-11)")
    note: Note | None = None


class AttendanceRead(BaseModel):
    id: uuid.UUID | None = Field(description="null for a required attendee without an attendance (ABSENT)")
    meeting_id: str
    subject_type: Literal["USER", "GUEST"]
    user_id: uuid.UUID | None
    guest_id: uuid.UUID | None
    display_name: str | None
    email: str | None
    organization: str | None
    required: bool
    status: AttendanceStatus
    status_source: str | None
    mode: str | None
    checked_in_at: datetime | None
    note: str | None
    version: int | None


class ScanRead(BaseModel):
    id: int
    occurred_at: datetime
    channel: str
    mode: str | None
    user_id: uuid.UUID | None
    guest_id: uuid.UUID | None
    attendance_id: uuid.UUID | None
    outcome: str
    reason: str | None


# --- series and templates --------------------------------------------------------------------------------


class SeriesFields(Strict):
    title: Title | None = None
    description: Description | None = None
    location: Text500 | None = None
    online_link: OnlineLink | None = None
    city: City | None = None
    organizer_id: uuid.UUID | None = None
    late_grace_minutes: Grace | None = None
    checkin_opens_minutes_before: Opens | None = None
    rotating_online_code: bool | None = None
    offline_checkin_enabled: bool | None = None
    required_attendee_ids: UserIds | None = None


Rrule = Annotated[str, StringConstraints(strip_whitespace=True, min_length=6, max_length=500)]


class SeriesCreate(SeriesFields):
    title: Title | None = Field(None, description="Required unless a template gives it")
    timezone: ZoneName | None = None
    start_date: date
    start_local_time: time
    duration_minutes: Annotated[int, Field(ge=1, le=10080)] | None = Field(
        None, description="Required unless a template gives it")
    rrule: Rrule = Field(description="RFC 5545 RRULE without DTSTART, with COUNT or UNTIL "
                                     "(e.g. FREQ=WEEKLY;BYDAY=MO;COUNT=52)")
    exdates: Annotated[list[date], Field(max_length=500)] = Field(default_factory=list)
    template_id: uuid.UUID | None = None


class SeriesUpdate(SeriesFields):
    rrule: Rrule | None = Field(None, description="Only COUNT or UNTIL may differ from the current rule")
    apply_to_exceptions: bool = False


class SeriesReschedule(Strict):
    from_meeting_id: Annotated[str, StringConstraints(max_length=32)]
    shift_minutes: Annotated[int, Field(ge=-10080, le=10080)] | None = None
    start_local_time: time | None = None
    duration_minutes: Annotated[int, Field(ge=1, le=10080)] | None = None
    include_exceptions: bool = False


class Occurrence(BaseModel):
    meeting_id: str
    occurrence_date: date
    start_time: datetime
    status: ClockStatus | Literal["DELETED"]
    is_exception: bool


class SeriesRead(BaseModel):
    id: uuid.UUID
    title: str
    description: str | None
    location: str | None
    online_link: str | None
    city: str | None
    timezone: str
    rrule: str
    start_date: date
    start_local_time: time
    duration_minutes: int
    exdates: list[date]
    organizer_id: uuid.UUID
    late_grace_minutes: int
    checkin_opens_minutes_before: int
    rotating_online_code: bool
    offline_checkin_enabled: bool
    template_id: uuid.UUID | None
    required_attendee_ids: list[uuid.UUID]
    status: str
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int
    occurrences: list[Occurrence] | None = None


class SeriesChange(BaseModel):
    series: SeriesRead
    created_meeting_ids: list[str]
    updated_meeting_ids: list[str]
    deleted_meeting_ids: list[str]


class RescheduleResult(BaseModel):
    moved: list[str]
    skipped: list[dict[str, str]]


class TemplateFields(Strict):
    label: Title | None = None
    title: Title | None = None
    description: Description | None = None
    location: Text500 | None = None
    online_link: OnlineLink | None = None
    city: City | None = None
    timezone: ZoneName | None = None
    duration_minutes: Annotated[int, Field(ge=1, le=10080)] | None = None
    late_grace_minutes: Grace | None = None
    checkin_opens_minutes_before: Opens | None = None
    rotating_online_code: bool | None = None
    offline_checkin_enabled: bool | None = None
    attendee_user_ids: UserIds | None = None


class TemplateCreate(TemplateFields):
    label: Title
    title: Title
    duration_minutes: Annotated[int, Field(ge=1, le=10080)]


class TemplateUpdate(TemplateFields):
    pass


class TemplateRead(BaseModel):
    id: uuid.UUID
    label: str
    title: str
    description: str | None
    location: str | None
    online_link: str | None
    city: str | None
    timezone: str | None
    duration_minutes: int
    late_grace_minutes: int
    checkin_opens_minutes_before: int
    rotating_online_code: bool
    offline_checkin_enabled: bool
    attendee_user_ids: list[uuid.UUID]
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int


# --- audit -----------------------------------------------------------------------------------------------


class AuditLogRead(BaseModel):
    id: str
    occurred_at: datetime
    action: str
    resource: str
    resource_id: str
    meeting_id: str | None
    series_id: uuid.UUID | None
    actor_type: str
    actor_id: str | None
    request_id: str | None
    changes: dict


# --- reports ---------------------------------------------------------------------------------------------


class Figures(BaseModel):
    expected: int
    present: int
    late: int
    excused: int
    absent: int
    attendance_rate: float | None = Field(description="(present + late) / (expected - excused)")


class ReportMeeting(BaseModel):
    id: str
    title: str
    start_time: datetime
    end_time: datetime
    timezone: str
    start_time_local: str
    status: ClockStatus


class MeetingReport(Figures):
    meeting: ReportMeeting
    guests: int
    walk_ins: int
    on_time_rate: float | None
    rows: list[AttendanceRead]


class SeriesMeetingFigures(Figures):
    meeting_id: str
    title: str
    start_time: datetime
    start_time_local: str
    guests: int
    walk_ins: int
    on_time_rate: float | None


class AttendeeFigures(Figures):
    user_id: uuid.UUID
    display_name: str
    on_time_rate: float | None


class SeriesRef(BaseModel):
    id: uuid.UUID
    title: str
    timezone: str


class SeriesReport(BaseModel):
    series: SeriesRef
    meetings_counted: int
    meetings: list[SeriesMeetingFigures]
    attendees: list[AttendeeFigures]


class StatusDistribution(Figures):
    from_: datetime = Field(alias="from")
    to: datetime
    meetings_counted: int
    guests: int
    walk_ins: int
    on_time_rate: float | None

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class RankedAttendee(BaseModel):
    user_id: uuid.UUID
    display_name: str
    expected: int
    attended: int
    excused: int
    attendance_rate: float | None


class RankedMeeting(BaseModel):
    meeting_id: str
    title: str
    start_time: datetime
    expected: int
    attended: int
    attendance_rate: float | None


class LowAttendance(BaseModel):
    from_: datetime = Field(alias="from")
    to: datetime
    attendees: list[RankedAttendee]
    meetings: list[RankedMeeting]

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
