"""Request and response DTOs of the agenda (API.md "Agenda", "Upload tasks", "Attachments"). The spec's `order`
is the field name (`sort_order` in the tables); `size` is a string (spec §BigInt 响应序列化). The external view is a
type of its own with no description, presenter, tasks or attachments (spec: 后端 DTO 剥离)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from tenet.meetings.agenda.models import ATTACHMENT_CATEGORIES, CATEGORY_TAGS

# No NUL characters: PostgreSQL cannot store them in text, so they are refused by the schema (422), not the database.
NO_NUL = r"^[^\x00]*$"
Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200, pattern=NO_NUL)]
Code = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=NO_NUL)]
Description = Annotated[str, StringConstraints(max_length=20000, pattern=NO_NUL)]
Minutes = Annotated[int, Field(ge=1, le=1440)]

# AgendaCategoryTag and MeetingAttachmentCategory (D-32; the tables' CHECKs name the same values).
CategoryTag = Literal["REPORT", "DISCUSSION", "DECISION", "INFORMATION", "OTHER"]
AttachmentCategory = Literal["MINUTES", "MATERIAL", "OTHER"]
assert set(CategoryTag.__args__) == set(CATEGORY_TAGS)  # type: ignore[attr-defined]
assert set(AttachmentCategory.__args__) == set(ATTACHMENT_CATEGORIES)  # type: ignore[attr-defined]


class TaskStatus(StrEnum):
    PENDING = "PENDING"
    UPLOADED = "UPLOADED"
    CANCELLED = "CANCELLED"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SectionCreate(Strict):
    title: Title


class SectionUpdate(Strict):
    title: Title


class Order(Strict):
    ids: Annotated[list[uuid.UUID], Field(max_length=500, description="Every live section (item), in the new order")]


class ItemCreate(Strict):
    title: Title
    description: Description | None = None
    code: Code | None = Field(None, description='A free label such as "1.2" (not unique)')
    time_minutes: Minutes | None = None
    presenter_user_id: uuid.UUID | None = Field(None, description="An active account")
    category_tag: CategoryTag | None = None


class ItemUpdate(Strict):
    """Absent fields are unchanged; null clears a nullable one. `section_id` moves the item to the end of another
    section of the same meeting."""

    title: Title | None = None
    description: Description | None = None
    code: Code | None = None
    time_minutes: Minutes | None = None
    presenter_user_id: uuid.UUID | None = None
    category_tag: CategoryTag | None = None
    section_id: uuid.UUID | None = None


class Person(BaseModel):
    user_id: uuid.UUID
    display_name: str | None


class UploadTaskRead(BaseModel):
    id: uuid.UUID
    agenda_item_id: uuid.UUID
    assignee_user_id: uuid.UUID
    assigned_by_id: uuid.UUID
    status: TaskStatus
    due_at: datetime | None
    assigned_at: datetime
    completed_at: datetime | None
    cancelled_at: datetime | None
    version: int


class AttachmentBase(BaseModel):
    id: uuid.UUID
    uploaded_by_id: uuid.UUID
    filename: str
    mime_type: str
    size: str = Field(description="Bytes, as a string (64-bit)")
    sha256: str
    uploaded_at: datetime
    download_url: str


class ItemAttachmentRead(AttachmentBase):
    agenda_item_id: uuid.UUID
    task_completed_id: uuid.UUID | None = Field(None, description="The upload task this upload completed, if any")


class MeetingAttachmentRead(AttachmentBase):
    meeting_id: str
    category: AttachmentCategory | None


class SectionRead(BaseModel):
    id: uuid.UUID
    meeting_id: str
    order: int
    title: str
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int


class ItemRead(BaseModel):
    id: uuid.UUID
    section_id: uuid.UUID
    order: int
    title: str
    description: str | None
    code: str | None
    time_minutes: int | None
    presenter: Person | None
    category_tag: CategoryTag | None
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int


class AgendaItemView(ItemRead):
    attachments: list[ItemAttachmentRead]
    upload_tasks: list[UploadTaskRead] = Field(description="All tasks for managers and the creator; one's own else")


class AgendaSectionView(SectionRead):
    items: list[AgendaItemView]


class AgendaRead(BaseModel):
    """The full view: managers, the meeting's creator, organizer and required attendees."""

    view: Literal["full"] = "full"
    meeting_id: str
    modified_after_meeting_end: bool = Field(description="An agenda change was made after the meeting ended")
    sections: list[AgendaSectionView]
    meeting_attachments: list[MeetingAttachmentRead]


class ExternalItem(BaseModel):
    id: uuid.UUID
    order: int
    title: str


class ExternalSection(BaseModel):
    id: uuid.UUID
    order: int
    title: str
    items: list[ExternalItem]


class AgendaExternalRead(BaseModel):
    """The restricted view of an external attendee (a signed-in walk-in): titles only."""

    view: Literal["restricted"] = "restricted"
    meeting_id: str
    sections: list[ExternalSection]


class OrderRead(BaseModel):
    ids: list[uuid.UUID]


class TaskAssign(Strict):
    assignee_user_ids: Annotated[list[uuid.UUID], Field(min_length=1, max_length=200)]
    due_at: AwareDatetime | None = None


class TaskList(BaseModel):
    items: list[UploadTaskRead]


class Ref(BaseModel):
    id: uuid.UUID
    title: str


class MeetingRef(BaseModel):
    id: str
    title: str
    start_time: datetime
    timezone: str
    status: str


class MyUploadTaskRead(BaseModel):
    id: uuid.UUID
    status: TaskStatus
    due_at: datetime | None
    assigned_at: datetime
    completed_at: datetime | None
    cancelled_at: datetime | None
    agenda_item: Ref
    section: Ref
    meeting: MeetingRef


class DeletedAttachmentRead(BaseModel):
    kind: Literal["agenda-item", "meeting"]
    id: uuid.UUID
    filename: str
    mime_type: str
    size: str
    deleted_at: datetime
    deleted_by_id: uuid.UUID
    purge_after: datetime
