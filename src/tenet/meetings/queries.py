"""Reads of meetings, series, templates, attendances, scans and the audit log: one statement per answer, the caller's
right to see the rows decided in the same statement (requireMeetingUser, spec §权限矩阵). Each takes a `Runner` first:
the read path for a GET, the unit of work's statements for the command that answers the same body right after its
change (a POST and the GET of the same thing answer the same body by construction).

Who the caller is for a meeting (`identity`, first match wins): `manager` (system role Administrator or
MeetingManager), `creator`, `organizer`, `attendee` (required), `external` (a signed-in walk-in with a live
attendance). Anyone else does not see the meeting (404).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from tenet.iam.principal import Principal
from tenet.kernel.http import API_PREFIX
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner
from tenet.meetings import codes, errors, times
from tenet.meetings.codes import CheckInCodes
from tenet.meetings.models import MEETING_ID_PATTERN
from tenet.meetings.permissions import MANAGER_ROLES, TABLE, Action, Identity

_MEETING_ID = re.compile(MEETING_ID_PATTERN)  # the CHECK's pattern, so matched whole: `re`'s `$` passes a final "\n"
BASE = API_PREFIX + "/meeting-attendance"


def valid_meeting_id(meeting_id: str) -> str:
    """A malformed id answers 404 without a query (MA-INV-01)."""
    if not _MEETING_ID.fullmatch(meeting_id):
        raise errors.MeetingNotFound()
    return meeting_id


def is_manager(principal: Principal) -> bool:
    return bool(principal.roles & MANAGER_ROLES)


def identity(row: Row, principal: Principal) -> Identity | None:
    if is_manager(principal):
        return Identity.MANAGER
    if row["created_by_id"] == principal.id:
        return Identity.CREATOR
    if row["organizer_id"] == principal.id:
        return Identity.ORGANIZER
    if row["is_required"]:
        return Identity.ATTENDEE
    if row.get("my_attendance_id") is not None:
        return Identity.EXTERNAL
    return None


def require(row: Row | None, principal: Principal, action: Action) -> Identity:
    """404 unless the caller sees the meeting; 403 MEETING_ACTION_FORBIDDEN unless their identity may `action`."""
    if row is None:
        raise errors.MeetingNotFound()
    who = identity(row, principal)
    if who is None:
        raise errors.MeetingNotFound()
    if who not in TABLE[action]:
        raise errors.MeetingActionForbidden(action=action.value, identity=who.value)
    return who


# A meeting's attendance summary (`s.present`, ...): who counted among the required, the guests and the walk-ins
# (a user attending without being required). One definition for the meeting's read and the manager's home.
ATTENDANCE_COUNTS = """\
      LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE a.status = 'PRESENT' AND r.user_id IS NOT NULL) AS present,
               count(*) FILTER (WHERE a.status = 'LATE' AND r.user_id IS NOT NULL) AS late,
               count(*) FILTER (WHERE a.status = 'EXCUSED' AND r.user_id IS NOT NULL) AS excused,
               count(*) FILTER (WHERE a.subject_type = 'GUEST') AS guests,
               count(*) FILTER (WHERE a.subject_type = 'USER' AND r.user_id IS NULL) AS walk_ins
          FROM meeting_attendance.attendances a
          LEFT JOIN meeting_attendance.meeting_required_attendees r
                 ON r.meeting_id = a.meeting_id AND r.user_id = a.user_id
         WHERE a.meeting_id = m.id AND a.status <> 'VOIDED') s ON TRUE
