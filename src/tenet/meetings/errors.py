"""Stable error codes of meeting attendance. Values never change (ARCHITECTURE.md "Conventions").

Problem documents carry machine-readable facts (ids, times, the current state), never names, emails,
phone numbers or notes.
"""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError, RateLimited


class MeetingErrorCode(StrEnum):
    MEETING_NOT_FOUND = "MEETING_NOT_FOUND"
    MEETING_CANCELLED = "MEETING_CANCELLED"
    MEETING_TIME_INVALID = "MEETING_TIME_INVALID"
    TIMEZONE_INVALID = "TIMEZONE_INVALID"
    MEETING_ACTION_FORBIDDEN = "MEETING_ACTION_FORBIDDEN"
    ROTATING_CODE_LOCKED = "ROTATING_CODE_LOCKED"
    ATTENDEE_NOT_FOUND = "ATTENDEE_NOT_FOUND"
    CHECK_IN_WINDOW_NOT_OPEN = "CHECK_IN_WINDOW_NOT_OPEN"
    CHECK_IN_WINDOW_CLOSED = "CHECK_IN_WINDOW_CLOSED"
    CHECK_IN_MODE_DISABLED = "CHECK_IN_MODE_DISABLED"
    CHECK_IN_CODE_REQUIRED = "CHECK_IN_CODE_REQUIRED"
    CHECK_IN_CODE_INVALID = "CHECK_IN_CODE_INVALID"
    CHECK_IN_CODE_EXPIRED = "CHECK_IN_CODE_EXPIRED"
    CHECK_IN_OFFLINE_CODE_REQUIRED = "CHECK_IN_OFFLINE_CODE_REQUIRED"
    CHECK_IN_OFFLINE_CODE_INVALID = "CHECK_IN_OFFLINE_CODE_INVALID"
    DEVICE_ALREADY_USED = "DEVICE_ALREADY_USED"
    GUEST_NAME_REQUIRED = "GUEST_NAME_REQUIRED"
    GUEST_CHECKIN_LIMIT_REACHED = "GUEST_CHECKIN_LIMIT_REACHED"
    ATTENDANCE_NOT_FOUND = "ATTENDANCE_NOT_FOUND"
    ATTENDANCE_EXISTS = "ATTENDANCE_EXISTS"
    ATTENDANCE_VOIDED = "ATTENDANCE_VOIDED"
    ATTENDANCE_NOTE_REQUIRED = "ATTENDANCE_NOTE_REQUIRED"
    ATTENDANCE_STATUS_INVALID = "ATTENDANCE_STATUS_INVALID"
    SERIES_NOT_FOUND = "SERIES_NOT_FOUND"
    SERIES_OCCURRENCE_NOT_FOUND = "SERIES_OCCURRENCE_NOT_FOUND"
    SERIES_OCCURRENCE_STARTED = "SERIES_OCCURRENCE_STARTED"
    RECURRENCE_INVALID = "RECURRENCE_INVALID"
    RECURRENCE_TOO_LONG = "RECURRENCE_TOO_LONG"
    RECURRENCE_CHANGE_UNSUPPORTED = "RECURRENCE_CHANGE_UNSUPPORTED"
    TEMPLATE_NOT_FOUND = "TEMPLATE_NOT_FOUND"
    REPORT_RANGE_INVALID = "REPORT_RANGE_INVALID"


class MeetingNotFound(DomainError):
    """Unknown, malformed, DELETED, or not visible to the caller (API.md: 404 for rows one may not see)."""

    status, code, title = 404, MeetingErrorCode.MEETING_NOT_FOUND, "No such meeting"


class MeetingCancelled(DomainError):
    status, code, title = 409, MeetingErrorCode.MEETING_CANCELLED, "The meeting is cancelled"


class MeetingTimeInvalid(DomainError):
    """MA-INV-02: end after start, at most 7 days, a check-in window that opens before it closes."""

    status, code, title = 422, MeetingErrorCode.MEETING_TIME_INVALID, "The meeting's times are not valid"


class TimezoneInvalid(DomainError):
    status, code, title = 422, MeetingErrorCode.TIMEZONE_INVALID, "Not an IANA time zone name"


class MeetingActionForbidden(DomainError):
    """The caller sees the meeting but their identity for it does not allow this (permissions.TABLE)."""

    status, code, title = (403, MeetingErrorCode.MEETING_ACTION_FORBIDDEN,
                           "Your role in this meeting does not allow this")


class RotatingCodeLocked(DomainError):
    status, code, title = (409, MeetingErrorCode.ROTATING_CODE_LOCKED,
                           "The rotating code cannot be turned on once online check-ins were accepted")


class AttendeeNotFound(DomainError):
    status, code, title = 422, MeetingErrorCode.ATTENDEE_NOT_FOUND, "Some attendee ids are not accounts"


