"""The rules of meeting attendance (spec 001, issue 10), each with its enforcement and its detector.

Ids follow docs/design/meetings.md §2 (MA-INV-21..29 are the agenda's, issue 11). MA-INV-05 is not used:
the design's denormalised start-time copy on attendee rows was dropped (docs/decisions.md, "Meeting
attendance"), so there is nothing for it to guard.

Detectors that need "now" read `meeting_attendance.rule_now()`: the database clock, or the `tenet.now`
setting when a test sets it to its frozen clock. Detectors that depend on a setting (the guest-data
retention) use its default; run `tenet invariants check` with `PGOPTIONS='-c tenet.guest_retention_days=N'`
on a deployment that configured another value.
"""

from __future__ import annotations

from tenet.kernel.invariants import register
from tenet.meetings.models import (
    ATTENDANCE_DEVICE_LIVE_INDEX,
    ATTENDANCE_GUEST_LIVE_INDEX,
    ATTENDANCE_USER_LIVE_INDEX,
    ATTENDANCE_VOIDED_TRIGGER,
    AUDIT_APPEND_ONLY_TRIGGER,
    AUDIT_NO_TRUNCATE_TRIGGER,
    CHECKIN_ALLOWED_TRIGGER,
    GUEST_HAS_ATTENDANCE_TRIGGER,
    GUEST_IDENTITY_INDEX,
    MEETING_SCHEDULE_LOCK_TRIGGER,
    MEETING_SCHEDULE_PROPAGATE_TRIGGER,
    MEETING_TERMINAL_TRIGGER,
    SERIES_OCCURRENCE_INDEX,
    SERIES_TERMINAL_TRIGGER,
    TEMPLATE_TERMINAL_TRIGGER,
)

DOMAIN = "meetings"
# Keys of `changes` that would put personal data into the append-only log (MA-INV-13, MA-INV-20).
PERSONAL_KEYS = ("name", "email", "phone", "organization", "note", "display_name", "cancel_reason", "description")


def _trigger_present(table: str, trigger: str) -> str:
    """The detector arm that reports a trigger missing or disabled (every trigger-backed rule has one)."""
    return f"""
        SELECT NULL, 'trigger {trigger} missing or disabled'
         WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                            JOIN pg_namespace n ON n.oid = c.relnamespace
                           WHERE n.nspname = 'meeting_attendance' AND c.relname = '{table}'
                             AND t.tgname = '{trigger}' AND t.tgenabled <> 'D')"""  # noqa: S608


register(
    id="MA-INV-01",
    domain=DOMAIN,
    statement="Every meeting id is a URL-safe string of 16 to 32 letters and digits; ids Tenet makes are 32 "
              "lowercase hex characters from 128 random bits.",
    scope="meeting_attendance.meetings, every row",
    counterexample="Meeting `1001`: the next meeting's public page and guest check-in are one guess away; an id "
                   "with `/` or `?` breaks the QR address.",
    db=("ck_meetings_id_format", "pk_meetings"),
    app="Ids are never taken from clients (secrets.token_hex(16)); a malformed id in a path answers 404 "
        "without a query.",
    error_code="MEETING_NOT_FOUND",
    concurrency="None needed: random ids; the primary key decides a collision.",
    detector="SELECT id FROM meeting_attendance.meetings WHERE id !~ '^[0-9A-Za-z]{16,32}$'",
)

register(
    id="MA-INV-02",
    domain=DOMAIN,
    statement="A meeting ends after it starts and lasts at most 7 days; its time zone is an IANA name; grace is "
              "0..240 minutes, the window opens 0..1440 minutes before the start, and a set closing time is after "
              "the opening.",
    scope="meeting_attendance.meetings (and the same ranges on meeting_series and templates)",
    counterexample="A meeting ending before it starts; timezone 'PST' (not IANA, ambiguous); a window that closes "
                   "before it opens, so nobody can ever check in.",
    db=("ck_meetings_time_order", "ck_meetings_duration", "ck_meetings_timezone_shape",
        "ck_meetings_late_grace_range", "ck_meetings_checkin_opens_range", "ck_meetings_checkin_window_order"),
    app="zoneinfo must load the zone (TIMEZONE_INVALID); instants must carry an offset (422); the window and "
        "duration are checked before writing (MEETING_TIME_INVALID).",
    error_code="MEETING_TIME_INVALID",
    concurrency="Single-row CHECKs.",
    detector="""
        SELECT m.id, m.timezone FROM meeting_attendance.meetings m
         WHERE NOT EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = m.timezone)
            OR m.end_time <= m.start_time
    """,
)

