"""Attachment commands: the upload's commit (with the spec's auto-flip of upload tasks), deletion by the uploader or
a manager, restore by an administrator inside the purge window, the purge itself, and the cascades a meeting's
cancellation or deletion starts. Each runs in the caller's unit of work and never commits.

The file is already in storage when `record_*` runs (streamed to a temp file and moved into place with no
database connection held, tenet.meetings.agenda.uploads): the row is what makes it exist. A refusal here leaves
the caller to delete the stored file.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.principal import Principal
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import violated_constraint
from tenet.kernel.statements import Row, statements
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import audit, errors
from tenet.meetings.agenda.models import PARENT_LIVE_TRIGGERS, ItemAttachment, MeetingAttachment
from tenet.meetings.agenda.storage import Storage
from tenet.meetings.audit import Action, Resource
from tenet.meetings.permissions import MANAGER_ROLES, Permission

KINDS = {"agenda-item": "meeting_agenda_item_attachments", "meeting": "meeting_attachments"}


@dataclass(frozen=True)
class StoredFile:
    """A file already moved into storage under `key`."""

    attachment_id: uuid.UUID
    key: str
    filename: str
    mime_type: str
    size: int
    sha256: str


def _parent_deleted(exc: Exception) -> bool:
    return violated_constraint(exc) in PARENT_LIVE_TRIGGERS.values()


_ITEM_CONTEXT = """
    SELECT m.id AS meeting_id, m.status, m.end_time, m.created_by_id, m.organizer_id,
           EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                    WHERE r.meeting_id = m.id AND r.user_id = %(me)s) AS is_required,
           EXISTS (SELECT 1 FROM meeting_attendance.meeting_agenda_item_upload_tasks t
                    WHERE t.agenda_item_id = i.id AND t.assignee_user_id = %(me)s AND t.deleted_at IS NULL
                      AND t.status IN ('PENDING', 'UPLOADED')) AS holds_task
      FROM meeting_attendance.meeting_agenda_items i
      JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
      JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
     WHERE i.id = %(item)s AND i.deleted_at IS NULL AND m.status <> 'DELETED'
"""
_MEETING_CONTEXT = """
    SELECT status, end_time, created_by_id FROM meeting_attendance.meetings WHERE id = %(m)s AND status <> 'DELETED'
"""
_NEXT_PENDING = """
    SELECT id FROM meeting_attendance.meeting_agenda_item_upload_tasks
     WHERE agenda_item_id = %(item)s AND assignee_user_id = %(me)s AND status = 'PENDING' AND deleted_at IS NULL
     ORDER BY assigned_at, id LIMIT 1
"""
_FLIP = """
    UPDATE meeting_attendance.meeting_agenda_item_upload_tasks
       SET status = 'UPLOADED', completed_at = %(now)s, updated_at = %(now)s, version = version + 1
     WHERE id = %(id)s AND status = 'PENDING' AND deleted_at IS NULL
