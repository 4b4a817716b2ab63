"""Reads of the agenda: one statement per answer, the caller's right to see the rows decided in the same statement
(a `caller` CTE; no row = 404), as the meetings core does. Each takes a `Runner` first: the read path for a GET, the
unit of work's statements for a command that answers what it wrote as the agenda's GET shows it.

Who the caller is for the meeting (first match): manager (Administrator / MeetingManager), creator, organizer,
attendee (required), external (a signed-in walk-in with a live attendance). Participants (the first four) get the
full agenda; externals the restricted one, whose columns the statement itself leaves NULL (spec: 后端 DTO 剥离).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tenet.iam.principal import Principal
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import errors
from tenet.meetings.agenda.models import NO_DUE
from tenet.meetings.permissions import MANAGER_ROLES, TABLE, Action
from tenet.meetings.queries import BASE, valid_meeting_id

PARTICIPANTS = tuple(sorted(identity.value for identity in TABLE[Action.VIEW_DETAILS]))  # the full view
_IDENTITY = """
    CASE WHEN %(manager)s THEN 'manager'
         WHEN m.created_by_id = %(caller)s THEN 'creator'
         WHEN m.organizer_id = %(caller)s THEN 'organizer'
         WHEN EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                       WHERE r.meeting_id = m.id AND r.user_id = %(caller)s) THEN 'attendee'
         WHEN EXISTS (SELECT 1 FROM meeting_attendance.attendances x
                       WHERE x.meeting_id = m.id AND x.user_id = %(caller)s AND x.status <> 'VOIDED') THEN 'external'
    END"""


def caller_params(principal: Principal) -> dict[str, Any]:
    return {"caller": principal.id, "manager": bool(principal.roles & MANAGER_ROLES)}


def download_url(kind: str, attachment_id: object) -> str:
    return f"{BASE}/attachments/{kind}/{attachment_id}/download"


_ATTACHMENT_JSON = """jsonb_build_object('id', a.id, 'uploaded_by_id', a.uploaded_by_id, 'filename', a.filename,
    'mime_type', a.mime_type, 'size', a.size::text, 'sha256', a.sha256, 'uploaded_at', a.uploaded_at"""

AGENDA_SQL = f"""
    WITH v AS (
        SELECT m.id, m.created_by_id, {_IDENTITY} AS identity FROM meeting_attendance.meetings m
         WHERE m.id = %(id)s AND m.status <> 'DELETED'),
    c AS (
        SELECT v.*, v.identity IN {PARTICIPANTS!r} AS full_view, v.identity IN ('manager', 'creator') AS all_tasks,
               CASE WHEN v.identity IN {PARTICIPANTS!r} THEN
                 EXISTS (SELECT 1 FROM meeting_attendance.audit_logs l
                          WHERE l.meeting_id = v.id AND l.resource IN ('AGENDA_SECTION', 'AGENDA_ITEM', 'UPLOAD_TASK',
                                                                        'ATTACHMENT')
                            AND l.changes @> '{{"agendaModifiedAfterMeetingEnd": true}}') END AS modified_after_end,
               CASE WHEN v.identity IN {PARTICIPANTS!r} THEN
                 (SELECT coalesce(jsonb_agg({_ATTACHMENT_JSON}, 'category', a.category)
                                            ORDER BY a.uploaded_at, a.id), '[]')
                    FROM meeting_attendance.meeting_attachments a WHERE a.meeting_id = v.id AND a.deleted_at IS NULL)
               END AS meeting_attachments
          FROM v WHERE v.identity IS NOT NULL)
    SELECT c.identity, c.full_view, c.modified_after_end, c.meeting_attachments,
           s.id AS section_id, s.sort_order AS section_order, s.title AS section_title,
           s.created_by_id AS section_created_by_id, s.created_at AS section_created_at,
           s.updated_at AS section_updated_at, s.version AS section_version,
           i.id AS item_id, i.sort_order AS item_order, i.title AS item_title,
           CASE WHEN c.full_view THEN i.description END AS description,
           CASE WHEN c.full_view THEN i.code END AS code,
           CASE WHEN c.full_view THEN i.time_minutes END AS time_minutes,
           CASE WHEN c.full_view THEN i.presenter_user_id END AS presenter_user_id,
           CASE WHEN c.full_view THEN p.display_name END AS presenter_name,
           CASE WHEN c.full_view THEN i.category_tag END AS category_tag,
           i.created_by_id AS item_created_by_id, i.created_at AS item_created_at, i.updated_at AS item_updated_at,
           i.version AS item_version,
           CASE WHEN c.full_view AND i.id IS NOT NULL THEN
             (SELECT coalesce(jsonb_agg({_ATTACHMENT_JSON}) ORDER BY a.uploaded_at, a.id), '[]')
                FROM meeting_attendance.meeting_agenda_item_attachments a
               WHERE a.agenda_item_id = i.id AND a.deleted_at IS NULL) END AS attachments,
           CASE WHEN c.full_view AND i.id IS NOT NULL THEN
             (SELECT coalesce(jsonb_agg(jsonb_build_object('id', t.id, 'agenda_item_id', t.agenda_item_id,
                                'assignee_user_id', t.assignee_user_id, 'assigned_by_id', t.assigned_by_id,
                                'status', t.status, 'due_at', t.due_at, 'assigned_at', t.assigned_at,
                                'completed_at', t.completed_at, 'cancelled_at', t.cancelled_at, 'version', t.version)
                              ORDER BY t.assigned_at, t.id), '[]')
                FROM meeting_attendance.meeting_agenda_item_upload_tasks t
               WHERE t.agenda_item_id = i.id AND t.deleted_at IS NULL
                 AND (c.all_tasks OR t.assignee_user_id = %(caller)s)) END AS upload_tasks
      FROM c
      LEFT JOIN meeting_attendance.meeting_agenda_sections s ON s.meeting_id = c.id AND s.deleted_at IS NULL
      LEFT JOIN meeting_attendance.meeting_agenda_items i ON i.section_id = s.id AND i.deleted_at IS NULL
      LEFT JOIN iam.user_account p ON p.id = i.presenter_user_id AND c.full_view
     ORDER BY s.sort_order, i.sort_order