class CheckInRefused(DomainError):
    """A refused check-in: its REFUSED scan is recorded and committed although the request fails (MA-INV-11,
    tenet.kernel.refusals)."""


class CheckInWindowNotOpen(CheckInRefused):
    status, code, title = 409, MeetingErrorCode.CHECK_IN_WINDOW_NOT_OPEN, "Check-in has not opened yet"


class CheckInWindowClosed(CheckInRefused):
    status, code, title = 409, MeetingErrorCode.CHECK_IN_WINDOW_CLOSED, "Check-in is closed"


class CheckInModeDisabled(CheckInRefused):
    status, code, title = 409, MeetingErrorCode.CHECK_IN_MODE_DISABLED, "This check-in mode is turned off"


class CheckInCodeRequired(CheckInRefused):
    status, code, title = 403, MeetingErrorCode.CHECK_IN_CODE_REQUIRED, "Scan the code shown in the room"


class CheckInCodeInvalid(CheckInRefused):
    status, code, title = 403, MeetingErrorCode.CHECK_IN_CODE_INVALID, "This check-in code is not valid"


class CheckInCodeExpired(CheckInRefused):
    status, code, title = 403, MeetingErrorCode.CHECK_IN_CODE_EXPIRED, "This check-in code has expired; scan again"


class CheckInOfflineCodeRequired(CheckInRefused):
    """An offline check-in carries the meeting's offline code, as its QR code's address does (issue 24 item 4)."""

    status, code, title = (403, MeetingErrorCode.CHECK_IN_OFFLINE_CODE_REQUIRED,
                           "Scan the meeting's printed code (this one is out of date or incomplete)")


class CheckInOfflineCodeInvalid(CheckInRefused):
    status, code, title = (403, MeetingErrorCode.CHECK_IN_OFFLINE_CODE_INVALID,
                           "This is not the printed code of this meeting")


class DeviceAlreadyUsed(CheckInRefused):
    """MA-INV-07: one device checks in one person per meeting."""

    status, code, title = (409, MeetingErrorCode.DEVICE_ALREADY_USED,
                           "This device already checked someone else in to this meeting")


class GuestNameRequired(DomainError):
    status, code, title = 422, MeetingErrorCode.GUEST_NAME_REQUIRED, "A guest must give a name"


class GuestCheckInLimitReached(RateLimited):
    code, title = MeetingErrorCode.GUEST_CHECKIN_LIMIT_REACHED, "Too many guest check-ins from this address"


class AttendanceNotFound(DomainError):
    status, code, title = 404, MeetingErrorCode.ATTENDANCE_NOT_FOUND, "No such attendance"


class AttendanceExists(DomainError):
    status, code, title = 409, MeetingErrorCode.ATTENDANCE_EXISTS, "This person already has an attendance"


class AttendanceVoided(DomainError):
    status, code, title = 409, MeetingErrorCode.ATTENDANCE_VOIDED, "The attendance was undone; it is final"


class AttendanceNoteRequired(DomainError):
    status, code, title = 422, MeetingErrorCode.ATTENDANCE_NOTE_REQUIRED, "Excusing or undoing needs a note"


class AttendanceStatusInvalid(DomainError):
    status, code, title = 422, MeetingErrorCode.ATTENDANCE_STATUS_INVALID, "This status is not possible here"


class SeriesNotFound(DomainError):
    status, code, title = 404, MeetingErrorCode.SERIES_NOT_FOUND, "No such series"


class SeriesOccurrenceNotFound(DomainError):
    status, code, title = 404, MeetingErrorCode.SERIES_OCCURRENCE_NOT_FOUND, "No such occurrence in this series"


class SeriesOccurrenceStarted(DomainError):
    status, code, title = 409, MeetingErrorCode.SERIES_OCCURRENCE_STARTED, "This occurrence has already started"


class RecurrenceInvalid(DomainError):
    status, code, title = 422, MeetingErrorCode.RECURRENCE_INVALID, "The recurrence rule is not valid"


class RecurrenceTooLong(DomainError):
    status, code, title = 422, MeetingErrorCode.RECURRENCE_TOO_LONG, "The recurrence has too many occurrences"


class RecurrenceChangeUnsupported(DomainError):
    status, code, title = (422, MeetingErrorCode.RECURRENCE_CHANGE_UNSUPPORTED,
                           "Only COUNT or UNTIL of a series' rule can change")


class TemplateNotFound(DomainError):
    status, code, title = 404, MeetingErrorCode.TEMPLATE_NOT_FOUND, "No such template"


class ReportRangeInvalid(DomainError):
    status, code, title = 422, MeetingErrorCode.REPORT_RANGE_INVALID, "The date range is not valid"
