"""The agenda's rules MA-INV-21..29 (spec 001 §议程能力架构, issue 11), each with its enforcement and detector.

Detectors that need "now" read `meeting_attendance.rule_now()`; the purge window is the default
(MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS = 30) unless the session sets `tenet.attachment_purge_days`
(`PGOPTIONS='-c tenet.attachment_purge_days=N' tenet invariants check` on a deployment with another value).
"""

from __future__ import annotations

from tenet.kernel.invariants import register
from tenet.meetings.agenda import mime
from tenet.meetings.agenda.models import (
    ITEM_ORDER_DENSE_TRIGGER,
    ITEM_ORDER_UNIQUE,
    PARENT_LIVE_TRIGGERS,
    SECTION_ORDER_DENSE_TRIGGER,
    SECTION_ORDER_UNIQUE,
    TASK_PENDING_INDEX,
    TASK_TERMINAL_TRIGGER,
)
from tenet.meetings.invariants import DOMAIN, _trigger_present

PURGE_DAYS = "coalesce(nullif(current_setting('tenet.attachment_purge_days', true), '')::int, 30)"
AGENDA_RESOURCES = "('AGENDA_SECTION', 'AGENDA_ITEM', 'UPLOAD_TASK', 'ATTACHMENT')"

register(
    id="MA-INV-21",
    domain=DOMAIN,
    statement="The live sections of a meeting are ordered exactly 0..n-1, and the live items of a section exactly "
              "0..m-1; a deleted section or item has no position.",
    scope="meeting_attendance.meeting_agenda_sections, meeting_agenda_items",
    counterexample="Two managers drag sections at once and the agenda shows two 'section 2's, or a gap that the "
                   "next insert fills out of order.",
    db=(SECTION_ORDER_UNIQUE, ITEM_ORDER_UNIQUE, "ck_meeting_agenda_sections_order_live",
        "ck_meeting_agenda_items_order_live", SECTION_ORDER_DENSE_TRIGGER, ITEM_ORDER_DENSE_TRIGGER),
    app="Every agenda command locks the meeting row first; a reorder names exactly the live rows "
        "(AGENDA_ORDER_MISMATCH with the current ids) and is one UPDATE ... CASE id WHEN ... (spec §并发与事务); "
        "insert appends at n; delete closes the gap in the same transaction.",
    error_code="AGENDA_ORDER_MISMATCH",
    concurrency="The meeting row lock (FOR NO KEY UPDATE) serialises agenda commands of one meeting; the deferrable "
                "unique constraints refuse duplicates at the end of each statement and the deferred triggers gaps "
                "at commit. Race test: two reorders and a delete at once.",
    detector=f"""
        SELECT meeting_id::text AS parent, count(*) AS n, min(sort_order) AS lo, max(sort_order) AS hi
          FROM meeting_attendance.meeting_agenda_sections WHERE deleted_at IS NULL GROUP BY meeting_id
        HAVING min(sort_order) <> 0 OR max(sort_order) <> count(*) - 1 OR count(DISTINCT sort_order) <> count(*)
        UNION ALL
        SELECT section_id::text, count(*), min(sort_order), max(sort_order)
          FROM meeting_attendance.meeting_agenda_items WHERE deleted_at IS NULL GROUP BY section_id
        HAVING min(sort_order) <> 0 OR max(sort_order) <> count(*) - 1 OR count(DISTINCT sort_order) <> count(*)
        UNION ALL
        SELECT x.parent, NULL, NULL, NULL FROM ({_trigger_present('meeting_agenda_sections',
                                                                  SECTION_ORDER_DENSE_TRIGGER)}) x(parent, why)
        UNION ALL
        SELECT x.parent, NULL, NULL, NULL FROM ({_trigger_present('meeting_agenda_items',
                                                                  ITEM_ORDER_DENSE_TRIGGER)}) x(parent, why)
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-22",
    domain=DOMAIN,
    statement="No live agenda row under a deleted parent: a live section belongs to a meeting that is not DELETED, "
              "a live item to a live section, a live upload task or item attachment to a live item, a live meeting "
              "attachment to a meeting that is not DELETED. Deleting a section or item soft-deletes its items, "
              "tasks and attachments in the same transaction, under a row lock on each item.",
    scope="the five agenda tables",
    counterexample="An upload racing 'delete item' commits an attachment under the deleted item: invisible, never "
                   "purged with its item.",
    db=tuple(PARENT_LIVE_TRIGGERS.values()),
    app="Deleting an item locks the meeting, then the item FOR UPDATE, soft-deletes tasks and attachments, then the "
        "item; deleting a section does the same for each of its items (id order); deleting a meeting cascades "
        "to its whole agenda and meeting attachments.",
    error_code="AGENDA_ITEM_NOT_FOUND",
    concurrency="The *_parent_live triggers read the parent FOR SHARE: an insert waits for a deletion holding the "
                "parent and then sees it (the upload answers 404 and deletes its file). Race test: delete item vs "
                "upload, both orders.",
    detector="""
        SELECT 'section' AS kind, s.id FROM meeting_attendance.meeting_agenda_sections s
          JOIN meeting_attendance.meetings m ON m.id = s.meeting_id WHERE s.deleted_at IS NULL AND m.status = 'DELETED'
        UNION ALL
        SELECT 'item', i.id FROM meeting_attendance.meeting_agenda_items i
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
         WHERE i.deleted_at IS NULL AND s.deleted_at IS NOT NULL
        UNION ALL
        SELECT 'task', t.id FROM meeting_attendance.meeting_agenda_item_upload_tasks t
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = t.agenda_item_id
         WHERE t.deleted_at IS NULL AND i.deleted_at IS NOT NULL
        UNION ALL
        SELECT 'item attachment', a.id FROM meeting_attendance.meeting_agenda_item_attachments a
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = a.agenda_item_id
         WHERE a.deleted_at IS NULL AND i.deleted_at IS NOT NULL
        UNION ALL
        SELECT 'meeting attachment', a.id FROM meeting_attendance.meeting_attachments a
          JOIN meeting_attendance.meetings m ON m.id = a.meeting_id WHERE a.deleted_at IS NULL AND m.status = 'DELETED'
    """,
)

register(
    id="MA-INV-23",
    domain=DOMAIN,
    statement="Every agenda row names its creator; a task's creator is its assigner and an attachment's creator its "
              "uploader (spec ER: '= assignedById', '= uploadedById'); who deleted a row is set only on a deleted row "
              "(none when the system deleted it).",
    scope="the five agenda tables",
    counterexample="A task whose creator differs from its assigner: 'who asked for this' becomes ambiguous.",
    db=("ck_meeting_agenda_item_upload_tasks_created_by_is_assigner",
        "ck_meeting_agenda_item_attachments_created_by_is_uploader", "ck_meeting_attachments_created_by_is_uploader",
        "ck_meeting_agenda_sections_deleted_by_with_time", "ck_meeting_agenda_items_deleted_by_with_time"),
    app="The service writes both columns from the one actor.",
    error_code=None,
    concurrency="Single-row CHECKs.",
    detector="""
        SELECT 'task' AS kind, id FROM meeting_attendance.meeting_agenda_item_upload_tasks
         WHERE created_by_id <> assigned_by_id OR (deleted_at IS NULL AND deleted_by_id IS NOT NULL)
        UNION ALL
        SELECT 'item attachment', id FROM meeting_attendance.meeting_agenda_item_attachments
         WHERE created_by_id <> uploaded_by_id OR (deleted_at IS NULL AND deleted_by_id IS NOT NULL)
        UNION ALL
        SELECT 'meeting attachment', id FROM meeting_attendance.meeting_attachments
         WHERE created_by_id <> uploaded_by_id OR (deleted_at IS NULL AND deleted_by_id IS NOT NULL)
        UNION ALL
        SELECT 'section', id FROM meeting_attendance.meeting_agenda_sections
         WHERE (deleted_at IS NULL AND deleted_by_id IS NOT NULL)
        UNION ALL
        SELECT 'item', id FROM meeting_attendance.meeting_agenda_items
         WHERE (deleted_at IS NULL AND deleted_by_id IS NOT NULL)
    """,
)

register(
    id="MA-INV-24",
    domain=DOMAIN,
    statement="An upload task is PENDING, UPLOADED (with its completion time) or CANCELLED (with its time); UPLOADED "
              "and CANCELLED are final; at most one live PENDING task per (item, assignee); the assignee was an "
              "active participant of the meeting when assigned.",
    scope="meeting_attendance.meeting_agenda_item_upload_tasks",
    counterexample="A task flipped back to PENDING by a retried request; the same person assigned twice to one item "
                   "so that one upload leaves a phantom pending task.",
    db=("ck_meeting_agenda_item_upload_tasks_status", "ck_meeting_agenda_item_upload_tasks_uploaded_has_time",
        "ck_meeting_agenda_item_upload_tasks_cancelled_has_time", TASK_TERMINAL_TRIGGER, TASK_PENDING_INDEX),
    app="Assignment share-locks the accounts, then the meeting, and checks participants and existing PENDING tasks "
        "(UPLOAD_TASK_ALREADY_PENDING with the task id); transitions are conditional UPDATEs.",
    error_code="UPLOAD_TASK_NOT_PENDING",
    concurrency="Conditional UPDATE on status; the partial unique index decides duplicates.",
    detector=f"""
        SELECT agenda_item_id::text AS item, assignee_user_id::text AS who, count(*) AS n
          FROM meeting_attendance.meeting_agenda_item_upload_tasks
         WHERE status = 'PENDING' AND deleted_at IS NULL GROUP BY 1, 2 HAVING count(*) > 1
        UNION ALL
        SELECT id::text, status, NULL FROM meeting_attendance.meeting_agenda_item_upload_tasks
         WHERE status NOT IN ('PENDING', 'UPLOADED', 'CANCELLED') OR (status = 'UPLOADED') <> (completed_at IS NOT NULL)
            OR (status = 'CANCELLED') <> (cancelled_at IS NOT NULL)
        UNION ALL
        SELECT NULL, x.why, NULL FROM ({_trigger_present('meeting_agenda_item_upload_tasks',
                                                          TASK_TERMINAL_TRIGGER)}) x(id, why)
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-25",
    domain=DOMAIN,
    statement="A task becomes UPLOADED only in the transaction that inserts an item attachment by its assignee on its "
              "item; both carry the same instant (completed_at = uploaded_at).",
    scope="UPLOADED tasks completed within the purge window (older attachments may be purged)",
    counterexample="The attachment insert fails after the task flipped: the assignee's to-do list says done and no "
                   "file exists anywhere.",
    db=(),
    db_reason="a rule across two tables kept by one transaction of the upload (spec §并发与事务 同事务)",
    app="The upload's unit of work inserts the attachment, then flips the oldest PENDING task of the caller on the "
        "item with a conditional UPDATE (affected rows checked, falling through to the next PENDING task, accepting "
        "the file unflipped when none is left: spec §并发与事务).",
    error_code=None,
    concurrency="The conditional UPDATE's row lock; one transaction for both rows. Race tests: two assignees at once, "
                "one assignee twice at once.",
    detector=f"""
        SELECT t.id FROM meeting_attendance.meeting_agenda_item_upload_tasks t
         WHERE t.status = 'UPLOADED'
           AND t.completed_at > meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS})
           AND NOT EXISTS (SELECT 1 FROM meeting_attendance.meeting_agenda_item_attachments a
                            WHERE a.agenda_item_id = t.agenda_item_id AND a.uploaded_by_id = t.assignee_user_id
                              AND a.uploaded_at = t.completed_at)
    """,  # noqa: S608  (constants of this module)
)

