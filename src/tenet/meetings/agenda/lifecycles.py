"""The upload task's state machine (spec UploadTaskStatus). Sections, items and attachments have no status: their
soft delete is data (`deleted_at`), and only attachments come back (restore, administrators, inside the window)."""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

UPLOAD_TASK = declare(
    "meeting_attendance.meeting_agenda_item_upload_tasks",
    states=("PENDING", "UPLOADED", "CANCELLED"),
    initial="PENDING",
    terminal={"UPLOADED", "CANCELLED"},
    transitions=[
        Transition("complete", frozenset({"PENDING"}), "UPLOADED", "the assignee's upload (auto-flip)",
                   "same transaction as the attachment insert, completed_at = uploaded_at (MA-INV-25)"),
        Transition("cancel", frozenset({"PENDING"}), "CANCELLED",
                   "MeetingManager / Administrator; the meeting's cancellation or deletion; the account's deletion",
                   "audit UPLOAD_TASK_CANCELLED"),
    ],
)
