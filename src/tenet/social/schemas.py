"""Request and response DTOs of social collaboration (spec 000 §I-2 field names, plus the extras of the design
§6.0). Requests forbid unknown fields; responses are built from read-path rows or ORM rows."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from tenet.social.permissions import GroupRole


def _utf8(value: str) -> str:
    """Text PostgreSQL can store: a lone surrogate (valid in a JSON string escape, not in UTF-8) is refused."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


Utf8 = AfterValidator(_utf8)
Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200,
                                         pattern=r"^[^\x00-\x1f\x7f-\x9f]+$"), Utf8]
LongText = Annotated[str, StringConstraints(max_length=10000, pattern=r"^[^\x00]*$"), Utf8]
Bio = Annotated[str, StringConstraints(max_length=2000, pattern=r"^[^\x00]*$"), Utf8]
HttpsUrl = Annotated[str, StringConstraints(max_length=2048, pattern=r"^https://[^\s\x00]+$"), Utf8]
Zone = Annotated[str, StringConstraints(min_length=1, max_length=64), Utf8]
Short = Annotated[str, StringConstraints(max_length=2000, pattern=r"^[^\x00]*$"), Utf8]
Clock = Annotated[str, StringConstraints(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Read(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# --- profile, settings, agent --------------------------------------------------------------------------


class ProfileRead(Read):
    id: uuid.UUID
    username: str
    avatar_url: str | None
    bio: str | None
    created_at: datetime
    updated_at: datetime
    version: int


class ProfileUpdate(Strict):
    """A merge patch: absent fields stay; `null` clears avatar_url or bio (username cannot be null)."""

    username: Title | None = None
    avatar_url: HttpsUrl | None = None
    bio: Bio | None = None


class ProfilePublicRead(Read):
    id: uuid.UUID
    username: str
    avatar_url: str | None
    bio: str | None


class SettingsRead(BaseModel):
    settings: dict[str, dict[str, Any]] = Field(description="Effective settings: what you set, over the defaults")
    settings_version: int


class AgentType(StrEnum):
    INTENT_RECOGNITION = "INTENT_RECOGNITION"
    TASK_EXECUTION = "TASK_EXECUTION"
    RESULT_REPORTING = "RESULT_REPORTING"


class AgentStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    MIGRATING = "migrating"


class UserAgentRead(Read):
    id: uuid.UUID
    user_id: uuid.UUID
    llm_id: uuid.UUID
    agent_type: AgentType
    status: AgentStatus
    capability_version: int
    config: dict[str, Any]
    updated_at: datetime
    version: int


class SettableAgentStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class AgentUpdate(Strict):
    llm_id: uuid.UUID | None = None
    agent_type: AgentType | None = None
    status: SettableAgentStatus | None = None
    config: dict[str, Any] | None = Field(None, description="Merged into the agent's config (RFC 7396)")


class CalendarFeedRead(BaseModel):
    url: str
    token: str


# --- friendships ---------------------------------------------------------------------------------------


class FriendshipStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELED = "canceled"
    BLOCKED = "blocked"


class FriendshipCreate(Strict):
    user_id: uuid.UUID


class FriendshipRead(Read):
    id: uuid.UUID
    user_a: uuid.UUID
    user_b: uuid.UUID
    status: FriendshipStatus
    initiator_id: uuid.UUID
    requested_at: datetime | None
    accepted_at: datetime | None
    other_user_id: uuid.UUID
    other_username: str | None
    blocked_by: uuid.UUID | None = Field(None, description="Set only when you are the blocker")
    closed_reason: str | None
    updated_at: datetime
    version: int


# --- groups --------------------------------------------------------------------------------------------


class Visibility(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"


class GroupStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"


class MemberStatus(StrEnum):
    ACTIVE = "active"
    MUTED = "muted"


class GroupCreate(Strict):
    name: Title
    description: Short | None = None
    visibility: Visibility = Visibility.PRIVATE


class GroupUpdate(Strict):
    name: Title | None = None
    description: Short | None = None
    visibility: Visibility | None = None


class GroupRead(Read):
    id: uuid.UUID
    name: str
    owner_id: uuid.UUID
    visibility: Visibility
    status: GroupStatus
    description: str | None
    my_role: GroupRole | None = Field(None, description="null when you are not a member")
    my_status: MemberStatus | None = None
    created_at: datetime
    archived_at: datetime | None
    version: int


class GroupMemberRead(Read):
    group_id: uuid.UUID
    user_id: uuid.UUID
    role: GroupRole
    status: MemberStatus
    joined_at: datetime
    username: str | None = None
    join_source: str
    invited_by: uuid.UUID | None


class GroupInvite(Strict):
    user_id: uuid.UUID


class GroupInvitationRead(Read):
    id: uuid.UUID = Field(description="The invitation's inbox message id")
    group_id: uuid.UUID
    user_id: uuid.UUID
    invited_by: uuid.UUID | None
    status: str
    created_at: datetime


class MemberUpdate(Strict):
    role: GroupRole | None = Field(None, description="admin or member (creators); creator hands the group over")
    status: MemberStatus | None = Field(None, description="muted or active (yourself only)")


# --- schedule items ------------------------------------------------------------------------------------


class SourceType(StrEnum):
    MANUAL = "manual"
    IMPORTED = "imported"
    AGENT_GENERATED = "agent_generated"


class ItemStatus(StrEnum):
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELED = "canceled"


class Permission(StrEnum):
    VIEW = "view"
    INVITE = "invite"
    EDIT = "edit"


class ItemCreate(Strict):
    title: Title
    description: LongText | None = None
    start_at: datetime
    end_at: datetime
    timezone: Zone | None = Field(None, description="IANA zone; default: yours (settings)")
    recurrence_rule: Annotated[str, StringConstraints(max_length=500), Utf8] | None = Field(
        None, description="RFC 5545 RRULE value, e.g. FREQ=WEEKLY;BYDAY=MO")
    source_type: SourceType = SourceType.MANUAL
    status: ItemStatus = ItemStatus.ACTIVE


class ItemUpdate(Strict):
    title: Title | None = None
    description: LongText | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    timezone: Zone | None = None
    recurrence_rule: Annotated[str, StringConstraints(max_length=500), Utf8] | None = None
    source_type: SourceType | None = None
    status: ItemStatus | None = None


class OccurrenceRead(BaseModel):
    item_id: uuid.UUID
    start_at: datetime
    end_at: datetime
    local_start: datetime
    local_end: datetime


class ScheduleItemRead(Read):
    id: uuid.UUID
    owner_id: uuid.UUID
    title: str
    description: str | None
    start_at: datetime
    end_at: datetime
    timezone: str
    recurrence_rule: str | None
    source_type: SourceType
    status: ItemStatus
    created_at: datetime
    updated_at: datetime
    series_end_at: datetime | None
    version: int
    my_permission: list[Permission]


class SubjectType(StrEnum):
    USER = "user"
    GROUP = "group"


class NotifyLevel(StrEnum):
    ALL = "all"
    MENTIONS = "mentions"
    NONE = "none"


class SubscriptionCreate(Strict):
    subject_type: SubjectType
    subject_id: uuid.UUID
    permission: list[Permission] | None = Field(None, max_length=3, description="Default: view (user), your "
                                                "role's default within your rights (group)")
    notify_level: NotifyLevel = NotifyLevel.ALL


class SubscriberStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class SubscriptionUpdate(Strict):
    permission: list[Permission] | None = Field(None, max_length=3)
    notify_level: NotifyLevel | None = None
    status: SubscriberStatus | None = Field(None, description="paused or active (the subscriber only)")


class SubscriptionStatus(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    PAUSED = "paused"
    UNSUBSCRIBED = "unsubscribed"


class ScheduleSubscriptionRead(Read):
    id: uuid.UUID
    item_id: uuid.UUID
    subscriber_id: uuid.UUID
    permission: list[Permission]
    notify_level: NotifyLevel
    status: SubscriptionStatus
    created_at: datetime
    subject_type: SubjectType
    accepted_at: datetime | None
    updated_at: datetime
    version: int


# --- inbox ---------------------------------------------------------------------------------------------


class MessageType(StrEnum):
    FRIEND_REQUEST = "friend_request"
    GROUP_INVITATION = "group_invitation"
    SCHEDULE_ITEM_SHARED = "schedule_item_shared"
    SCHEDULE_REMINDER = "schedule_reminder"
    TODO_DIGEST = "todo_digest"
    AUTOMATION_FAILED = "automation_failed"


class MessageStatus(StrEnum):
    PENDING = "pending"
    READ = "read"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DISMISSED = "dismissed"


class InboxMessageRead(Read):
    id: uuid.UUID
    recipient_id: uuid.UUID
    sender_id: uuid.UUID | None
    message_type: MessageType
    content: dict[str, Any]
    related_type: str
    related_id: uuid.UUID
    status: MessageStatus
    created_at: datetime
    read_at: datetime | None
    acted_at: datetime | None
    actionable: bool


class Effect(BaseModel):
    type: str
    id: uuid.UUID


class InboxActionRead(InboxMessageRead):
    effect: Effect | None = None


class InboxSummary(BaseModel):
    pending_count: int


# --- todos ---------------------------------------------------------------------------------------------


class Priority(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    URGENT = "urgent"


class TodoStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    CANCELED = "canceled"
    ARCHIVED = "archived"


class TodoCreate(Strict):
    title: Title
    description: LongText | None = None
    due_at: datetime | None = None
    priority: Priority = Priority.MEDIUM
    source_ids: list[uuid.UUID] = Field(default_factory=list, max_length=20)


class TodoUpdate(Strict):
    title: Title | None = None
    description: LongText | None = None
    due_at: datetime | None = None
    priority: Priority | None = None
    status: TodoStatus | None = None
    source_ids: list[uuid.UUID] | None = Field(None, max_length=20)


class TodoRead(Read):
    id: uuid.UUID
    owner_id: uuid.UUID
    title: str
    description: str | None
    due_at: datetime | None
    priority: Priority
    status: TodoStatus
    source_ids: list[uuid.UUID]
    created_at: datetime
    completed_at: datetime | None
    occurrence_start: datetime | None = Field(None, description="The occurrence this todo was extracted for")
    updated_at: datetime
    version: int


class TodoExtract(Strict):
    schedule_item_ids: list[uuid.UUID] = Field(min_length=1, max_length=50)
    from_: datetime | None = Field(None, alias="from")
    to: datetime | None = None
    priority: Priority = Priority.MEDIUM


class TodoExtracted(BaseModel):
    items: list[TodoRead]
    created_ids: list[uuid.UUID]
    existing_ids: list[uuid.UUID]


# --- automations ---------------------------------------------------------------------------------------


class ScheduleType(StrEnum):
    DAILY = "daily"
    WEEKLY = "weekly"


class JobStatus(StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


class TargetType(StrEnum):
    USER = "user"
    SCHEDULE_ITEM = "schedule_item"


class AutomationCreate(Strict):
    name: Title
    job_type: Annotated[str, StringConstraints(max_length=50), Utf8]
    target_type: TargetType = TargetType.USER
    target_id: uuid.UUID | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    schedule_type: ScheduleType
    schedule_time: Clock
    schedule_weekday: int | None = Field(None, ge=1, le=7, description="ISO weekday, 1 = Monday (weekly only)")
    status: JobStatus = JobStatus.ACTIVE


class AutomationUpdate(Strict):
    name: Title | None = None
    params: dict[str, Any] | None = None
    target_type: TargetType | None = None
    target_id: uuid.UUID | None = None
    schedule_type: ScheduleType | None = None
    schedule_time: Clock | None = None
    schedule_weekday: int | None = Field(None, ge=1, le=7)


class AutomationJobRead(Read):
    id: uuid.UUID
    owner_id: uuid.UUID
    name: str
    job_type: str
    target_type: TargetType
    target_id: uuid.UUID
    params: dict[str, Any]
    schedule_type: ScheduleType
    schedule_time: str
    status: JobStatus
    created_at: datetime
    schedule_weekday: int | None
    timezone: str
    next_run_at: datetime | None
    updated_at: datetime
    version: int


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class AutomationRunRead(Read):
    id: uuid.UUID
    job_id: uuid.UUID
    scheduled_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    status: RunStatus
    attempt: int
    error_message: str | None
    result: dict[str, Any] | None
    trigger: str
    error_code: str | None
    max_attempts: int
    next_attempt_at: datetime | None
    missed_slots: int


class JobTypeRead(BaseModel):
    job_type: str
    description: str
    target_types: list[str]
    params_schema: dict[str, Any]
    misfire_grace_seconds: int