_WHITELIST = ", ".join(f"'{kind}'" for kind in mime.ALLOWED)
_METADATA = f"""
    filename IS NULL OR length(filename) NOT BETWEEN 1 AND 255 OR filename ~ '[/\\\\[:cntrl:]]'
    OR right(storage_path, 36) <> id::text OR size < 0 OR mime_type NOT IN ({_WHITELIST})
"""
register(
    id="MA-INV-26",
    domain=DOMAIN,
    statement="An attachment's filename is 1..255 characters without a path separator or control character "
              "(Unicode kept); its storage path is relative and derived from its id only; its size is what was "
              "stored; its type is whitelisted and agreed with the file's first bytes at upload.",
    scope="meeting_attendance.meeting_agenda_item_attachments, meeting_attachments",
    counterexample="A filename `../../etc/passwd` used as a path; a Windows executable uploaded as application/pdf.",
    db=("ck_meeting_agenda_item_attachments_filename_clean", "ck_meeting_agenda_item_attachments_storage_path_derived",
        "ck_meeting_agenda_item_attachments_size_non_negative", "ck_meeting_attachments_filename_clean",
        "ck_meeting_attachments_storage_path_derived", "ck_meeting_attachments_size_non_negative"),
    app="The upload keeps the last path segment of the client's name (NFC, no controls), checks the part's "
        "Content-Type against the whitelist (ATTACHMENT_MIME_NOT_ALLOWED), the first 4 KB against it "
        "(ATTACHMENT_MIME_MISMATCH), counts bytes while streaming (ATTACHMENT_TOO_LARGE) and names the file by id.",
    error_code="ATTACHMENT_MIME_MISMATCH",
    concurrency="n/a",
    detector=f"""
        SELECT 'item attachment' AS kind, id FROM meeting_attendance.meeting_agenda_item_attachments WHERE {_METADATA}
        UNION ALL
        SELECT 'meeting attachment', id FROM meeting_attendance.meeting_attachments WHERE {_METADATA}
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-27",
    domain=DOMAIN,
    statement="Soft-deleted agenda rows and attachments are physically deleted after "
              "MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS (files first, while the row is locked); inside the window an "
              "administrator can restore an attachment whose parent is live.",
    scope="the five agenda tables (one day of slack for the hourly job)",
    counterexample="'Deleted' confidential minutes kept and recoverable for ever; a restore racing the purge leaves a "
                   "live row without its file.",
    db=("ix_meeting_agenda_item_attachments_deleted_at", "ix_meeting_attachments_deleted_at"),
    app="Job meetings:purge_deleted_agenda (hourly): children first, rows FOR UPDATE SKIP LOCKED, the file unlinked "
        "before the row is deleted; restore locks the row FOR UPDATE and requires the window and a live parent "
        "(ATTACHMENT_RESTORE_WINDOW_PASSED, ATTACHMENT_PARENT_DELETED).",
    error_code="ATTACHMENT_RESTORE_WINDOW_PASSED",
    concurrency="The purge skips locked rows; a restore waiting on the row lock finds it gone (404).",
    detector=f"""
        SELECT 'item attachment' AS kind, id FROM meeting_attendance.meeting_agenda_item_attachments
         WHERE deleted_at < meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS} + 1)
        UNION ALL SELECT 'meeting attachment', id FROM meeting_attendance.meeting_attachments
         WHERE deleted_at < meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS} + 1)
        UNION ALL SELECT 'task', id FROM meeting_attendance.meeting_agenda_item_upload_tasks
         WHERE deleted_at < meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS} + 1)
        UNION ALL SELECT 'item', id FROM meeting_attendance.meeting_agenda_items
         WHERE deleted_at < meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS} + 1)
        UNION ALL SELECT 'section', id FROM meeting_attendance.meeting_agenda_sections
         WHERE deleted_at < meeting_attendance.rule_now() - make_interval(days => {PURGE_DAYS} + 1)
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-28",
    domain=DOMAIN,
    statement="Every agenda change writes, in its transaction, one audit row with the spec's action and resource "
              "constants and changes {entityId, entityType, before, after, meetingEndTime}; a change made at or "
              "after the meeting's end carries agendaModifiedAfterMeetingEnd: true.",
    scope="meeting_attendance.audit_logs rows of the four agenda resources; every agenda row's creation",
    counterexample="Slides replaced after the meeting with no trace that the record changed after the fact.",
    db=(),
    db_reason="rows written by the service in the command's transaction; append-only by MA-INV-20",
    app="Each agenda command writes its row through agenda.audit.record, which reads the meeting's end from the "
        "meeting row the command locked.",
    error_code=None,
    concurrency="Same transaction as the change.",
    detector=f"""
        SELECT l.id::text AS id, 'after-end change not flagged' AS why FROM meeting_attendance.audit_logs l
         WHERE l.resource IN {AGENDA_RESOURCES} AND l.action <> 'ATTACHMENT_PURGED'
           AND (l.changes->>'meetingEndTime' IS NULL
                OR (l.occurred_at >= (l.changes->>'meetingEndTime')::timestamptz
                    AND coalesce((l.changes->>'agendaModifiedAfterMeetingEnd')::boolean, false) = false))
        UNION ALL
        SELECT s.id::text, 'section without AGENDA_SECTION_CREATED' FROM meeting_attendance.meeting_agenda_sections s
         WHERE NOT EXISTS (SELECT 1 FROM meeting_attendance.audit_logs l WHERE l.resource = 'AGENDA_SECTION'
                              AND l.resource_id = s.id::text AND l.action = 'AGENDA_SECTION_CREATED')
        UNION ALL
        SELECT i.id::text, 'item without AGENDA_ITEM_CREATED' FROM meeting_attendance.meeting_agenda_items i
         WHERE NOT EXISTS (SELECT 1 FROM meeting_attendance.audit_logs l WHERE l.resource = 'AGENDA_ITEM'
                              AND l.resource_id = i.id::text AND l.action = 'AGENDA_ITEM_CREATED')
        UNION ALL
        SELECT t.id::text, 'task without UPLOAD_TASK_ASSIGNED'
          FROM meeting_attendance.meeting_agenda_item_upload_tasks t
         WHERE NOT EXISTS (SELECT 1 FROM meeting_attendance.audit_logs l WHERE l.resource = 'UPLOAD_TASK'
                              AND l.resource_id = t.id::text AND l.action = 'UPLOAD_TASK_ASSIGNED')
        UNION ALL
        SELECT a.id::text, 'attachment without ATTACHMENT_UPLOADED' FROM (
            SELECT id FROM meeting_attendance.meeting_agenda_item_attachments
            UNION ALL SELECT id FROM meeting_attendance.meeting_attachments) a
         WHERE NOT EXISTS (SELECT 1 FROM meeting_attendance.audit_logs l WHERE l.resource = 'ATTACHMENT'
                              AND l.resource_id = a.id::text AND l.action = 'ATTACHMENT_UPLOADED')
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-29",
    domain=DOMAIN,
    statement="A meeting that is not ACTIVE (cancelled or deleted) has no PENDING upload task.",
    scope="meeting_attendance.meeting_agenda_item_upload_tasks with their meeting",
    counterexample="'Upload your slides' stays in someone's to-do list for a meeting that will never happen.",
    db=(),
    db_reason="a rule across tables kept by the meeting commands' transactions",
    app="Cancelling or deleting a meeting (and deleting a series) cancels its PENDING tasks in the same transaction; "
        "assigning a task on a cancelled meeting answers MEETING_CANCELLED.",
    error_code="MEETING_CANCELLED",
    concurrency="Under the meeting row lock, which assignment takes too.",
    detector="""
        SELECT t.id FROM meeting_attendance.meeting_agenda_item_upload_tasks t
          JOIN meeting_attendance.meeting_agenda_items i ON i.id = t.agenda_item_id
          JOIN meeting_attendance.meeting_agenda_sections s ON s.id = i.section_id
          JOIN meeting_attendance.meetings m ON m.id = s.meeting_id
         WHERE t.status = 'PENDING' AND t.deleted_at IS NULL AND m.status <> 'ACTIVE'
    """,
)