"""

MEETING_SQL = f"""
    SELECT m.id, m.title, m.description, m.location, m.online_link, m.city, m.start_time, m.end_time, m.timezone,
           m.organizer_id, o.display_name AS organizer_name, m.late_grace_minutes, m.checkin_opens_minutes_before,
           m.checkin_closes_at, m.rotating_online_code, m.offline_checkin_enabled, m.series_id,
           m.series_occurrence_date, m.is_exception, m.template_id, m.status, m.cancelled_at, m.cancel_reason,
           m.created_by_id, m.created_at, m.updated_at, m.version,
           EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                    WHERE r.meeting_id = m.id AND r.user_id = %(caller)s) AS is_required,
           mine.id AS my_attendance_id, mine.status AS my_attendance_status, mine.checked_in_at AS my_checked_in_at,
           (SELECT count(*) FROM meeting_attendance.meeting_required_attendees r WHERE r.meeting_id = m.id)
             AS required_count,
           s.present, s.late, s.excused, s.guests, s.walk_ins,
           (SELECT max(q.generated_at) FROM meeting_attendance.meeting_qr_codes q WHERE q.meeting_id = m.id)
             AS codes_generated_at
      FROM meeting_attendance.meetings m
      JOIN iam.user_account o ON o.id = m.organizer_id
      LEFT JOIN meeting_attendance.attendances mine
             ON mine.meeting_id = m.id AND mine.user_id = %(caller)s AND mine.status <> 'VOIDED'
{ATTENDANCE_COUNTS}     WHERE m.id = %(id)s AND m.status <> 'DELETED'
"""  # noqa: S608 (built from this module's constant; values are bound parameters)


def check_in_window(row: Row, now: datetime) -> dict[str, Any]:
    opens, closes = times.window(row["start_time"], row["end_time"], row["checkin_opens_minutes_before"],
                                 row["checkin_closes_at"])
    modes = ["online", "offline"] if row["offline_checkin_enabled"] else ["online"]
    return {"opens_at": opens, "closes_at": closes, "open": row["status"] == "ACTIVE" and opens <= now < closes,
            "modes": modes, "requires_code": row["rotating_online_code"]}


def code_refs(meeting_id: str, generated_at: datetime, base_url: str, *, offline_code: str) -> dict[str, Any]:
    """Where each code leads (the offline one with the meeting's offline code: what its image encodes)."""
    def url(mode: str) -> str:
        address = codes.check_in_url(base_url, meeting_id, mode)
        return codes.with_code(address, offline_code) if mode == "offline" else address

    return {mode: {"check_in_url": url(mode),
                   "svg_url": f"{BASE}/meetings/{meeting_id}/qrcode?mode={mode}&format=svg",
                   "png_url": f"{BASE}/meetings/{meeting_id}/qrcode?mode={mode}&format=png",
                   "generated_at": generated_at} for mode in codes.MODES}


async def meeting(reads: Runner, *, meeting_id: str, principal: Principal, now: datetime, base_url: str,
                  signer: CheckInCodes) -> dict[str, Any]:
    """The MeetingRead of one meeting, with what the caller's identity may see; for an external attendee the
    restricted view (MeetingExternalRead, `view: restricted`)."""
    row = await reads.one(MEETING_SQL, {"id": valid_meeting_id(meeting_id), "caller": principal.id})
    who = require(row, principal, Action.VIEW)
    assert row is not None
    if who not in TABLE[Action.VIEW_DETAILS]:
        return {**public_view(row, now), "view": "restricted", "my_identity": who.value,
                "my_attendance": _my_attendance(row)}
    insider = who in TABLE[Action.SHOW_CODES]
    required = row["required_count"]
    summary = None
    if insider:
        summary = {"expected": required, "present": row["present"], "late": row["late"], "excused": row["excused"],
                   "absent": required - row["present"] - row["late"] - row["excused"], "guests": row["guests"],
                   "walk_ins": row["walk_ins"]}
    refs = {}
    if insider and row["codes_generated_at"]:
        refs = code_refs(row["id"], row["codes_generated_at"], base_url, offline_code=signer.offline_code(row["id"]))
    return {
        **{k: row[k] for k in ("id", "title", "description", "location", "online_link", "city", "start_time",
                               "end_time", "timezone", "late_grace_minutes", "checkin_opens_minutes_before",
                               "checkin_closes_at", "rotating_online_code", "offline_checkin_enabled", "series_id",
                               "series_occurrence_date", "is_exception", "template_id", "cancelled_at",
                               "cancel_reason", "created_by_id", "created_at", "updated_at", "version")},
        "start_time_local": times.local(row["start_time"], row["timezone"]),
        "end_time_local": times.local(row["end_time"], row["timezone"]),
        "status": times.clock_status(row["status"], row["start_time"], row["end_time"], now),
        "organizer": {"user_id": row["organizer_id"], "display_name": row["organizer_name"]},
        "check_in": check_in_window(row, now),
        "required_attendee_count": required,
        "my_identity": who.value,
        "my_attendance": _my_attendance(row),
        "attendance_summary": summary,
        "qr_code_online": refs.get("online"),
        "qr_code_offline": refs.get("offline"),
    }


PUBLIC_SQL = """
    SELECT id, title, location, city, start_time, end_time, timezone, status, late_grace_minutes,
           checkin_opens_minutes_before, checkin_closes_at, offline_checkin_enabled, rotating_online_code
      FROM meeting_attendance.meetings WHERE id = %(id)s AND status <> 'DELETED'
"""


def public_view(row: Row, now: datetime) -> dict[str, Any]:
    """What the meeting id reveals to anyone (PublicMeetingRead), and so all an external attendee sees of it."""
    return {**{k: row[k] for k in ("id", "title", "location", "city", "start_time", "end_time", "timezone",
                                   "late_grace_minutes")},
            "start_time_local": times.local(row["start_time"], row["timezone"]),
            "end_time_local": times.local(row["end_time"], row["timezone"]),
            "status": times.clock_status(row["status"], row["start_time"], row["end_time"], now),
            "check_in": check_in_window(row, now)}


def _my_attendance(row: Row) -> dict[str, Any] | None:
    if row["my_attendance_id"] is None:
        return None
    return {"attendance_id": row["my_attendance_id"], "status": row["my_attendance_status"],
            "checked_in_at": row["my_checked_in_at"]}


async def public_meeting(reads: Runner, *, meeting_id: str, now: datetime) -> dict[str, Any]:
    row = await reads.one(PUBLIC_SQL, {"id": valid_meeting_id(meeting_id)})
    if row is None:
        raise errors.MeetingNotFound()
    return public_view(row, now)


# --- lists -----------------------------------------------------------------------------------------------

LIST_KEYSET = SqlKeyset(("m.start_time", "m.id"), (datetime, str))
_LIST_COLUMNS = """
    m.id, m.title, m.location, m.city, m.start_time, m.end_time, m.timezone, m.status, m.series_id,
    m.organizer_id, m.created_by_id, mine.status AS my_attendance_status,
    EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
             WHERE r.meeting_id = m.id AND r.user_id = %(caller)s) AS is_required,
    mine.id AS my_attendance_id
"""
# "Mine": what the caller created, organizes, is required at, or checked in to (each arm on its own index).
MINE_SQL = f"""
    WITH k AS (
        SELECT meeting_id AS id FROM meeting_attendance.meeting_required_attendees WHERE user_id = %(caller)s
        UNION SELECT id FROM meeting_attendance.meetings WHERE organizer_id = %(caller)s AND status <> 'DELETED'
        UNION SELECT id FROM meeting_attendance.meetings WHERE created_by_id = %(caller)s AND status <> 'DELETED'
        UNION SELECT meeting_id FROM meeting_attendance.attendances WHERE user_id = %(caller)s AND status <> 'VOIDED'
    )
    SELECT {_LIST_COLUMNS}
      FROM k JOIN meeting_attendance.meetings m ON m.id = k.id
      LEFT JOIN meeting_attendance.attendances mine
             ON mine.meeting_id = m.id AND mine.user_id = %(caller)s AND mine.status <> 'VOIDED'
     WHERE m.status <> 'DELETED' AND {{filters}} AND {{after}}
     ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)
ALL_SQL = f"""
    SELECT {_LIST_COLUMNS}
      FROM meeting_attendance.meetings m
      LEFT JOIN meeting_attendance.attendances mine
             ON mine.meeting_id = m.id AND mine.user_id = %(caller)s AND mine.status <> 'VOIDED'
     WHERE m.status <> 'DELETED' AND {{filters}} AND {{after}}
     ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)