"""  # noqa: S608  (constants of this module)


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _with_urls(kind: str, attachments: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
    return [{**a, **extra, "download_url": download_url(kind, a["id"])} for a in attachments]


async def agenda(reads: Runner, *, meeting_id: str, principal: Principal) -> dict[str, Any]:
    """The agenda of a meeting as the caller may see it: `view` full or restricted (one statement)."""
    rows = await reads.all(AGENDA_SQL, {"id": valid_meeting_id(meeting_id), **caller_params(principal)})
    if not rows:
        raise meeting_errors.MeetingNotFound()
    full = rows[0]["full_view"]
    sections: list[dict[str, Any]] = []
    for row in rows:
        if row["section_id"] is None:
            continue
        if not sections or sections[-1]["id"] != row["section_id"]:
            section: dict[str, Any] = {"id": row["section_id"], "order": row["section_order"],
                                       "title": row["section_title"], "items": []}
            if full:
                section.update(meeting_id=meeting_id, created_by_id=row["section_created_by_id"],
                               created_at=row["section_created_at"], updated_at=row["section_updated_at"],
                               version=row["section_version"])
            sections.append(section)
        if row["item_id"] is None:
            continue
        item: dict[str, Any] = {"id": row["item_id"], "order": row["item_order"], "title": row["item_title"]}
        if full:
            presenter = None
            if row["presenter_user_id"] is not None:
                presenter = {"user_id": row["presenter_user_id"], "display_name": row["presenter_name"]}
            item.update(section_id=row["section_id"], description=row["description"], code=row["code"],
                        time_minutes=row["time_minutes"], presenter=presenter, category_tag=row["category_tag"],
                        created_by_id=row["item_created_by_id"], created_at=row["item_created_at"],
                        updated_at=row["item_updated_at"], version=row["item_version"],
                        attachments=_with_urls("agenda-item", _loads(row["attachments"]),
                                               agenda_item_id=row["item_id"]),
                        upload_tasks=_loads(row["upload_tasks"]))
        sections[-1]["items"].append(item)
    if not full:
        return {"view": "restricted", "meeting_id": meeting_id, "sections": sections}
    return {"view": "full", "meeting_id": meeting_id, "modified_after_meeting_end": bool(rows[0]["modified_after_end"]),
            "sections": sections,
            "meeting_attachments": _with_urls("meeting", _loads(rows[0]["meeting_attachments"]), meeting_id=meeting_id)}


_MEETING_OF = {
    "section": "SELECT meeting_id FROM meeting_attendance.meeting_agenda_sections WHERE id = %(id)s "
               "AND deleted_at IS NULL",
    "item": """
        SELECT s.meeting_id FROM meeting_attendance.meeting_agenda_items i
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
         WHERE i.id = %(id)s AND i.deleted_at IS NULL""",
    "task": """
        SELECT s.meeting_id FROM meeting_attendance.meeting_agenda_item_upload_tasks t
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = t.agenda_item_id
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
         WHERE t.id = %(id)s AND t.deleted_at IS NULL""",
}


async def meeting_of(reads: Runner, kind: str, row_id: uuid.UUID) -> str | None:
    """The meeting of a live section, item or upload task (`kind`); None when there is none."""
    found = await reads.value(_MEETING_OF[kind], {"id": row_id})
    return None if found is None else str(found)


def section_in(found: dict[str, Any], section_id: uuid.UUID) -> dict[str, Any]:
    """One section of an agenda `agenda` answered, as its GET shows it."""
    return next(s for s in found["sections"] if s["id"] == section_id)


def item_in(found: dict[str, Any], item_id: uuid.UUID) -> dict[str, Any]:
    """One item of an agenda `agenda` answered, as its GET shows it."""
    return next(i for s in found["sections"] for i in s["items"] if i["id"] == item_id)


# --- my upload tasks (hot) --------------------------------------------------------------------------------------

NO_DUE_AT = datetime(9999, 12, 31, tzinfo=UTC)
MY_TASKS_KEYSET = SqlKeyset((f"coalesce(t.due_at, '{NO_DUE}'::timestamptz)", "t.id"), (datetime, uuid.UUID))
MY_TASKS_SQL = """
    SELECT t.id, t.status, t.due_at, t.assigned_at, t.completed_at, t.cancelled_at,
           i.id AS item_id, i.title AS item_title, s.id AS section_id, s.title AS section_title,
           m.id AS meeting_id, m.title AS meeting_title, m.start_time, m.timezone, m.status AS meeting_status
      FROM meeting_attendance.meeting_agenda_item_upload_tasks t
      JOIN meeting_attendance.meeting_agenda_items i ON i.id = t.agenda_item_id
      JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
      JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
     WHERE t.assignee_user_id = %(caller)s AND t.deleted_at IS NULL AND t.status = ANY(%(statuses)s) AND {after}
     ORDER BY {order} LIMIT %(limit)s