"""


def is_manager(principal: Principal) -> bool:
    return bool(principal.roles & MANAGER_ROLES)


def may_upload_any(principal: Principal, created_by_id: uuid.UUID) -> bool:
    """Uploading without a task (and meeting-level files): `:upload:any` holders who manage the meeting."""
    return principal.can(Permission.ATTACHMENT_UPLOAD_ANY) and (
        is_manager(principal) or created_by_id == principal.id)


async def auto_flip(session: AsyncSession, *, item_id: uuid.UUID, user_id: uuid.UUID, now: datetime,
                    candidate: uuid.UUID | None = None) -> uuid.UUID | None:
    """Spec §并发与事务: flip the oldest PENDING task of the uploader on the item with a conditional UPDATE and check
    the affected rows; 0 means a concurrent upload took it, so look for another PENDING task; none left means the
    attachment is accepted without flipping anything. Answers the task flipped."""
    sql = await statements(session)
    tried: set[uuid.UUID] = set()
    while True:
        if candidate is None or candidate in tried:
            candidate = await sql.value(_NEXT_PENDING, {"item": item_id, "me": user_id})
            if candidate is None or candidate in tried:
                return None
        tried.add(candidate)
        if await sql.execute(_FLIP, {"id": candidate, "now": now}) == 1:
            return candidate
        candidate = None


async def record_item_attachment(session: AsyncSession, *, item_id: uuid.UUID, stored: StoredFile,
                                 principal: Principal, now: datetime,
                                 candidate: uuid.UUID | None = None) -> tuple[ItemAttachment, uuid.UUID | None]:
    """Insert the attachment and flip the uploader's task in one transaction (MA-INV-25). The caller is checked
    again here: a manager may have cancelled the task, or deleted the item, while the file was arriving."""
    context = await (await statements(session)).one(_ITEM_CONTEXT, {"item": item_id, "me": principal.id})
    if context is None:
        raise errors.AgendaItemNotFound()
    if context["status"] == "CANCELLED":
        raise meeting_errors.MeetingCancelled(meeting_id=context["meeting_id"])
    if not may_upload_any(principal, context["created_by_id"]) and not (
            principal.can(Permission.ATTACHMENT_UPLOAD_ASSIGNED) and context["holds_task"]):
        raise errors.UploadTaskNotOwned()
    row = ItemAttachment(id=stored.attachment_id, agenda_item_id=item_id, uploaded_by_id=principal.id,
                         created_by_id=principal.id, filename=stored.filename, mime_type=stored.mime_type,
                         size=stored.size, storage_path=stored.key, sha256=stored.sha256, uploaded_at=now)
    try:
        session.add(row)
        await session.flush()
    except IntegrityError as exc:
        # MA-INV-22: the item was deleted after the check above (the trigger read it FOR SHARE and waited).
        if _parent_deleted(exc):
            raise errors.AgendaItemNotFound() from None
        raise
    flipped = await auto_flip(session, item_id=item_id, user_id=principal.id, now=now, candidate=candidate)
    await audit.record(session, action=Action.ATTACHMENT_UPLOADED, resource=Resource.ATTACHMENT, resource_id=row.id,
                       meeting_id=context["meeting_id"], meeting_end=context["end_time"], now=now,
                       actor=Actor.user(principal.id),
                       after={"kind": "agenda-item", "agenda_item_id": item_id, "mime_type": stored.mime_type,
                              "size": stored.size, "sha256": stored.sha256, "taskCompleted": flipped is not None,
                              "taskId": flipped})
    return row, flipped


async def record_meeting_attachment(session: AsyncSession, *, meeting_id: str, category: str | None,
                                    stored: StoredFile, principal: Principal, now: datetime) -> MeetingAttachment:
    context = await (await statements(session)).one(_MEETING_CONTEXT, {"m": meeting_id})
    if context is None:
        raise meeting_errors.MeetingNotFound()
    if context["status"] == "CANCELLED":
        raise meeting_errors.MeetingCancelled(meeting_id=meeting_id)
    if not may_upload_any(principal, context["created_by_id"]):
        raise meeting_errors.MeetingActionForbidden(action="upload-meeting-attachment", identity="participant")
    row = MeetingAttachment(id=stored.attachment_id, meeting_id=meeting_id, category=category,
                            uploaded_by_id=principal.id, created_by_id=principal.id, filename=stored.filename,
                            mime_type=stored.mime_type, size=stored.size, storage_path=stored.key,
                            sha256=stored.sha256, uploaded_at=now)
    try:
        session.add(row)
        await session.flush()
    except IntegrityError as exc:
        if _parent_deleted(exc):
            raise meeting_errors.MeetingNotFound() from None
        raise
    await audit.record(session, action=Action.ATTACHMENT_UPLOADED, resource=Resource.ATTACHMENT, resource_id=row.id,
                       meeting_id=meeting_id, meeting_end=context["end_time"], now=now, actor=Actor.user(principal.id),
                       after={"kind": "meeting", "category": category, "mime_type": stored.mime_type,
                              "size": stored.size, "sha256": stored.sha256, "taskCompleted": False})
    return row


# --- deletion and restore --------------------------------------------------------------------------------------

_CONTEXT_SQL = {
    "agenda-item": """
        SELECT a.id, a.uploaded_by_id, a.deleted_at, a.storage_path, m.id AS meeting_id, m.status AS meeting_status,
               m.end_time, m.created_by_id, m.organizer_id, i.deleted_at IS NULL AS parent_live,
               EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                        WHERE r.meeting_id = m.id AND r.user_id = %(me)s) AS is_required
          FROM meeting_attendance.meeting_agenda_item_attachments a
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = a.agenda_item_id
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
          JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
         WHERE a.id = %(id)s""",
    "meeting": """
        SELECT a.id, a.uploaded_by_id, a.deleted_at, a.storage_path, m.id AS meeting_id, m.status AS meeting_status,
               m.end_time, m.created_by_id, m.organizer_id, m.status <> 'DELETED' AS parent_live,
               EXISTS (SELECT 1 FROM meeting_attendance.meeting_required_attendees r
                        WHERE r.meeting_id = m.id AND r.user_id = %(me)s) AS is_required
          FROM meeting_attendance.meeting_attachments a
          JOIN meeting_attendance.meetings m ON m.id = a.meeting_id
         WHERE a.id = %(id)s""",
}


async def _context(session: AsyncSession, kind: str, attachment_id: uuid.UUID, principal_id: uuid.UUID, *,
                   lock: bool = False) -> Row | None:
    sql = _CONTEXT_SQL[kind] + (" FOR UPDATE OF a" if lock else "")
    return await (await statements(session)).one(sql, {"id": attachment_id, "me": principal_id})


async def delete_attachment(session: AsyncSession, *, kind: str, attachment_id: uuid.UUID, principal: Principal,
                            now: datetime) -> None:
    """Soft delete (spec §软删): the uploader deletes their own while a participant; `:upload:any` managers (and
    the meeting's creator) delete anyone's (forced). The file stays until the purge."""
    row = await _context(session, kind, attachment_id, principal.id, lock=True)
    if row is None or row["deleted_at"] is not None or not row["parent_live"]:
        raise errors.AttachmentNotFound()
    manager = is_manager(principal)
    participant = manager or principal.id in (row["created_by_id"], row["organizer_id"]) or row["is_required"]
    if not participant:
        # An external attendee sees the meeting (restricted) but never enters a mutation path (spec 判定顺序 4).
        raise errors.AttachmentNotFound()
    own = row["uploaded_by_id"] == principal.id
    forced = not own and may_upload_any(principal, row["created_by_id"])
    if not own and not forced:
        raise errors.AttachmentNotOwn()
    await (await statements(session)).execute(
        f"UPDATE meeting_attendance.{KINDS[kind]} SET deleted_at = %(now)s, deleted_by_id = %(by)s "  # noqa: S608
        "WHERE id = %(id)s AND deleted_at IS NULL", {"id": attachment_id, "now": now, "by": principal.id})
    await audit.record(session, action=Action.ATTACHMENT_DELETED, resource=Resource.ATTACHMENT,
                       resource_id=attachment_id, meeting_id=row["meeting_id"], meeting_end=row["end_time"], now=now,
                       actor=Actor.user(principal.id), before={"deleted": False},
                       after={"kind": kind, "deleted": True, "forced": forced})


async def restore_attachment(session: AsyncSession, *, kind: str, attachment_id: uuid.UUID, principal: Principal,
                             storage: Storage, purge_days: int, now: datetime) -> None:
    """Administrators, inside the purge window, when the parent is live and the file still there (MA-INV-27). The
    row lock orders it with the purge: a restore waiting behind it finds the row gone (404)."""
    row = await _context(session, kind, attachment_id, principal.id, lock=True)
    if row is None:
        raise errors.AttachmentNotFound()
    if row["deleted_at"] is None:
        raise errors.AttachmentNotDeleted()
    if row["deleted_at"] < now - timedelta(days=purge_days):
        raise errors.AttachmentRestoreWindowPassed(deleted_at=row["deleted_at"].isoformat())
    if not row["parent_live"]:
        raise errors.AttachmentParentDeleted()
    if not await storage.exists(row["storage_path"]):
        raise errors.AttachmentNotFound("The file of this attachment is gone")
    try:
        await (await statements(session)).execute(
            f"UPDATE meeting_attendance.{KINDS[kind]} SET deleted_at = NULL, deleted_by_id = NULL "  # noqa: S608
            "WHERE id = %(id)s", {"id": attachment_id})
    except psycopg.errors.IntegrityError as exc:
        if _parent_deleted(exc):
            raise errors.AttachmentParentDeleted() from None
        raise
    await audit.record(session, action=Action.ATTACHMENT_RESTORED, resource=Resource.ATTACHMENT,
                       resource_id=attachment_id, meeting_id=row["meeting_id"], meeting_end=row["end_time"], now=now,
                       actor=Actor.user(principal.id), before={"deleted": True}, after={"kind": kind, "deleted": False})


# --- purge -----------------------------------------------------------------------------------------------------

PURGE_BATCH = 100
_PURGE_TABLES = ("meeting_agenda_item_attachments", "meeting_attachments", "meeting_agenda_item_upload_tasks",
                 "meeting_agenda_items", "meeting_agenda_sections")
# A parent is purged only when no row of a child table still points at it (children first; foreign keys are
# NO ACTION: nothing is ever deleted by cascade).
_CHILDREN = {
    "meeting_agenda_items": ("meeting_agenda_item_upload_tasks", "agenda_item_id",
                             "meeting_agenda_item_attachments", "agenda_item_id"),
    "meeting_agenda_sections": ("meeting_agenda_items", "section_id"),
}


def _orphan_clause(table: str) -> str:
    pairs = _CHILDREN.get(table, ())
    clauses = [f"NOT EXISTS (SELECT 1 FROM meeting_attendance.{pairs[n]} c "  # noqa: S608  (constants)
               f"WHERE c.{pairs[n + 1]} = x.id)"
               for n in range(0, len(pairs), 2)]
    return " AND ".join(clauses) or "TRUE"


async def purge_batch(session: AsyncSession, *, table: str, storage: Storage, cutoff: datetime) -> tuple[int, int]:
    """Up to PURGE_BATCH rows of `table` soft-deleted before `cutoff`, locked SKIP LOCKED (never waiting for a
    request); attachments' files are deleted while their rows are locked and before the rows go (MA-INV-27).
    Answers (rows, bytes)."""
    file_table = table in ("meeting_agenda_item_attachments", "meeting_attachments")
    columns = "x.id, x.storage_path, x.size" if file_table else "x.id"
    sql = await statements(session)
    rows = await sql.all(
        f"SELECT {columns} FROM meeting_attendance.{table} x "  # noqa: S608  (constants of this module)
        f"WHERE x.deleted_at < %(cutoff)s AND {_orphan_clause(table)} ORDER BY x.deleted_at, x.id LIMIT %(limit)s "
        "FOR UPDATE OF x SKIP LOCKED", {"cutoff": cutoff, "limit": PURGE_BATCH})
    if not rows:
        return 0, 0
    size = 0
    if file_table:
        for row in rows:
            await storage.delete(row["storage_path"])
            size += row["size"]
    await sql.execute(f"DELETE FROM meeting_attendance.{table} WHERE id = ANY(%(ids)s)",  # noqa: S608
                      {"ids": [row["id"] for row in rows]})
    return len(rows), size


# --- cascades of the meeting's own commands (MA-INV-22, MA-INV-29) ---------------------------------------------


async def cancel_pending_tasks(session: AsyncSession, *, meeting_ids: list[str] | None = None,
                               assignee_id: uuid.UUID | None = None, actor: Actor, actor_id: uuid.UUID | None,
                               now: datetime, reason: str) -> int:
    """PENDING -> CANCELLED for the tasks of the meetings (cancelled or deleted) or of an account (deleted), each
    audited UPLOAD_TASK_CANCELLED with its reason. The caller holds the meetings (or the account) locked."""
    where = "s.meeting_id = ANY(%(meetings)s)" if meeting_ids is not None else "t.assignee_user_id = %(assignee)s"
    rows = await (await statements(session)).all(f"""
        UPDATE meeting_attendance.meeting_agenda_item_upload_tasks t
           SET status = 'CANCELLED', cancelled_at = %(now)s, cancelled_by_id = %(by)s, updated_at = %(now)s,
               version = t.version + 1
          FROM meeting_attendance.meeting_agenda_items i, meeting_attendance.meeting_agenda_sections s,
               meeting_attendance.meetings m
         WHERE i.id = t.agenda_item_id AND s.id = i.section_id AND m.id = s.meeting_id
           AND t.status = 'PENDING' AND t.deleted_at IS NULL AND {where}
        RETURNING t.id, m.id AS meeting_id, m.end_time""",  # noqa: S608  (constants of this module)
        {"meetings": meeting_ids, "assignee": assignee_id, "now": now, "by": actor_id})
    for row in sorted(rows, key=lambda r: r["id"]):
        await audit.record(session, action=Action.UPLOAD_TASK_CANCELLED, resource=Resource.UPLOAD_TASK,
                           resource_id=row["id"], meeting_id=row["meeting_id"], meeting_end=row["end_time"], now=now,
                           actor=actor, before={"status": "PENDING"}, after={"status": "CANCELLED"}, reason=reason)
    return len(rows)


# A deleted meeting's agenda, children first; the sections' rows answer what the audit names.
_DELETE_AGENDA = (
    """UPDATE meeting_attendance.meeting_agenda_item_upload_tasks t SET deleted_at = %(now)s, deleted_by_id = %(by)s,
              updated_at = %(now)s
         FROM meeting_attendance.meeting_agenda_items i, meeting_attendance.meeting_agenda_sections s
        WHERE i.id = t.agenda_item_id AND s.id = i.section_id AND s.meeting_id = ANY(%(m)s) AND t.deleted_at IS NULL""",
    """UPDATE meeting_attendance.meeting_agenda_item_attachments a SET deleted_at = %(now)s, deleted_by_id = %(by)s
         FROM meeting_attendance.meeting_agenda_items i, meeting_attendance.meeting_agenda_sections s
        WHERE i.id = a.agenda_item_id AND s.id = i.section_id AND s.meeting_id = ANY(%(m)s) AND a.deleted_at IS NULL""",
    """UPDATE meeting_attendance.meeting_agenda_items i SET deleted_at = %(now)s, deleted_by_id = %(by)s,
              sort_order = NULL, updated_at = %(now)s, version = i.version + 1
         FROM meeting_attendance.meeting_agenda_sections s
        WHERE s.id = i.section_id AND s.meeting_id = ANY(%(m)s) AND i.deleted_at IS NULL""",
)
_DELETE_SECTIONS = """
    UPDATE meeting_attendance.meeting_agenda_sections s SET deleted_at = %(now)s, deleted_by_id = %(by)s,
           sort_order = NULL, updated_at = %(now)s, version = s.version + 1
      FROM meeting_attendance.meetings m
     WHERE m.id = s.meeting_id AND s.meeting_id = ANY(%(m)s) AND s.deleted_at IS NULL
    RETURNING s.id, s.meeting_id, m.end_time
"""
_DELETE_MEETING_FILES = """
    UPDATE meeting_attendance.meeting_attachments SET deleted_at = %(now)s, deleted_by_id = %(by)s
     WHERE meeting_id = ANY(%(m)s) AND deleted_at IS NULL
"""


async def delete_agenda_of(session: AsyncSession, *, meeting_ids: list[str], actor: Actor,
                           actor_id: uuid.UUID | None, now: datetime) -> None:
    """A deleted meeting's whole agenda and its meeting attachments, soft-deleted in the deleting transaction (the
    meeting rows are locked by it). One AGENDA_SECTION_DELETED row per section."""
    params = {"m": meeting_ids, "now": now, "by": actor_id}
    sql = await statements(session)
    for statement in _DELETE_AGENDA:
        await sql.execute(statement, params)
    sections = await sql.all(_DELETE_SECTIONS, params)
    await sql.execute(_DELETE_MEETING_FILES, params)
    for row in sorted(sections, key=lambda r: r["id"]):
        await audit.record(session, action=Action.AGENDA_SECTION_DELETED, resource=Resource.AGENDA_SECTION,
                           resource_id=row["id"], meeting_id=row["meeting_id"], meeting_end=row["end_time"], now=now,
                           actor=actor, after={"deleted": True}, reason="meeting_deleted")
