"""The five agenda tables of spec 001's ER diagram (schema `meeting_attendance`), derived from MA-INV-21..29.

Every table carries the spec's standard fields (`created_by_id`, `organization_id`, `deleted_at`) and UUID ids.
Deletion is soft everywhere (the purge job removes rows after MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS), parents
are never deleted by foreign-key cascade (spec: "不依赖 FK onDelete"): the service soft-deletes children in the
same transaction and the `*_parent_live` triggers refuse a live row under a deleted parent.

`order` is `sort_order` (a reserved word), NULL exactly when the row is deleted: the one-statement reorder of
spec §并发与事务 needs a DEFERRABLE unique constraint, which cannot be partial, so deleted rows drop out of it by
having no position (D-31).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from tenet.db.base import Base
from tenet.meetings.models import SCHEMA, USER_FK

SECTIONS = "meeting_agenda_sections"
ITEMS = "meeting_agenda_items"
TASKS = "meeting_agenda_item_upload_tasks"
ITEM_ATTACHMENTS = "meeting_agenda_item_attachments"
MEETING_ATTACHMENTS = "meeting_attachments"

# Names the invariant catalog, the error mapping and the bypass tests refer to.
SECTION_ORDER_UNIQUE = "uq_meeting_agenda_sections_meeting_id_sort_order"
ITEM_ORDER_UNIQUE = "uq_meeting_agenda_items_section_id_sort_order"
SECTION_ORDER_DENSE_TRIGGER = "meeting_agenda_sections_order_dense"
ITEM_ORDER_DENSE_TRIGGER = "meeting_agenda_items_order_dense"
TASK_PENDING_INDEX = "uq_meeting_agenda_item_upload_tasks_pending"
TASK_TERMINAL_TRIGGER = "meeting_agenda_item_upload_tasks_terminal_is_final"
PARENT_LIVE_TRIGGERS = {
    SECTIONS: "meeting_agenda_sections_parent_live",
    ITEMS: "meeting_agenda_items_parent_live",
    TASKS: "meeting_agenda_item_upload_tasks_parent_live",
    ITEM_ATTACHMENTS: "meeting_agenda_item_attachments_parent_live",
    MEETING_ATTACHMENTS: "meeting_attachments_parent_live",
}

CATEGORY_TAGS = ("REPORT", "DISCUSSION", "DECISION", "INFORMATION", "OTHER")
ATTACHMENT_CATEGORIES = ("MINUTES", "MATERIAL", "OTHER")
TASK_STATUSES = ("PENDING", "UPLOADED", "CANCELLED")
# A date far enough to sort undated tasks last in "my tasks" (keyset on a plain timestamptz).
NO_DUE = "9999-12-31 00:00:00+00"
FILENAME_CLEAN = r"length(filename) BETWEEN 1 AND 255 AND filename !~ '[/\\[:cntrl:]]'"
MIME_SHAPE = r"mime_type ~ '^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$' AND length(mime_type) <= 128"
SHA256_HEX = "sha256 ~ '^[0-9a-f]{64}$'"


def _standard(table: str) -> tuple[CheckConstraint, ...]:
    return (CheckConstraint("deleted_by_id IS NULL OR deleted_at IS NOT NULL", name="deleted_by_with_time"),)


def _ordered(parent: str) -> tuple[CheckConstraint, ...]:
    return (
        CheckConstraint("(deleted_at IS NULL) = (sort_order IS NOT NULL)", name="order_live"),
        CheckConstraint("sort_order >= 0", name="order_non_negative"),
        CheckConstraint("length(btrim(title)) BETWEEN 1 AND 200", name="title_length"),
        CheckConstraint("version > 0", name="version_positive"),
    )


class AgendaSection(Base):
    """A section of a meeting's agenda (spec MeetingAgendaSection)."""

    __tablename__ = SECTIONS
    __table_args__ = (
        UniqueConstraint("meeting_id", "sort_order", name=SECTION_ORDER_UNIQUE, deferrable=True,
                         initially="IMMEDIATE"),
        *_ordered("meeting_id"),
        *_standard(SECTIONS),
        Index("ix_meeting_agenda_sections_deleted_at", "deleted_at", postgresql_where=text("deleted_at IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    meeting_id: Mapped[str] = mapped_column(String(32), ForeignKey("meeting_attendance.meetings.id"))
    sort_order: Mapped[int | None] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(200))
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    organization_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class AgendaItem(Base):
    """An item of a section (spec MeetingAgendaItem): the anchor of upload tasks and item attachments."""

    __tablename__ = ITEMS
    __table_args__ = (
        UniqueConstraint("section_id", "sort_order", name=ITEM_ORDER_UNIQUE, deferrable=True, initially="IMMEDIATE"),
        *_ordered("section_id"),
        *_standard(ITEMS),
        CheckConstraint("description IS NULL OR length(description) <= 20000", name="description_length"),
        CheckConstraint("code IS NULL OR length(btrim(code)) BETWEEN 1 AND 64", name="code_length"),
        CheckConstraint("time_minutes IS NULL OR time_minutes BETWEEN 1 AND 1440", name="time_minutes_range"),
        CheckConstraint(f"category_tag IS NULL OR category_tag IN {CATEGORY_TAGS!r}", name="category_tag"),
        Index("ix_meeting_agenda_items_deleted_at", "deleted_at", postgresql_where=text("deleted_at IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    section_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.meeting_agenda_sections.id"))
    sort_order: Mapped[int | None] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str | None] = mapped_column(Text)
    code: Mapped[str | None] = mapped_column(String(64))
    time_minutes: Mapped[int | None] = mapped_column(Integer)
    presenter_user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    category_tag: Mapped[str | None] = mapped_column(String(32))
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    organization_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


class UploadTask(Base):
    """A material upload task (spec MeetingAgendaItemUploadTask): PENDING -> UPLOADED | CANCELLED (final)."""

    __tablename__ = TASKS
    __table_args__ = (
        CheckConstraint(f"status IN {TASK_STATUSES!r}", name="status"),
        CheckConstraint("(status = 'UPLOADED') = (completed_at IS NOT NULL)", name="uploaded_has_time"),
        CheckConstraint("(status = 'CANCELLED') = (cancelled_at IS NOT NULL)", name="cancelled_has_time"),
        CheckConstraint("created_by_id = assigned_by_id", name="created_by_is_assigner"),
        CheckConstraint("version > 0", name="version_positive"),
        *_standard(TASKS),
        Index(TASK_PENDING_INDEX, "agenda_item_id", "assignee_user_id", unique=True,
              postgresql_where=text("status = 'PENDING' AND deleted_at IS NULL")),
        # "My tasks" (hot): the assignee's live tasks by status, soonest due first, undated last.
        Index("ix_meeting_agenda_item_upload_tasks_assignee", "assignee_user_id", "status",
              text(f"coalesce(due_at, '{NO_DUE}'::timestamptz)"), "id", postgresql_where=text("deleted_at IS NULL")),
        # The agenda view, the auto-flip candidate, the cascade.
        Index("ix_meeting_agenda_item_upload_tasks_item", "agenda_item_id", "assigned_at",
              postgresql_where=text("deleted_at IS NULL")),
        Index("ix_meeting_agenda_item_upload_tasks_deleted_at", "deleted_at",
              postgresql_where=text("deleted_at IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    agenda_item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.meeting_agenda_items.id"))
    assignee_user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    assigned_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    status: Mapped[str] = mapped_column(String(16), server_default=text("'PENDING'"))
    due_at: Mapped[datetime | None]
    assigned_at: Mapped[datetime]
    completed_at: Mapped[datetime | None]
    cancelled_at: Mapped[datetime | None]
    cancelled_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    organization_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))


def _file_checks(prefix: str) -> tuple[CheckConstraint, ...]:
    return (
        CheckConstraint(FILENAME_CLEAN, name="filename_clean"),
        CheckConstraint(f"storage_path ~ '^{prefix}/[0-9]{{4}}/[0-9]{{2}}/[0-9a-f-]{{36}}$' "
                        "AND right(storage_path, 36) = id::text", name="storage_path_derived"),
        CheckConstraint("size >= 0", name="size_non_negative"),
        CheckConstraint(MIME_SHAPE, name="mime_type_shape"),
        CheckConstraint(SHA256_HEX, name="sha256_hex"),
        CheckConstraint("created_by_id = uploaded_by_id", name="created_by_is_uploader"),
        CheckConstraint("deleted_by_id IS NULL OR deleted_at IS NOT NULL", name="deleted_by_with_time"),
    )


class ItemAttachment(Base):
    """A file attached to an agenda item (spec MeetingAgendaItemAttachment). `storage_path` is relative to the
    storage root (or the S3 key) and derived from the id only: no client input reaches the file system."""

    __tablename__ = ITEM_ATTACHMENTS
    __table_args__ = (
        *_file_checks("agenda-item"),
        Index("ix_meeting_agenda_item_attachments_item", "agenda_item_id", "uploaded_at",
              postgresql_where=text("deleted_at IS NULL")),
        Index("ix_meeting_agenda_item_attachments_deleted_at", "deleted_at",
              postgresql_where=text("deleted_at IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    agenda_item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("meeting_attendance.meeting_agenda_items.id"))
    uploaded_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    filename: Mapped[str] = mapped_column(String(255))
    mime_type: Mapped[str] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(BigInteger)
    storage_path: Mapped[str] = mapped_column(String(512))
    sha256: Mapped[str] = mapped_column(String(64))
    uploaded_at: Mapped[datetime]
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    organization_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))


class MeetingAttachment(Base):
    """A file attached to the meeting itself (spec MeetingAttachment: minutes, sign-in sheets, notices), with an
    optional category; not part of the task flow and untouched by agenda deletions."""

    __tablename__ = MEETING_ATTACHMENTS
    __table_args__ = (
        *_file_checks("meeting"),
        CheckConstraint(f"category IS NULL OR category IN {ATTACHMENT_CATEGORIES!r}", name="category"),
        Index("ix_meeting_attachments_meeting", "meeting_id", "uploaded_at",
              postgresql_where=text("deleted_at IS NULL")),
        Index("ix_meeting_attachments_deleted_at", "deleted_at", postgresql_where=text("deleted_at IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    meeting_id: Mapped[str] = mapped_column(String(32), ForeignKey("meeting_attendance.meetings.id"))
    uploaded_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    category: Mapped[str | None] = mapped_column(String(16))
    filename: Mapped[str] = mapped_column(String(255))
    mime_type: Mapped[str] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(BigInteger)
    storage_path: Mapped[str] = mapped_column(String(512))
    sha256: Mapped[str] = mapped_column(String(64))
    uploaded_at: Mapped[datetime]
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    organization_id: Mapped[uuid.UUID | None]
    deleted_at: Mapped[datetime | None]
    deleted_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(USER_FK))