"""  # (a live task has live parents: MA-INV-22)

ALL_STATUSES = ["PENDING", "UPLOADED", "CANCELLED"]


async def my_tasks(reads: Runner, *, principal: Principal, status: str | None,
                   page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    after, params = MY_TASKS_KEYSET.after(page)
    sql = MY_TASKS_SQL.format(after=after, order=MY_TASKS_KEYSET.order_by)
    rows = await reads.all(sql, {"caller": principal.id, "statuses": [status] if status else ALL_STATUSES,
                                 "limit": MY_TASKS_KEYSET.fetch_limit(page), **params})
    items, cursor = MY_TASKS_KEYSET.page(rows, page, key=lambda r: (r["due_at"] or NO_DUE_AT, r["id"]))
    return [{
        **{k: r[k] for k in ("id", "status", "due_at", "assigned_at", "completed_at", "cancelled_at")},
        "agenda_item": {"id": r["item_id"], "title": r["item_title"]},
        "section": {"id": r["section_id"], "title": r["section_title"]},
        "meeting": {"id": r["meeting_id"], "title": r["meeting_title"], "start_time": r["start_time"],
                    "timezone": r["timezone"], "status": r["meeting_status"]},
    } for r in items], cursor


# --- uploads and downloads ----------------------------------------------------------------------------------------

UPLOAD_TARGET_SQL = f"""
    SELECT m.id AS meeting_id, m.status, m.created_by_id, {_IDENTITY} AS identity,
           (SELECT t.id FROM meeting_attendance.meeting_agenda_item_upload_tasks t
             WHERE t.agenda_item_id = i.id AND t.assignee_user_id = %(caller)s AND t.deleted_at IS NULL
               AND t.status = 'PENDING' ORDER BY t.assigned_at, t.id LIMIT 1) AS pending_task_id,
           EXISTS (SELECT 1 FROM meeting_attendance.meeting_agenda_item_upload_tasks t
                    WHERE t.agenda_item_id = i.id AND t.assignee_user_id = %(caller)s AND t.deleted_at IS NULL
                      AND t.status IN ('PENDING', 'UPLOADED')) AS holds_task
      FROM meeting_attendance.meeting_agenda_items i
      JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
      JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
     WHERE i.id = %(item)s AND i.deleted_at IS NULL AND m.status <> 'DELETED'