register(
    id="MA-INV-03",
    domain=DOMAIN,
    statement="A meeting's stored status is ACTIVE, CANCELLED or DELETED, each with its times; DELETED is final "
              "and CANCELLED never returns to ACTIVE. SCHEDULED / IN_PROGRESS / COMPLETED are never stored: they "
              "are read from the clock.",
    scope="meeting_attendance.meetings, every row",
    counterexample="A row stored as COMPLETED that stays completed after being moved to next week; a deleted "
                   "meeting brought back by an UPDATE.",
    db=("ck_meetings_status", "ck_meetings_cancelled_has_time", "ck_meetings_deleted_has_time",
        MEETING_TERMINAL_TRIGGER),
    app="Transitions declared in lifecycles.MEETING, applied as conditional UPDATEs (If-Match compares the version).",
    error_code="MEETING_CANCELLED",
    concurrency="Conditional UPDATE on status; the trigger refuses any writer.",
    detector=f"""
        SELECT id, status FROM meeting_attendance.meetings
         WHERE status NOT IN ('ACTIVE', 'CANCELLED', 'DELETED')
            OR (status = 'CANCELLED' AND cancelled_at IS NULL)
            OR (status = 'ACTIVE' AND cancelled_at IS NOT NULL)
            OR ((status = 'DELETED') <> (deleted_at IS NOT NULL))
        UNION ALL {_trigger_present('meetings', MEETING_TERMINAL_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-04",
    domain=DOMAIN,
    statement="Required-attendee lists of meetings and series, and template attendee lists, name system users "
              "(spec: 参会名单仅允许系统用户), once each, active when added.",
    scope="meeting_required_attendees, series_required_attendees, template_attendees",
    counterexample="A guest's email typed into the required list; the same user listed twice and counted twice "
                   "as expected; a disabled account added while its deletion was committing.",
    db=("pk_meeting_required_attendees", "pk_series_required_attendees", "pk_template_attendees",
        "fk_meeting_required_attendees_user_id_user_account", "fk_series_required_attendees_user_id_user_account",
        "fk_template_attendees_user_id_user_account"),
    app="Commands that add users share-lock their accounts first (iam require_active_accounts, ACCOUNT_NOT_ACTIVE) "
        "and refuse unknown ids (ATTENDEE_NOT_FOUND); a list is replaced in one transaction.",
    error_code="ATTENDEE_NOT_FOUND",
    concurrency="The account FOR SHARE lock conflicts with identity's FOR UPDATE during deletion: either the "
                "deletion runs first (the add sees it) or its handler removes the new row (MA-INV-19).",
    detector="""
        SELECT 'meeting' AS list, r.meeting_id::text AS parent_id, r.user_id
          FROM meeting_attendance.meeting_required_attendees r
          LEFT JOIN iam.user_account u ON u.id = r.user_id WHERE u.id IS NULL
        UNION ALL
        SELECT 'series', s.series_id::text, s.user_id FROM meeting_attendance.series_required_attendees s
          LEFT JOIN iam.user_account u ON u.id = s.user_id WHERE u.id IS NULL
        UNION ALL
        SELECT 'template', t.template_id::text, t.user_id FROM meeting_attendance.template_attendees t
          LEFT JOIN iam.user_account u ON u.id = t.user_id WHERE u.id IS NULL
    """,
)

register(
    id="MA-INV-06",
    domain=DOMAIN,
    statement="Per meeting, at most one live (not VOIDED) attendance per user and per guest identity; a repeated "
              "scan by the same person answers the existing attendance and never makes a second one.",
    scope="meeting_attendance.attendances where status <> 'VOIDED'; guests with an identity digest",
    counterexample="A user double-taps check in on a slow network and is counted twice; the same guest (same "
                   "email) checks in from a laptop and a phone.",
    db=(ATTENDANCE_USER_LIVE_INDEX, ATTENDANCE_GUEST_LIVE_INDEX, GUEST_IDENTITY_INDEX),
    app="The check-in's probe reads the caller's live attendance first; the insert is ON CONFLICT DO NOTHING and "
        "an empty result re-reads and answers the winner's row (200, already_checked_in).",
    error_code="ATTENDANCE_EXISTS",
    concurrency="The partial unique indexes decide; proven by tests/concurrency/test_meeting_races.py (the same "
                "user scanning twice at once, the same guest twice at once).",
    detector="""
        SELECT meeting_id, user_id::text AS who, count(*) FROM meeting_attendance.attendances
         WHERE status <> 'VOIDED' AND user_id IS NOT NULL GROUP BY meeting_id, user_id HAVING count(*) > 1
        UNION ALL
        SELECT g.meeting_id, g.identity_digest, count(*) FROM meeting_attendance.attendances a
          JOIN meeting_attendance.guests g ON g.id = a.guest_id
         WHERE a.status <> 'VOIDED' AND g.identity_digest IS NOT NULL
         GROUP BY g.meeting_id, g.identity_digest HAVING count(*) > 1
    """,
)

register(
    id="MA-INV-07",
    domain=DOMAIN,
    statement="Per meeting, one device id checks in at most one person (live attendances; an undone check-in "
              "frees its device). The same person scanning again from any device is answered, not refused.",
    scope="meeting_attendance.attendances where status <> 'VOIDED' and device_id is set",
    counterexample="One phone checks in the whole team; two guests submit from one browser at the same moment "
                   "and both are accepted.",
    db=(ATTENDANCE_DEVICE_LIVE_INDEX, "ck_attendances_device_id_shape"),
    app="The probe finds the device's live attendance and refuses (DEVICE_ALREADY_USED, a refused scan) before "
        "any insert; on an insert conflict the service re-reads by person first, then by device.",
    error_code="DEVICE_ALREADY_USED",
    concurrency="The partial unique index decides; race test: two guests on one device at once.",
    detector="""
        SELECT meeting_id, device_id, count(*) FROM meeting_attendance.attendances
         WHERE status <> 'VOIDED' AND device_id IS NOT NULL GROUP BY meeting_id, device_id HAVING count(*) > 1
    """,
)

register(
    id="MA-INV-08",
    domain=DOMAIN,
    statement="A check-in attendance is written only while its meeting is ACTIVE and its own check-in time lies "
              "in [start - opens, closes) of the meeting as committed at that moment; cancelling, deleting or "
              "rescheduling a meeting is serialised with in-flight check-ins.",
    scope="meeting_attendance.attendances with status_source = 'CHECK_IN', at write time",
    counterexample="A check-in that read the meeting as ACTIVE, waited behind a cancel and committed an "
                   "attendance on a cancelled meeting; a check-in accepted one second after the window closed.",
    db=(CHECKIN_ALLOWED_TRIGGER, MEETING_SCHEDULE_LOCK_TRIGGER),
    app="The probe refuses outside the window or on a cancelled meeting with the friendly code and a refused "
        "scan; the trigger is the arbiter for races (its check_violation constraint names map to the same codes).",
    error_code="CHECK_IN_WINDOW_CLOSED",
    concurrency="The insert trigger takes a shared advisory lock on the meeting (19777, hashtext(id)); a change "
                "of status or schedule takes it exclusively in a BEFORE UPDATE trigger. A check-in commits before "
                "the change or sees it. Race test: check-in vs cancel (fails with the lock made a no-op).",
    detector=f"""
        SELECT a.id::text, a.meeting_id FROM meeting_attendance.attendances a
          JOIN meeting_attendance.meetings m ON m.id = a.meeting_id
         WHERE a.status_source = 'CHECK_IN' AND a.checked_in_at > m.schedule_changed_at
           AND (a.checked_in_at < m.start_time - make_interval(mins => m.checkin_opens_minutes_before)
                OR a.checked_in_at >= coalesce(m.checkin_closes_at, m.end_time)
                OR a.checked_in_at > m.cancelled_at
                OR a.checked_in_at > m.deleted_at)
        UNION ALL {_trigger_present('attendances', CHECKIN_ALLOWED_TRIGGER)}
        UNION ALL {_trigger_present('meetings', MEETING_SCHEDULE_LOCK_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-09",
    domain=DOMAIN,
    statement="A live check-in attendance is LATE exactly when it was checked in after start + grace (strictly: "
              "at the limit is on time), else PRESENT; it is recomputed in the same transaction when the start or "
              "the grace changes. Durations are elapsed time on instants (a DST change adds no hour).",
    scope="meeting_attendance.attendances where status_source = 'CHECK_IN' and status in (PRESENT, LATE)",
    counterexample="A meeting moved 30 minutes later still shows its punctual attendees as LATE.",
    db=(CHECKIN_ALLOWED_TRIGGER, MEETING_SCHEDULE_PROPAGATE_TRIGGER, "ck_attendances_checkin_status"),
    app="None: the database decides the status from the row's checked_in_at (the service's clock).",
    error_code=None,
    concurrency="The recompute runs under the meeting's exclusive advisory lock (MA-INV-08).",
    detector=f"""
        SELECT a.id::text, a.status FROM meeting_attendance.attendances a
          JOIN meeting_attendance.meetings m ON m.id = a.meeting_id
         WHERE a.status_source = 'CHECK_IN' AND a.status IN ('PRESENT', 'LATE')
           AND (a.status = 'LATE') <> (a.checked_in_at > m.start_time + make_interval(mins => m.late_grace_minutes))
        UNION ALL {_trigger_present('meetings', MEETING_SCHEDULE_PROPAGATE_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-10",
    domain=DOMAIN,
    statement="An attendance is a user's or a guest's (never both); its status is PRESENT, LATE, EXCUSED or "
              "VOIDED; EXCUSED only for users; check-ins carry their time and mode; VOIDED carries who and when "
              "and is final.",
    scope="meeting_attendance.attendances, every row",
    counterexample="A row with both a user and a guest; an excused guest; a voided row revived by UPDATE, "
                   "silently duplicating a newer live row.",
    db=("ck_attendances_subject", "ck_attendances_status", "ck_attendances_checkin_fields",
        "ck_attendances_checkin_status", "ck_attendances_excused_user", "ck_attendances_voided_has_time",
        ATTENDANCE_VOIDED_TRIGGER),
    app="Transitions declared in lifecycles.ATTENDANCE, applied as conditional UPDATEs (If-Match).",
    error_code="ATTENDANCE_VOIDED",
    concurrency="Conditional UPDATE on status and version.",
    detector=f"""
        SELECT id::text, status FROM meeting_attendance.attendances
         WHERE NOT ((subject_type = 'USER' AND user_id IS NOT NULL AND guest_id IS NULL)
                    OR (subject_type = 'GUEST' AND guest_id IS NOT NULL AND user_id IS NULL))
            OR status NOT IN ('PRESENT', 'LATE', 'EXCUSED', 'VOIDED')
            OR (status = 'EXCUSED' AND subject_type <> 'USER')
            OR ((status = 'VOIDED') <> (voided_at IS NOT NULL AND voided_by_id IS NOT NULL))
        UNION ALL {_trigger_present('attendances', ATTENDANCE_VOIDED_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-11",
    domain=DOMAIN,
    statement="Every check-in request that reached a known meeting and passed the rate limiter is recorded once: "
              "ACCEPTED with the new attendance, ALREADY_CHECKED_IN with the existing one, or REFUSED with its "
              "error code. Every check-in attendance has its ACCEPTED scan.",
    scope="meeting_attendance.checkin_scans; attendances with status_source = 'CHECK_IN'",
    counterexample="An organiser asks whether Bob tried to check in and refused attempts left no trace; an "
                   "attendance that appeared without a scan (a script).",
    db=("ck_checkin_scans_refused_has_reason", "ck_checkin_scans_attendance_set", "ck_checkin_scans_outcome"),
    app="The accepted scan is written by the same statement as the attendance (a data-modifying CTE); refusals "
        "write their scan and raise an error whose unit of work commits the scan alone (kernel.refusals). Requests "
        "the rate limiter refused (429) are counted there, not here (D-19).",
    error_code=None,
    concurrency="None: inserts only.",
    detector="""
        SELECT a.id::text FROM meeting_attendance.attendances a
         WHERE a.status_source = 'CHECK_IN'
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.checkin_scans s
                            WHERE s.attendance_id = a.id AND s.outcome = 'ACCEPTED')
    """,
)

register(
    id="MA-INV-12",
    domain=DOMAIN,
    statement="Every attendance a manager created or changed (MANUAL, or VOIDED) has a correction row; excuses "
              "and undos carry a non-empty note, which lives only in that row.",
    scope="meeting_attendance.attendances, attendance_corrections",
    counterexample="A check-in undone with no reason on record; a reason ('was in hospital') copied into the "
                   "append-only audit log where retention can never erase it.",
    db=("ck_attendance_corrections_note_required", "fk_attendance_corrections_attendance_id_attendances"),
    app="The correction row is written in the transaction of the change; the audit row names its id.",
    error_code="ATTENDANCE_NOTE_REQUIRED",
    concurrency="Same transaction.",
    detector="""
        SELECT a.id::text FROM meeting_attendance.attendances a
         WHERE (a.status_source = 'MANUAL' OR a.status = 'VOIDED')
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.attendance_corrections c WHERE c.attendance_id = a.id)
    """,
)

register(
    id="MA-INV-13",
    domain=DOMAIN,
    statement="A guest's name, email, phone and organisation exist only in meeting_attendance.guests (everything "
              "else refers to the row by id); no guest row exists without the attendance it was collected for; "
              "guests of meetings that ended more than TENET_GUEST_DATA_RETENTION_DAYS ago are erased (with their "
              "meeting's device ids, client addresses and guest correction notes), counts kept.",
    scope="guests, attendances, checkin_scans, attendance_corrections, audit_logs",
    counterexample="A refused guest check-in whose guest row (with a phone number) was committed anyway; a "
                   "guest's email in an audit row that can never be deleted; a two-year-old guest list.",
    db=(GUEST_HAS_ATTENDANCE_TRIGGER, "ck_guests_erased_consistent", "ck_guests_identity_is_digest"),
    app="The guest row and its attendance are written by one statement (rolled back to a savepoint when the "
        "attendance is refused); the daily job erase_guest_data; the audit writer refuses personal keys.",
    error_code=None,
    concurrency="The job locks guests FOR UPDATE SKIP LOCKED in batches.",
    detector=f"""
        SELECT g.id::text, 'guest without attendance' AS problem FROM meeting_attendance.guests g
         WHERE NOT EXISTS (SELECT 1 FROM meeting_attendance.attendances a WHERE a.guest_id = g.id)
        UNION ALL
        SELECT g.id::text, 'not erased after retention' FROM meeting_attendance.guests g
          JOIN meeting_attendance.meetings m ON m.id = g.meeting_id
         WHERE g.erased_at IS NULL
           AND m.end_time < meeting_attendance.rule_now()
               - make_interval(days => coalesce(nullif(current_setting('tenet.guest_retention_days', true), '')::int,
                                                90) + 1)
        UNION ALL
        SELECT l.id::text, 'personal data in audit' FROM meeting_attendance.audit_logs l
         WHERE l.changes::text ~* '"({'|'.join(PERSONAL_KEYS)})"\\s*:'
        UNION ALL {_trigger_present('guests', GUEST_HAS_ATTENDANCE_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-14",
    domain=DOMAIN,
    statement="When a meeting asks for a rotating online code, an online check-in is accepted only with a code "
              "signed for that meeting and the current or previous time step; the accepted step is recorded. An "
              "offline check-in is accepted only with the meeting's offline code (signed for the meeting and the "
              "mode), which the address of its offline QR code carries: a client cannot pick the weaker mode.",
    scope="checkin_scans ACCEPTED in online mode, of meetings with rotating_online_code",
    counterexample="A photo of the screen sent to someone at home still checks them in ten minutes later; a "
                   "code forged by changing the step; the same person at home sending `mode: offline` instead.",
    db=("ck_checkin_scans_code_step_online",),
    app="HMAC-SHA256 over meeting id and step with a key derived from TENET_SECRET_KEY, compared in constant "
        "time (CHECK_IN_CODE_REQUIRED / _INVALID / _EXPIRED); turning rotation on after online check-ins is "
        "refused (ROTATING_CODE_LOCKED), so this detector stays exact. The offline code is HMAC-SHA256 over "
        "meeting id and mode with another derived key (CHECK_IN_OFFLINE_CODE_REQUIRED / _INVALID); the database "
        "never sees the key, so no detector re-checks it.",
    error_code="CHECK_IN_CODE_EXPIRED",
    concurrency="Stateless.",
    detector="""
        SELECT s.id::text FROM meeting_attendance.checkin_scans s
          JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
         WHERE s.outcome = 'ACCEPTED' AND s.mode = 'online' AND m.rotating_online_code AND s.code_step IS NULL
    """,
)

register(
    id="MA-INV-15",
    domain=DOMAIN,
    statement="Each meeting that is not DELETED has exactly one stored code per mode, whose payload is "
              "<base>/meetingattendance/check-in/<its id>?mode=<mode> (the printed address never changes).",
    scope="meeting_attendance.meeting_qr_codes",
    counterexample="Meeting A's offline code printed on meeting B's poster because a regeneration wrote the "
                   "wrong id; a code whose address lost `mode`.",
    db=("pk_meeting_qr_codes", "ck_meeting_qr_codes_mode", "ck_meeting_qr_codes_payload"),
    app="Both codes are generated with the meeting and by regenerate (an upsert on the primary key).",
    error_code=None,
    concurrency="Upsert on the primary key.",
    detector="""
        SELECT m.id, md.mode FROM meeting_attendance.meetings m
         CROSS JOIN (VALUES ('online'), ('offline')) md(mode)
         WHERE m.status <> 'DELETED'
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.meeting_qr_codes q
                            WHERE q.meeting_id = m.id AND q.mode = md.mode)
    """,
)

register(
    id="MA-INV-16",
    domain=DOMAIN,
    statement="A meeting belongs to a series exactly when it has an occurrence date; there is at most one meeting "
              "per (series, occurrence date), deleted ones included (a deleted occurrence never comes back); an "
              "occurrence has its series' time zone.",
    scope="meeting_attendance.meetings where series_id IS NOT NULL",
    counterexample="Extending a weekly series regenerates last Monday's meeting that the manager had deleted; "
                   "two generations racing create two 'Monday 9:00' meetings.",
    db=(SERIES_OCCURRENCE_INDEX, "ck_meetings_series_occurrence", "ck_meetings_exception_in_series"),
    app="Generation inserts ON CONFLICT DO NOTHING on the index; series commands lock the series row first.",
    error_code=None,
    concurrency="Series row FOR UPDATE, then the unique index.",
    detector="""
        SELECT m.id, m.series_id FROM meeting_attendance.meetings m
          JOIN meeting_attendance.meeting_series s ON s.id = m.series_id
         WHERE m.timezone <> s.timezone
    """,
)

register(
    id="MA-INV-17",
    domain=DOMAIN,
    statement="When a series is deleted, every meeting of it that had not started at that moment is deleted in "
              "the same transaction; started and past meetings are kept as history (a manager may still move one "
              "of those later).",
    scope="meetings of DELETED series",
    counterexample="The weekly meeting is deleted but next Monday's occurrence still shows in everyone's list and "
                   "still accepts check-ins.",
    db=(SERIES_TERMINAL_TRIGGER,),
    app="delete_series locks the series FOR UPDATE, marks it DELETED and moves its not-started meetings to "
        "DELETED in one transaction.",
    error_code="SERIES_NOT_FOUND",
    concurrency="Series row lock; a concurrent reschedule or update waits and then finds it DELETED.",
    detector=f"""
        SELECT m.id, m.series_id::text FROM meeting_attendance.meetings m
          JOIN meeting_attendance.meeting_series s ON s.id = m.series_id
         WHERE s.status = 'DELETED' AND m.status <> 'DELETED' AND m.start_time > s.deleted_at
           AND m.schedule_changed_at < s.deleted_at
        UNION ALL {_trigger_present('meeting_series', SERIES_TERMINAL_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-18",
    domain=DOMAIN,
    statement="Every series' rule has COUNT or UNTIL, a daily, weekly, monthly or yearly frequency, no BYHOUR, "
              "BYMINUTE or BYSECOND, and at most TENET_SERIES_MAX_OCCURRENCES occurrences.",
    scope="meeting_attendance.meeting_series",
    counterexample="FREQ=MINUTELY without an end generating millions of meetings in one request.",
    db=("ck_meeting_series_rrule_shape",),
    app="Parsed by dateutil's rrulestr with the series' start; the occurrence list is computed before any write "
        "(RECURRENCE_INVALID, RECURRENCE_TOO_LONG).",
    error_code="RECURRENCE_TOO_LONG",
    concurrency="Not applicable.",
    # 2000 is the ceiling any configuration of TENET_SERIES_MAX_OCCURRENCES allows.
    detector="""
        SELECT series_id::text, count(*) FROM meeting_attendance.meetings WHERE series_id IS NOT NULL
         GROUP BY series_id HAVING count(*) > 2000
    """,
)

register(
    id="MA-INV-19",
    domain=DOMAIN,
    statement="A deleted account is on no required-attendee list of a meeting that had not started when it was "
              "deleted, on no list of a live series and on no live template, and holds no PENDING upload task; "
              "its past attendee rows, attendances, uploads and audit rows are kept (reports of past meetings still "
              "count it).",
    scope="attendee tables with iam.user_account",
    counterexample="Next week's report counts a deleted employee as absent; a deleted employee is copied into "
                   "every new occurrence of a series.",
    db=(),
    db_reason="a rule across schemas kept by identity's deletion transaction and this domain's event handler",
    app="The handler of identity's AccountDeleted event (events.py) removes the account from those lists, in "
        "identity's transaction, under the account's row lock.",
    error_code=None,
    concurrency="Attendee additions share-lock the account (MA-INV-04); deletion holds it FOR UPDATE.",
    detector="""
        SELECT 'meeting' AS list, r.meeting_id::text AS parent_id, r.user_id
          FROM meeting_attendance.meeting_required_attendees r
          JOIN meeting_attendance.meetings m ON m.id = r.meeting_id
          JOIN iam.user_account u ON u.id = r.user_id
         WHERE u.status = 'deleted' AND m.status <> 'DELETED' AND m.start_time > u.deleted_at
        UNION ALL
        SELECT 'series', s.series_id::text, s.user_id FROM meeting_attendance.series_required_attendees s
          JOIN meeting_attendance.meeting_series ms ON ms.id = s.series_id
          JOIN iam.user_account u ON u.id = s.user_id
         WHERE u.status = 'deleted' AND ms.status = 'ACTIVE'
        UNION ALL
        SELECT 'template', t.template_id::text, t.user_id FROM meeting_attendance.template_attendees t
          JOIN meeting_attendance.templates tp ON tp.id = t.template_id
          JOIN iam.user_account u ON u.id = t.user_id
         WHERE u.status = 'deleted' AND tp.status = 'ACTIVE'
        UNION ALL
        SELECT 'upload task', t.agenda_item_id::text, t.assignee_user_id
          FROM meeting_attendance.meeting_agenda_item_upload_tasks t
          JOIN iam.user_account u ON u.id = t.assignee_user_id
         WHERE u.status = 'deleted' AND t.status = 'PENDING' AND t.deleted_at IS NULL
    """,
)

register(
    id="MA-INV-20",
    domain=DOMAIN,
    statement="The meeting-attendance audit log is append-only and refers to people by id only: `changes` holds "
              "entityId, entityType, before and after, never personal data, notes or codes.",
    scope="meeting_attendance.audit_logs",
    counterexample="An UPDATE rewriting who excused an attendee; a guest's email in changes.after.",
    db=(AUDIT_APPEND_ONLY_TRIGGER, AUDIT_NO_TRUNCATE_TRIGGER, "ck_audit_logs_changes_shape",
        "ck_audit_logs_action_shape"),
    app="The writer (audit.py) refuses personal keys; the check-in statements write constant keys only.",
    error_code=None,
    concurrency="Inserts only.",
    detector=f"""
        SELECT l.id::text, 'personal key' FROM meeting_attendance.audit_logs l
         WHERE l.changes::text ~* '"({'|'.join(PERSONAL_KEYS)})"\\s*:'
        UNION ALL {_trigger_present('audit_logs', AUDIT_APPEND_ONLY_TRIGGER)}
        UNION ALL {_trigger_present('audit_logs', AUDIT_NO_TRUNCATE_TRIGGER)}
        UNION ALL {_trigger_present('templates', TEMPLATE_TERMINAL_TRIGGER)}
    """,  # noqa: S608  (constants of this module)
)