STATUS_FILTERS = {
    "SCHEDULED": "m.status = 'ACTIVE' AND m.start_time > %(now)s",
    "IN_PROGRESS": "m.status = 'ACTIVE' AND m.start_time <= %(now)s AND m.end_time > %(now)s",
    "COMPLETED": "m.status = 'ACTIVE' AND m.end_time <= %(now)s",
    "CANCELLED": "m.status = 'CANCELLED'",
}


def summary_row(row: Row, principal: Principal, now: datetime) -> dict[str, Any]:
    who = identity(row, principal)
    restricted = who is None or who not in TABLE[Action.VIEW_DETAILS]  # the list row of the restricted view
    return {**{k: row[k] for k in ("id", "title", "location", "city", "start_time", "end_time", "timezone",
                                   "my_attendance_status")},
            "series_id": None if restricted else row["series_id"],
            "organizer_id": None if restricted else row["organizer_id"],
            "start_time_local": times.local(row["start_time"], row["timezone"]),
            "status": times.clock_status(row["status"], row["start_time"], row["end_time"], now),
            "my_identity": who.value if who else "none"}


# A meeting whose full view the caller has (required, organizer or creator; managers see every one): filters on
# what the restricted view hides (the series, the organizer) match only these, so a walk-in cannot learn them by
# filtering.
DETAILS_VISIBLE = """(m.organizer_id = %(caller)s OR m.created_by_id = %(caller)s
    OR EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees v
                WHERE v.meeting_id = m.id AND v.user_id = %(caller)s))"""