"""  # noqa: S608  (constants of this module)

MEETING_TARGET_SQL = f"""
    SELECT m.id AS meeting_id, m.status, m.created_by_id, {_IDENTITY} AS identity
      FROM meeting_attendance.meetings m WHERE m.id = %(id)s AND m.status <> 'DELETED'
"""  # noqa: S608  (constants of this module)


async def item_upload_target(reads: Runner, *, item_id: uuid.UUID, principal: Principal) -> Row:
    """Before a byte of the body is read: the item is live, the caller sees its meeting (404 otherwise)."""
    row = await reads.one(UPLOAD_TARGET_SQL, {"item": item_id, **caller_params(principal)})
    if row is None or row["identity"] is None:
        raise errors.AgendaItemNotFound()
    return row


async def meeting_upload_target(reads: Runner, *, meeting_id: str, principal: Principal) -> Row:
    row = await reads.one(MEETING_TARGET_SQL, {"id": valid_meeting_id(meeting_id), **caller_params(principal)})
    if row is None or row["identity"] is None:
        raise meeting_errors.MeetingNotFound()
    return row


_DOWNLOAD_SQL = {
    "agenda-item": f"""
        SELECT a.filename, a.mime_type, a.size, a.sha256, a.storage_path, {_IDENTITY} AS identity
          FROM meeting_attendance.meeting_agenda_item_attachments a
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = a.agenda_item_id
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
          JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
         WHERE a.id = %(id)s AND a.deleted_at IS NULL AND m.status <> 'DELETED'""",  # noqa: S608
    "meeting": f"""
        SELECT a.filename, a.mime_type, a.size, a.sha256, a.storage_path, {_IDENTITY} AS identity
          FROM meeting_attendance.meeting_attachments a
          JOIN meeting_attendance.meetings m ON m.id = a.meeting_id
         WHERE a.id = %(id)s AND a.deleted_at IS NULL AND m.status <> 'DELETED'""",  # noqa: S608
}


async def download(reads: Runner, *, kind: str, attachment_id: uuid.UUID, principal: Principal) -> Row:
    """A live attachment of a meeting the caller takes part in; external attendees are refused (403), anyone else
    does not see it (404)."""
    row = await reads.one(_DOWNLOAD_SQL[kind], {"id": attachment_id, **caller_params(principal)})
    if row is None or row["identity"] is None:
        raise errors.AttachmentNotFound()
    if row["identity"] not in PARTICIPANTS:
        raise meeting_errors.MeetingActionForbidden(action="download", identity=row["identity"])
    return row


DELETED_SQL = """
    SELECT * FROM (
        SELECT 'agenda-item' AS kind, a.id, a.filename, a.mime_type, a.size, a.deleted_at, a.deleted_by_id
          FROM meeting_attendance.meeting_agenda_item_attachments a
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = a.agenda_item_id
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
         WHERE s.meeting_id = %(id)s AND a.deleted_at IS NOT NULL
        UNION ALL
        SELECT 'meeting', a.id, a.filename, a.mime_type, a.size, a.deleted_at, a.deleted_by_id
          FROM meeting_attendance.meeting_attachments a WHERE a.meeting_id = %(id)s AND a.deleted_at IS NOT NULL) d
     WHERE EXISTS (SELECT 1 FROM meeting_attendance.meetings m WHERE m.id = %(id)s AND m.status <> 'DELETED')
     ORDER BY deleted_at DESC, id LIMIT 500
"""


async def deleted_attachments(reads: Runner, *, meeting_id: str, purge_days: int) -> list[dict[str, Any]]:
    rows = await reads.all(DELETED_SQL, {"id": valid_meeting_id(meeting_id)})
    return [{**r, "size": str(r["size"]), "purge_after": r["deleted_at"] + timedelta(days=purge_days)} for r in rows]


KNOWN_KEYS_SQL = """
    SELECT storage_path FROM meeting_attendance.meeting_agenda_item_attachments WHERE storage_path = ANY(%(k)s)
    UNION ALL
    SELECT storage_path FROM meeting_attendance.meeting_attachments WHERE storage_path = ANY(%(k)s)
"""


async def known_storage_keys(reads: Runner, keys: list[str]) -> set[str]:
    """Which of `keys` an attachment row (live or deleted) still names: the others are a failed upload's leftovers."""
    return {row["storage_path"] for row in await reads.all(KNOWN_KEYS_SQL, {"k": keys})}
