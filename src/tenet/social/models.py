"""Tables of social collaboration (schema `social`, spec 000 §C), derived from SOC-INV-01..22 (invariants.py).

Table names are the spec's. Every state column carries its facts in CHECKs (a `blocked` friendship names its
blocker, a `done` todo its completion time); every unique rule over live rows is a partial unique index. FKs to
accounts are NO ACTION: identity never deletes an account row (deletion is a state), so the spec's "user
deleted -> CASCADE" is carried out table by table by the AccountDeleted handler (service.account_deleted).
"""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Computed,
    ForeignKey,
    Index,
    SmallInteger,
    Text,
    Time,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

import tenet.iam.models  # noqa: F401  (iam.user_account must be on the metadata for the foreign keys)
from tenet.db.base import Base

SCHEMA = "social"
ACCOUNT = "iam.user_account.id"

# Names the invariant catalog, the error mapping and the bypass tests refer to.
AGENT_LIVE_INDEX = "uq_user_agents_user_live"
FRIEND_PAIR_UNIQUE = "uq_friendships_user_low_id_user_high_id"
MEMBER_UNIQUE = "uq_group_members_group_id_user_id"
CURRENT_CREATOR_INDEX = "uq_group_members_current_creator"
SUBSCRIPTION_UNIQUE = "uq_schedule_subscriptions_item_id_subscriber_id"
OPEN_ACTION_INDEX = "uq_inbox_messages_open_action"
DEDUP_INDEX = "uq_inbox_messages_dedup"
EXTRACTED_INDEX = "uq_todos_extracted_occurrence"
RUN_SLOT_UNIQUE = "uq_automation_runs_job_id_scheduled_at"
FEED_UNIQUE = "uq_profiles_calendar_feed_id"
INBOX_TERMINAL_TRIGGER = "inbox_messages_terminal_is_final"
RUN_TERMINAL_TRIGGER = "automation_runs_terminal_is_final"
GROUP_CREATOR_TRIGGERS = ("group_has_one_creator", "group_member_keeps_creator")
INBOX_ACCEPT_TRIGGER = "inbox_accept_has_effect"
OWNER_NOT_SUBSCRIBED_TRIGGER = "schedule_subscriptions_owner_not_subscribed"
OWNER_FIXED_TRIGGER = "schedule_items_owner_is_fixed"

CANONICAL_PERMISSIONS = ('["view"]', '["view", "invite"]', '["view", "edit"]', '["view", "invite", "edit"]')
_PERMISSION_SQL = ", ".join(f"'{p}'::jsonb" for p in CANONICAL_PERMISSIONS)
_ZONE_SHAPE = r"'^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$'"