# The organizer filter of the console: the text in the organizer's name or email (case-insensitive; `%`, `_` and
# backslash literal), as the people search matches.
ORGANIZER_FILTER = r"""EXISTS (SELECT 1 FROM iam.user_account o WHERE o.id = m.organizer_id
    AND (o.display_name ILIKE %(organizer)s ESCAPE '\' OR o.email_normalized ILIKE %(organizer)s ESCAPE '\'))"""


def contains_pattern(text: str) -> str:
    """An ILIKE pattern for `text` anywhere, its `%`, `_` and backslash taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


async def meetings(reads: Runner, *, principal: Principal, scope: str, start: datetime | None, end: datetime | None,
                   status: str | None, series_id: uuid.UUID | None, page: PageParams,
                   now: datetime, city: str | None = None,
                   organizer: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Meetings by start time (keyset). Managers may ask for all; everyone else sees their own. `city` matches the
    meeting's city case-insensitively; `organizer` is text in the organizer's name or email."""
    filters, params = ["TRUE"], {"caller": principal.id, "now": now}
    city, organizer = (city or "").strip() or None, (organizer or "").strip() or None
    if (series_id is not None or organizer) and not is_manager(principal):
        filters.append(DETAILS_VISIBLE)
    if city:
        filters.append("lower(m.city) = lower(%(city)s)")
        params["city"] = city
    if organizer:
        filters.append(ORGANIZER_FILTER)
        params["organizer"] = contains_pattern(organizer)
    if start is not None:
        filters.append("m.start_time >= %(from)s")
        params["from"] = start
    if end is not None:
        filters.append("m.start_time < %(to)s")
        params["to"] = end
    if status is not None:
        filters.append(STATUS_FILTERS[status])
    if series_id is not None:
        filters.append("m.series_id = %(series_id)s")
        params["series_id"] = series_id
    after, after_params = LIST_KEYSET.after(page)
    template = ALL_SQL if scope == "all" and is_manager(principal) else MINE_SQL
    rows = await reads.all(template.format(filters=" AND ".join(filters), after=after, order=LIST_KEYSET.order_by),
                           {**params, **after_params, "limit": LIST_KEYSET.fetch_limit(page)})
    items, cursor = LIST_KEYSET.page(rows, page, key=lambda r: (r["start_time"], r["id"]))
    return [summary_row(r, principal, now) for r in items], cursor


ATTENDEES_KEYSET = SqlKeyset(("u.display_name", "r.user_id"), (str, uuid.UUID))
ATTENDEES_SQL = """
    WITH caller AS ({meeting}),
    page AS (
        SELECT r.user_id, u.display_name, u.email, u.status AS account_status, r.added_at
          FROM meeting_attendance.meeting_required_attendees r
          JOIN iam.user_account u ON u.id = r.user_id
         WHERE r.meeting_id = %(id)s AND {after} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s)
    SELECT caller.*, page.user_id AS attendee_id, page.display_name AS attendee_name, page.email AS attendee_email,
           page.account_status, page.added_at
      FROM caller LEFT JOIN page ON TRUE ORDER BY page.display_name, page.user_id
"""


async def required_attendees(reads: Runner, *, meeting_id: str, principal: Principal,
                             page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    after, params = ATTENDEES_KEYSET.after(page)
    sql = ATTENDEES_SQL.format(meeting=MEETING_SQL, after=after, order=ATTENDEES_KEYSET.order_by)
    rows = await reads.all(sql, {"id": valid_meeting_id(meeting_id), "caller": principal.id,
                                 "limit": ATTENDEES_KEYSET.fetch_limit(page), **params})
    who = require(rows[0] if rows else None, principal, Action.VIEW)
    if who == Identity.EXTERNAL:
        raise errors.MeetingActionForbidden(action="list-attendees", identity=who.value)
    found = [{"user_id": r["attendee_id"], "display_name": r["attendee_name"], "email": r["attendee_email"],
              "account_status": r["account_status"], "added_at": r["added_at"]}
             for r in rows if r["attendee_id"] is not None]
    items, cursor = ATTENDEES_KEYSET.page(found, page, key=lambda r: (r["display_name"], r["user_id"]))
    return items, cursor


CODE_SQL = """
    WITH caller AS ({meeting})
    SELECT caller.*, q.payload, q.svg, q.png, q.generated_at
      FROM caller LEFT JOIN meeting_attendance.meeting_qr_codes q ON q.meeting_id = caller.id AND q.mode = %(mode)s
"""


async def qr_code(reads: Runner, *, meeting_id: str, mode: str, principal: Principal) -> Row:
    """The stored code of one mode (managers, the creator and the organizer: they run the room, D-06)."""
    row = await reads.one(CODE_SQL.format(meeting=MEETING_SQL), {"id": valid_meeting_id(meeting_id),
                                                                  "caller": principal.id, "mode": mode})
    require(row, principal, Action.SHOW_CODES)
    assert row is not None
    if row["payload"] is None:
        raise errors.MeetingNotFound()
    return row


# --- series and templates --------------------------------------------------------------------------------

SERIES_COLUMNS = """s.id, s.title, s.description, s.location, s.online_link, s.city, s.timezone, s.rrule, s.start_date,
       s.start_local_time, s.duration_minutes, s.exdates, s.organizer_id, s.late_grace_minutes,
       s.checkin_opens_minutes_before, s.rotating_online_code, s.offline_checkin_enabled, s.template_id, s.status,
       s.created_by_id, s.created_at, s.updated_at, s.version,
       ARRAY(SELECT user_id FROM meeting_attendance.series_required_attendees r WHERE r.series_id = s.id
             ORDER BY user_id) AS required_attendee_ids"""
SERIES_SQL = f"""
    SELECT {SERIES_COLUMNS},
           (SELECT coalesce(json_agg(json_build_object('meeting_id', m.id, 'occurrence_date', m.series_occurrence_date,
                                                       'start_time', m.start_time, 'end_time', m.end_time,
                                                       'status', m.status, 'is_exception', m.is_exception)
                                     ORDER BY m.series_occurrence_date), '[]')
              FROM meeting_attendance.meetings m WHERE m.series_id = s.id AND m.status <> 'DELETED') AS occurrences
      FROM meeting_attendance.meeting_series s WHERE s.id = %(id)s AND s.status = 'ACTIVE'
"""  # noqa: S608  (constants of this module)
SERIES_KEYSET = SqlKeyset(("s.created_at", "s.id"), (datetime, uuid.UUID))
SERIES_LIST_SQL = f"""
    SELECT {SERIES_COLUMNS} FROM meeting_attendance.meeting_series s
     WHERE s.status = 'ACTIVE' AND {{scope}} AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)


def _occurrences(row: Row, now: datetime) -> list[dict[str, Any]]:
    found = []
    for item in row["occurrences"]:
        start, end = datetime.fromisoformat(item["start_time"]), datetime.fromisoformat(item["end_time"])
        found.append({"meeting_id": item["meeting_id"], "occurrence_date": item["occurrence_date"],
                      "start_time": start, "is_exception": item["is_exception"],
                      "status": times.clock_status(item["status"], start, end, now)})
    return found


async def series(reads: Runner, *, series_id: uuid.UUID, principal: Principal, now: datetime) -> dict[str, Any]:
    """A series with its occurrences (SeriesRead). Managers see every series, others only the ones they organize
    (a Leader's team meeting); 404 otherwise."""
    row = await reads.one(SERIES_SQL, {"id": series_id})
    if row is None or not (is_manager(principal) or row["organizer_id"] == principal.id):
        raise errors.SeriesNotFound()
    return {**row, "occurrences": _occurrences(row, now)}


async def series_page(reads: Runner, *, principal: Principal, page: PageParams) -> tuple[list[Row], str | None]:
    """Series by creation (managers: all; others: the ones they organize)."""
    after, after_params = SERIES_KEYSET.after(page)
    scope = "TRUE" if is_manager(principal) else "s.organizer_id = %(caller)s"
    rows = await reads.all(SERIES_LIST_SQL.format(scope=scope, after=after, order=SERIES_KEYSET.order_by),
                           {"caller": principal.id, "limit": SERIES_KEYSET.fetch_limit(page), **after_params})
    return SERIES_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))