class Profile(Base):
    """One per account (`id` = the account id), created with it (SOC-INV-01); soft-deleted and scrubbed when
    the account is deleted. `settings` is sparse (only what the user set; defaults apply on read)."""

    __tablename__ = "profiles"
    __table_args__ = (
        CheckConstraint("length(username) BETWEEN 1 AND 200 AND username = btrim(username) "
                        "AND username !~ '[[:cntrl:]]'", name="username_length"),
        CheckConstraint("avatar_url IS NULL OR (avatar_url ~ '^https://' AND length(avatar_url) <= 2048)",
                        name="avatar_url"),
        CheckConstraint("bio IS NULL OR length(bio) <= 2000", name="bio_length"),
        CheckConstraint("social.settings_valid(settings, settings_version)", name="settings_valid"),
        CheckConstraint("settings_version IN (1)", name="settings_version_known"),
        CheckConstraint("(deleted_at IS NULL) = (calendar_feed_id IS NOT NULL) AND "
                        "(calendar_feed_id IS NULL OR calendar_feed_id ~ '^[A-Za-z0-9_-]{22}$')",
                        name="calendar_feed"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(FEED_UNIQUE, "calendar_feed_id", unique=True),
        Index("ix_profiles_username", "username"),
        Index("ix_profiles_settings", "settings", postgresql_using="gin",
              postgresql_ops={"settings": "jsonb_path_ops"}),
        Index("ix_profiles_notification_enabled", text("(settings #>> '{notification,enabled}')")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT), primary_key=True)
    username: Mapped[str] = mapped_column(Text)
    avatar_url: Mapped[str | None] = mapped_column(Text)
    bio: Mapped[str | None] = mapped_column(Text)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    settings_version: Mapped[int] = mapped_column(server_default=text("1"))
    calendar_feed_id: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class UserAgent(Base):
    """The user's own agent: exactly one live row per active account (SOC-INV-01)."""

    __tablename__ = "user_agents"
    __table_args__ = (
        CheckConstraint("agent_type IN ('INTENT_RECOGNITION', 'TASK_EXECUTION', 'RESULT_REPORTING')",
                        name="agent_type"),
        CheckConstraint("status IN ('active', 'paused', 'migrating')", name="status"),
        CheckConstraint("jsonb_typeof(config) = 'object' AND octet_length(config::text) <= 16384",
                        name="config_object"),
        CheckConstraint("capability_version >= 1", name="capability_version"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(AGENT_LIVE_INDEX, "user_id", unique=True, postgresql_where=text("deleted_at IS NULL")),
        Index("ix_user_agents_status", "status"),
        Index("ix_user_agents_agent_type", "agent_type"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    llm_id: Mapped[uuid.UUID]
    agent_type: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    capability_version: Mapped[int] = mapped_column(server_default=text("1"))
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class Friendship(Base):
    """One row per unordered pair, reused across request cycles (SOC-INV-04/05)."""

    __tablename__ = "friendships"
    __table_args__ = (
        CheckConstraint("user_low_id < user_high_id", name="pair_ordered"),
        CheckConstraint("initiator_id IN (user_low_id, user_high_id)", name="initiator_in_pair"),
        CheckConstraint("status IN ('pending', 'accepted', 'declined', 'canceled', 'blocked')", name="status"),
        CheckConstraint("status <> 'pending' OR requested_at IS NOT NULL", name="pending_has_request"),
        CheckConstraint("(status = 'accepted') = (accepted_at IS NOT NULL)", name="accepted_has_time"),
        CheckConstraint("(status = 'blocked') = (blocked_by IS NOT NULL AND blocked_at IS NOT NULL)",
                        name="blocked_has_blocker"),
        CheckConstraint("blocked_by IS NULL OR blocked_by IN (user_low_id, user_high_id)", name="blocker_in_pair"),
        CheckConstraint("(status IN ('declined', 'canceled')) = (closed_at IS NOT NULL AND closed_reason IS NOT NULL) "
                        "AND (status <> 'declined' OR closed_reason = 'declined') "
                        "AND (status <> 'canceled' OR closed_reason IN "
                        "('withdrawn', 'unfriended', 'unblocked', 'account_deleted'))", name="closed_has_reason"),
        CheckConstraint("version > 0", name="version_positive"),
        UniqueConstraint("user_low_id", "user_high_id"),
        Index("ix_friendships_user_low_id_status_id", "user_low_id", "status", "id"),
        Index("ix_friendships_user_high_id_status_id", "user_high_id", "status", "id"),
        Index("ix_friendships_pending", "status", postgresql_where=text("status = 'pending'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    user_low_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    user_high_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    initiator_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    requested_at: Mapped[datetime | None]
    accepted_at: Mapped[datetime | None]
    blocked_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    blocked_at: Mapped[datetime | None]
    closed_at: Mapped[datetime | None]
    closed_reason: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class Group(Base):
    """A social group (the social domain's own; not a workspace). Never deleted: archived is its end."""

    __tablename__ = "groups"
    __table_args__ = (
        CheckConstraint("length(name) BETWEEN 1 AND 200 AND name = btrim(name)", name="name_length"),
        CheckConstraint("description IS NULL OR length(description) <= 2000", name="description_length"),
        CheckConstraint("visibility IN ('public', 'private')", name="visibility"),
        CheckConstraint("status IN ('active', 'archived')", name="status"),
        CheckConstraint("(status = 'archived') = (archived_at IS NOT NULL)", name="archived_has_time"),
        CheckConstraint("version > 0", name="version_positive"),
        Index("ix_groups_owner_id_status", "owner_id", "status"),
        Index("ix_groups_visibility", "visibility"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    visibility: Mapped[str] = mapped_column(Text, server_default=text("'private'"))
    owner_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    archived_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class GroupMember(Base):
    """One row per (group, user), reused when someone rejoins (SOC-INV-08). "Current" = active or muted."""

    __tablename__ = "group_members"
    __table_args__ = (
        CheckConstraint("role IN ('creator', 'admin', 'member')", name="role"),
        CheckConstraint("join_source IN ('invited', 'joined')", name="join_source"),
        CheckConstraint("(join_source = 'invited') = (invited_by IS NOT NULL)", name="invited_has_inviter"),
        CheckConstraint("status IN ('active', 'muted', 'removed')", name="status"),
        CheckConstraint("(status = 'removed') = (removed_at IS NOT NULL AND removal_reason IS NOT NULL) AND "
                        "(removal_reason IS NULL OR removal_reason IN ('left', 'removed', 'account_deleted'))",
                        name="removed_has_time"),
        CheckConstraint("version > 0", name="version_positive"),
        UniqueConstraint("group_id", "user_id"),
        Index(CURRENT_CREATOR_INDEX, "group_id", unique=True,
              postgresql_where=text("role = 'creator' AND status <> 'removed'")),
        Index("ix_group_members_group_id_role_status", "group_id", "role", "status"),
        Index("ix_group_members_user_id_status", "user_id", "status", postgresql_include=["group_id", "role"]),
        Index("ix_group_members_current", "group_id", "joined_at", "id", postgresql_where=text("status <> 'removed'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    group_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("social.groups.id", ondelete="CASCADE"))
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    role: Mapped[str] = mapped_column(Text)
    join_source: Mapped[str] = mapped_column(Text)
    invited_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    joined_at: Mapped[datetime]
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    removed_at: Mapped[datetime | None]
    removed_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    removal_reason: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class ScheduleItem(Base):
    """An item bound to a schedule: a first occurrence [start_at, end_at] in an IANA zone, optionally repeated
    by an RFC 5545 RRULE. `series_end_at` (computed by the service) is the end of the last occurrence
    (NULL = unbounded), so window reads need no expansion (SOC-INV-10)."""

    __tablename__ = "schedule_items"
    __table_args__ = (
        CheckConstraint("end_at >= start_at", name="end_after_start"),
        CheckConstraint("end_at - start_at <= interval '366 days'", name="duration_bounded"),
        CheckConstraint(f"timezone ~ {_ZONE_SHAPE}", name="timezone_shape"),
        CheckConstraint("recurrence_rule IS NULL OR (length(recurrence_rule) <= 500 AND recurrence_rule ~ "
                        "'^FREQ=(DAILY|WEEKLY|MONTHLY|YEARLY)(;[A-Z]+=[A-Za-z0-9,+-]+)*$')",
                        name="recurrence_shape"),
        CheckConstraint("(recurrence_rule IS NULL AND series_end_at = end_at) OR "
                        "(recurrence_rule IS NOT NULL AND (series_end_at IS NULL OR series_end_at >= end_at))",
                        name="series_end"),
        CheckConstraint("length(title) BETWEEN 1 AND 200", name="title_length"),
        CheckConstraint("description IS NULL OR length(description) <= 10000", name="description_length"),
        CheckConstraint("source_type IN ('manual', 'imported', 'agent_generated')", name="source_type"),
        CheckConstraint("status IN ('active', 'completed', 'canceled')", name="status"),
        CheckConstraint("version > 0", name="version_positive"),
        Index("ix_schedule_items_owner_id_start_at", "owner_id", "start_at", "id"),
        Index("ix_schedule_items_status_start_at", "status", "start_at"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    owner_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    start_at: Mapped[datetime]
    end_at: Mapped[datetime]
    timezone: Mapped[str] = mapped_column(Text)
    recurrence_rule: Mapped[str | None] = mapped_column(Text)
    series_end_at: Mapped[datetime | None]
    source_type: Mapped[str] = mapped_column(Text, server_default=text("'manual'"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class ScheduleSubscription(Base):
    """A user's or a group's subscription to an item (§C.4, §D.2), one row per (item, subscriber) forever.
    The subject's kind is checked by FKs on two generated columns (a user id must be an account, a group id a
    group). `pending` is a personal offer not yet accepted (D-14)."""

    __tablename__ = "schedule_subscriptions"
    __table_args__ = (
        CheckConstraint("subject_type IN ('user', 'group')", name="subject_type"),
        CheckConstraint(f"permission IN ({_PERMISSION_SQL})", name="permission_canonical"),
        CheckConstraint("notify_level IN ('all', 'mentions', 'none')", name="notify_level"),
        CheckConstraint("status IN ('pending', 'active', 'paused', 'unsubscribed')", name="status"),
        CheckConstraint("subject_type = 'user' OR status <> 'pending'", name="group_never_pending"),
        CheckConstraint("version > 0", name="version_positive"),
        UniqueConstraint("item_id", "subscriber_id"),
        # The schedule window's two look-ups (a user's own subscriptions, its groups'), index-only: subject_type
        # is in the key, so neither visits the heap (docs/decisions.md, "Social at scale").
        Index("ix_schedule_subscriptions_subscriber_id_subject_type_status", "subscriber_id", "subject_type", "status",
              postgresql_include=["item_id", "permission"]),
        Index("ix_schedule_subscriptions_item_id_status", "item_id", "status"),
        Index("ix_schedule_subscriptions_subscriber_user_id", "subscriber_user_id",
              postgresql_where=text("subscriber_user_id IS NOT NULL")),
        Index("ix_schedule_subscriptions_subscriber_group_id", "subscriber_group_id",
              postgresql_where=text("subscriber_group_id IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    item_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("social.schedule_items.id", ondelete="CASCADE"))
    subject_type: Mapped[str] = mapped_column(Text)
    subscriber_id: Mapped[uuid.UUID]
    subscriber_user_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey(ACCOUNT), Computed("CASE WHEN subject_type = 'user' THEN subscriber_id END", persisted=True))
    subscriber_group_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("social.groups.id"), Computed("CASE WHEN subject_type = 'group' THEN subscriber_id END",
                                                 persisted=True))
    permission: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[\"view\"]'::jsonb"))
    notify_level: Mapped[str] = mapped_column(Text, server_default=text("'all'"))
    status: Mapped[str] = mapped_column(Text)
    accepted_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    updated_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class InboxMessage(Base):
    """The recipient's view (§C.5): who sent what, linked to which object. Terminal states are final
    (trigger); only the spec's three types are actionable (D-21)."""

    __tablename__ = "inbox_messages"
    __table_args__ = (
        CheckConstraint("message_type IN ('friend_request', 'group_invitation', 'schedule_item_shared', "
                        "'schedule_reminder', 'todo_digest', 'automation_failed')", name="message_type"),
        CheckConstraint("(message_type, related_type) IN (('friend_request', 'friendship'), ('group_invitation', "
                        "'group'), ('schedule_item_shared', 'schedule_item'), ('schedule_reminder', 'schedule_item'), "
                        "('todo_digest', 'automation_job'), ('automation_failed', 'automation_job'))",
                        name="related_type_matches"),
        CheckConstraint("NOT actionable OR message_type IN ('friend_request', 'group_invitation', "
                        "'schedule_item_shared')", name="actionable"),
        CheckConstraint("message_type NOT IN ('friend_request', 'group_invitation') OR actionable",
                        name="requests_are_actionable"),
        CheckConstraint("status IN ('pending', 'read', 'accepted', 'rejected', 'dismissed')", name="status"),
        CheckConstraint("(status IN ('accepted', 'rejected', 'dismissed')) = (acted_at IS NOT NULL)",
                        name="acted_has_time"),
        CheckConstraint("status = 'pending' OR read_at IS NOT NULL", name="read_has_time"),
        CheckConstraint("status NOT IN ('accepted', 'rejected') OR actionable", name="answer_needs_action"),
        CheckConstraint("message_type NOT IN ('friend_request', 'group_invitation', 'schedule_item_shared') "
                        "OR sender_id IS NOT NULL", name="sender"),
        CheckConstraint("jsonb_typeof(content) = 'object' AND octet_length(content::text) <= 16384",
                        name="content_object"),
        Index("ix_inbox_messages_pending", "recipient_id", text("created_at DESC"), text("id DESC"),
              postgresql_where=text("status = 'pending'")),
        Index("ix_inbox_messages_recipient_id_status_created_at", "recipient_id", "status", text("created_at DESC"),
              text("id DESC")),
        Index("ix_inbox_messages_recipient_created", "recipient_id", text("created_at DESC"), text("id DESC")),
        Index(OPEN_ACTION_INDEX, "recipient_id", "message_type", "related_id", unique=True,
              postgresql_where=text("actionable AND status IN ('pending', 'read')")),
        Index("ix_inbox_messages_open_related", "related_type", "related_id",
              postgresql_where=text("actionable AND status IN ('pending', 'read')")),
        Index(DEDUP_INDEX, "recipient_id", "dedup_key", unique=True, postgresql_where=text("dedup_key IS NOT NULL")),
        Index("ix_inbox_messages_automation_run_id", "automation_run_id",
              postgresql_where=text("automation_run_id IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    recipient_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    sender_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    message_type: Mapped[str] = mapped_column(Text)
    content: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    related_type: Mapped[str] = mapped_column(Text)
    related_id: Mapped[uuid.UUID]
    actionable: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    dedup_key: Mapped[str | None] = mapped_column(Text)
    automation_run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("social.automation_runs.id", ondelete="SET NULL"))
    created_at: Mapped[datetime]
    read_at: Mapped[datetime | None]
    acted_at: Mapped[datetime | None]
    acted_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class Todo(Base):
    """A todo (§C.6). Extracted todos carry their key (source item, occurrence start): one per owner and
    occurrence (SOC-INV-16). A deleted source leaves the todo archived, not gone (SOC-INV-17)."""

    __tablename__ = "todos"
    __table_args__ = (
        CheckConstraint("length(title) BETWEEN 1 AND 200", name="title_length"),
        CheckConstraint("description IS NULL OR length(description) <= 10000", name="description_length"),
        CheckConstraint("priority IN ('low', 'medium', 'high', 'urgent')", name="priority"),
        CheckConstraint("status IN ('pending', 'done', 'canceled', 'archived')", name="status"),
        CheckConstraint("(status = 'done') = (completed_at IS NOT NULL)", name="completed_has_time"),
        CheckConstraint("social.is_uuid_array(source_ids, 20)", name="source_ids"),
        CheckConstraint("source_item_id IS NULL OR source_ids @> jsonb_build_array(source_item_id::text)",
                        name="source_item_listed"),
        CheckConstraint("version > 0", name="version_positive"),
        Index("ix_todos_owner_id_status_due_at", "owner_id", "status", "due_at", "id"),
        Index("ix_todos_owner_id_created_at", "owner_id", text("created_at DESC"), text("id DESC")),
        Index("ix_todos_pending_due", "owner_id",
              text("(COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone))"), "id",
              postgresql_where=text("status = 'pending'")),
        Index(EXTRACTED_INDEX, "owner_id", "source_item_id", "source_occurrence_start", unique=True,
              postgresql_nulls_not_distinct=True, postgresql_where=text("source_item_id IS NOT NULL")),
        Index("ix_todos_source_ids", "source_ids", postgresql_using="gin",
              postgresql_ops={"source_ids": "jsonb_path_ops"}),
        Index("ix_todos_source_item_id", "source_item_id", postgresql_where=text("source_item_id IS NOT NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    owner_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    due_at: Mapped[datetime | None]
    priority: Mapped[str] = mapped_column(Text, server_default=text("'medium'"))
    source_ids: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    source_item_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("social.schedule_items.id", ondelete="SET NULL"))
    source_occurrence_start: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    completed_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class AutomationJob(Base):
    """A daily or weekly automation of its owner (§C.7, §F); `next_run_at` is its next slot (UTC), set iff
    active (SOC-INV-19). `schedule_time` is wall time in the owner's time zone (from settings)."""

    __tablename__ = "automation_jobs"
    __table_args__ = (
        CheckConstraint("length(name) BETWEEN 1 AND 200", name="name_length"),
        CheckConstraint("job_type IN ('todo_digest', 'schedule_reminder', 'todo_from_schedule')", name="job_type"),
        CheckConstraint("schedule_type IN ('daily', 'weekly')", name="schedule_type"),
        CheckConstraint("(schedule_type = 'weekly') = (schedule_weekday IS NOT NULL) AND "
                        "(schedule_weekday IS NULL OR schedule_weekday BETWEEN 1 AND 7)", name="weekday_for_weekly"),
        CheckConstraint("date_trunc('minute', schedule_time) = schedule_time", name="whole_minutes"),
        CheckConstraint("status IN ('active', 'disabled')", name="status"),
        CheckConstraint("(status = 'active') = (next_run_at IS NOT NULL)", name="next_run_when_active"),
        CheckConstraint("(target_type = 'user' AND target_id = owner_id) OR "
                        "(target_type = 'schedule_item' AND job_type = 'schedule_reminder')", name="target"),
        CheckConstraint("jsonb_typeof(params) = 'object' AND octet_length(params::text) <= 4096",
                        name="params_object"),
        CheckConstraint("version > 0", name="version_positive"),
        Index("ix_automation_jobs_owner_id_status", "owner_id", "status"),
        Index("ix_automation_jobs_due", "next_run_at", "id", postgresql_where=text("status = 'active'")),
        Index("ix_automation_jobs_item_target", "target_id", postgresql_where=text("target_type = 'schedule_item'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    owner_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(ACCOUNT))
    name: Mapped[str] = mapped_column(Text)
    job_type: Mapped[str] = mapped_column(Text)
    target_type: Mapped[str] = mapped_column(Text, server_default=text("'user'"))
    target_id: Mapped[uuid.UUID]
    params: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    schedule_type: Mapped[str] = mapped_column(Text)
    schedule_time: Mapped[time] = mapped_column(Time)
    schedule_weekday: Mapped[int | None] = mapped_column(SmallInteger)
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    next_run_at: Mapped[datetime | None]
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(ACCOUNT))


class AutomationRun(Base):
    """One execution of a job for one slot (unique per (job, scheduled_at)); queued -> running -> succeeded |
    failed, retried with backoff by going back to queued (SOC-INV-20/21)."""

    __tablename__ = "automation_runs"
    __table_args__ = (
        CheckConstraint("trigger IN ('schedule', 'manual')", name="trigger"),
        CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed')", name="status"),
        CheckConstraint("attempt >= 0 AND attempt <= max_attempts AND max_attempts BETWEEN 1 AND 10", name="attempt"),
        CheckConstraint("(status = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL "
                        "AND started_at IS NOT NULL AND attempt >= 1)", name="running_is_claimed"),
        CheckConstraint("(status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)", name="finished_has_time"),
        CheckConstraint("status <> 'succeeded' OR result IS NOT NULL", name="succeeded_has_result"),
        CheckConstraint("status <> 'failed' OR error_message IS NOT NULL", name="failed_has_error"),
        CheckConstraint("error_message IS NULL OR length(error_message) <= 2000", name="error_message_length"),
        CheckConstraint("missed_slots >= 0", name="missed_slots"),
        UniqueConstraint("job_id", "scheduled_at"),
        Index("ix_automation_runs_status_scheduled_at", "status", "scheduled_at"),
        Index("ix_automation_runs_claimable", "available_at", "id", postgresql_where=text("status = 'queued'")),
        Index("ix_automation_runs_leases", "lease_expires_at", postgresql_where=text("status = 'running'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("social.automation_jobs.id", ondelete="CASCADE"))
    scheduled_at: Mapped[datetime]
    trigger: Mapped[str] = mapped_column(Text, server_default=text("'schedule'"))
    status: Mapped[str] = mapped_column(Text, server_default=text("'queued'"))
    attempt: Mapped[int] = mapped_column(server_default=text("0"))
    max_attempts: Mapped[int]
    available_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None]
    error_code: Mapped[str | None] = mapped_column(Text)
    error_message: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    missed_slots: Mapped[int] = mapped_column(server_default=text("0"))
    created_at: Mapped[datetime]