TEMPLATE_COLUMNS = """t.id, t.label, t.title, t.description, t.location, t.online_link, t.city, t.timezone,
       t.duration_minutes, t.late_grace_minutes, t.checkin_opens_minutes_before, t.rotating_online_code,
       t.offline_checkin_enabled, t.created_by_id, t.created_at, t.updated_at, t.version,
       ARRAY(SELECT user_id FROM meeting_attendance.template_attendees a WHERE a.template_id = t.id
             ORDER BY user_id) AS attendee_user_ids"""
TEMPLATE_SQL = f"""
    SELECT {TEMPLATE_COLUMNS} FROM meeting_attendance.templates t WHERE t.id = %(id)s AND t.status = 'ACTIVE'
"""  # noqa: S608  (constants of this module)
TEMPLATE_KEYSET = SqlKeyset(("lower(t.label)", "t.id"), (str, uuid.UUID))
TEMPLATE_LIST_SQL = f"""
    SELECT {TEMPLATE_COLUMNS}, lower(t.label) AS sort_label FROM meeting_attendance.templates t
     WHERE t.status = 'ACTIVE' AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)


async def template(reads: Runner, *, template_id: uuid.UUID) -> Row:
    row = await reads.one(TEMPLATE_SQL, {"id": template_id})
    if row is None:
        raise errors.TemplateNotFound()
    return row


async def templates(reads: Runner, *, page: PageParams) -> tuple[list[Row], str | None]:
    """Live templates by label."""
    after, after_params = TEMPLATE_KEYSET.after(page)
    rows = await reads.all(TEMPLATE_LIST_SQL.format(after=after, order=TEMPLATE_KEYSET.order_by),
                           {"limit": TEMPLATE_KEYSET.fetch_limit(page), **after_params})
    return TEMPLATE_KEYSET.page(rows, page, key=lambda r: (r["sort_label"], r["id"]))


# --- attendances and scans ---------------------------------------------------------------------------

ATTENDANCES_KEYSET = SqlKeyset(("grp", "sort_name", "sort_key"), (int, str, str))
ATTENDANCES_SQL = """
    WITH caller AS ({meeting}),
    listed AS (
        SELECT 0 AS grp, u.display_name AS sort_name, r.user_id::text AS sort_key, a.id, 'USER' AS subject_type,
               r.user_id, NULL::uuid AS guest_id, u.display_name, u.email, NULL AS organization, true AS required,
               coalesce(a.status, 'ABSENT') AS status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.meeting_required_attendees r
          JOIN iam.user_account u ON u.id = r.user_id
          LEFT JOIN meeting_attendance.attendances a
                 ON a.meeting_id = r.meeting_id AND a.user_id = r.user_id AND a.status <> 'VOIDED'
         WHERE r.meeting_id = %(id)s
        UNION ALL
        SELECT 1, u.display_name, a.user_id::text, a.id, 'USER', a.user_id, NULL, u.display_name, u.email, NULL,
               false, a.status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.attendances a
          JOIN iam.user_account u ON u.id = a.user_id
         WHERE a.meeting_id = %(id)s AND a.status <> 'VOIDED'
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                            WHERE r.meeting_id = a.meeting_id AND r.user_id = a.user_id)
        UNION ALL
        SELECT 2, coalesce(g.name, ''), g.id::text, a.id, 'GUEST', NULL, g.id, g.name, g.email, g.organization,
               false, a.status, a.status_source, a.mode, a.checked_in_at, a.version
          FROM meeting_attendance.attendances a
          JOIN meeting_attendance.guests g ON g.id = a.guest_id
         WHERE a.meeting_id = %(id)s AND a.status <> 'VOIDED'),
    page AS (
        SELECT listed.*, (SELECT c.note FROM meeting_attendance.attendance_corrections c
                           WHERE c.attendance_id = listed.id ORDER BY c.occurred_at DESC, c.id LIMIT 1) AS note
          FROM listed
         WHERE {filters} AND {after} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s)
    SELECT caller.id AS meeting_row, caller.created_by_id, caller.organizer_id, caller.is_required,
           caller.my_attendance_id, page.*
      FROM caller LEFT JOIN page ON TRUE ORDER BY page.grp, page.sort_name, page.sort_key
"""


async def attendances(reads: Runner, *, meeting_id: str, principal: Principal, status: str | None,
                      subject_type: str | None, page: PageParams,
                      attendance_id: uuid.UUID | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Required attendees (ABSENT when they have no live attendance), then walk-ins, then guests."""
    filters: list[str] = ["TRUE"]
    params: dict[str, object] = {}
    if attendance_id is not None:
        filters.append("listed.id = %(attendance_id)s")
        params["attendance_id"] = attendance_id
    if status is not None:
        filters.append("listed.status = %(status)s")
        params["status"] = status
    if subject_type is not None:
        filters.append("listed.subject_type = %(subject_type)s")
        params["subject_type"] = subject_type
    after, after_params = ATTENDANCES_KEYSET.after(page)
    sql = ATTENDANCES_SQL.format(meeting=MEETING_SQL, filters=" AND ".join(filters), after=after,
                                 order=ATTENDANCES_KEYSET.order_by)
    rows = await reads.all(sql, {"id": valid_meeting_id(meeting_id), "caller": principal.id,
                                 "limit": ATTENDANCES_KEYSET.fetch_limit(page), **params, **after_params})
    require(rows[0] if rows else None, principal, Action.LIST_ATTENDANCES)
    found = [r for r in rows if r["grp"] is not None]
    items, cursor = ATTENDANCES_KEYSET.page(found, page, key=lambda r: (r["grp"], r["sort_name"], r["sort_key"]))
    return [{**r, "meeting_id": meeting_id} for r in items], cursor


SCANS_KEYSET = SqlKeyset(("s.id",), (int,), descending=True)
SCANS_SQL = """
    WITH caller AS ({meeting}),
    page AS (
        SELECT s.id, s.occurred_at, s.channel, s.mode, s.user_id, s.guest_id, s.attendance_id, s.outcome, s.reason
          FROM meeting_attendance.checkin_scans s
         WHERE s.meeting_id = %(id)s AND {filters} AND {after} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s)
    SELECT caller.id AS meeting_row, caller.created_by_id, caller.organizer_id, caller.is_required,
           caller.my_attendance_id, page.id AS scan_id, page.*
      FROM caller LEFT JOIN page ON TRUE ORDER BY page.id DESC
"""


async def scans(reads: Runner, *, meeting_id: str, principal: Principal, outcome: str | None,
                page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    """Every scan of a meeting, newest first (device ids and addresses are not shown)."""
    filters, params = "TRUE", {}
    if outcome is not None:
        filters, params = "s.outcome = %(outcome)s", {"outcome": outcome}
    after, after_params = SCANS_KEYSET.after(page)
    sql = SCANS_SQL.format(meeting=MEETING_SQL, filters=filters, after=after, order=SCANS_KEYSET.order_by)
    rows = await reads.all(sql, {"id": valid_meeting_id(meeting_id), "caller": principal.id,
                                 "limit": SCANS_KEYSET.fetch_limit(page), **params, **after_params})
    require(rows[0] if rows else None, principal, Action.LIST_ATTENDANCES)
    found = [r for r in rows if r["scan_id"] is not None]
    items, cursor = SCANS_KEYSET.page(found, page, key=lambda r: (r["scan_id"],))
    return items, cursor


# --- the audit log ---------------------------------------------------------------------------------------

AUDIT_KEYSET = SqlKeyset(("l.id",), (int,), descending=True)
AUDIT_SQL = """
    SELECT l.id, l.occurred_at, l.action, l.resource, l.resource_id, l.meeting_id, l.series_id, l.actor_type,
           l.actor_id, l.request_id, l.changes
      FROM meeting_attendance.audit_logs l
     WHERE {filters} AND {after} ORDER BY {order} LIMIT %(limit)s
"""
_AUDIT_FILTERS = {
    "resource": "l.resource = %(resource)s",
    "action": "l.action = %(action)s",
    "meeting_id": "l.meeting_id = %(meeting_id)s",
    "series_id": "l.series_id = %(series_id)s",
    "actor_id": "l.actor_id = %(actor_id)s",
    "from": "l.occurred_at >= %(from)s",
    "to": "l.occurred_at < %(to)s",
}


async def audit_logs(reads: Runner, *, filters: dict[str, Any], page: PageParams) -> tuple[list[Row], str | None]:
    """The audit log, newest first; `filters` names the values to match (keys of `_AUDIT_FILTERS`, None: any)."""
    given = {name: value for name, value in filters.items() if value is not None}
    clauses = ["TRUE", *(_AUDIT_FILTERS[name] for name in given)]
    after, after_params = AUDIT_KEYSET.after(page)
    rows = await reads.all(AUDIT_SQL.format(filters=" AND ".join(clauses), after=after, order=AUDIT_KEYSET.order_by),
                           {**given, **after_params, "limit": AUDIT_KEYSET.fetch_limit(page)})
    return AUDIT_KEYSET.page(rows, page, key=lambda r: (r["id"],))


# --- what the console asks for (issue 18) -----------------------------------------------------------------

# People to add as required attendees: active accounts whose name or email contains the text (published columns
# of identity), by name; `%`, `_` and `\` in the text are literal.
PEOPLE_SQL = r"""
    SELECT u.id AS user_id, u.display_name, u.email
      FROM iam.user_account u
     WHERE u.status = 'active'
       AND (u.display_name ILIKE %(pattern)s ESCAPE '\' OR u.email_normalized ILIKE %(pattern)s ESCAPE '\')
     ORDER BY lower(u.display_name), u.id LIMIT %(limit)s
"""


async def people(reads: Runner, *, text: str, limit: int = 20) -> list[Row]:
    cleaned = text.strip()
    if not cleaned:
        return []
    escaped = cleaned.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return await reads.all(PEOPLE_SQL, {"pattern": f"%{escaped}%", "limit": limit})


async def display_names(reads: Runner, *, user_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The current names of accounts (a published column of identity), for ids an audit trail names; one statement."""
    if not user_ids:
        return {}
    rows = await reads.all("SELECT u.id, u.display_name FROM iam.user_account u WHERE u.id = ANY(%(ids)s)",
                           {"ids": user_ids})
    return {r["id"]: r["display_name"] for r in rows}


# The attendance counts of several meetings in one statement (the manager's home): the summary MEETING_SQL
# computes for one meeting, for each id.
COUNTS_SQL = f"""
    SELECT m.id, (SELECT count(*) FROM meeting_attendance.meeting_required_attendees r WHERE r.meeting_id = m.id)
             AS expected,
           s.present, s.late, s.excused, s.guests, s.walk_ins
      FROM meeting_attendance.meetings m
{ATTENDANCE_COUNTS}     WHERE m.id = ANY(%(ids)s) AND m.status <> 'DELETED'
"""  # noqa: S608 (built from this module's constant; values are bound parameters)


async def attendance_counts(reads: Runner, *, principal: Principal, meeting_ids: list[str]) -> dict[str, Row]:
    """Counts per meeting (expected, present, late, excused, absent, guests, walk-ins), for managers only: the
    identities that see a meeting's summary (SHOW_CODES) elsewhere are per meeting, so others get nothing here."""
    if not meeting_ids or not is_manager(principal):
        return {}
    rows = await reads.all(COUNTS_SQL, {"ids": meeting_ids})
    return {r["id"]: {**r, "absent": r["expected"] - r["present"] - r["late"] - r["excused"]} for r in rows}


async def all_required_ids(reads: Runner, *, meeting_id: str, principal: Principal) -> list[uuid.UUID]:
    """Every required attendee's id (the list a PUT replaces), page after page of the GET's query."""
    ids: list[uuid.UUID] = []
    cursor: str | None = None
    while True:
        rows, cursor = await required_attendees(reads, meeting_id=meeting_id, principal=principal,
                                                page=PageParams(limit=200, cursor=cursor))
        ids.extend(r["user_id"] for r in rows)
        if cursor is None:
            return ids
