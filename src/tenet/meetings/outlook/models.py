"""Tables of the Outlook sync (docs/design/outlook.md §3, issue 17), in `meeting_attendance`, prefixed `outlook_`,
derived from MA-INV-30..40 (invariants.py). Tenet only reads Outlook: these rows are its memory of what it read
(mailboxes, subscriptions, cursors, candidates) and what an administrator decided (policy, bindings, exclusions).

The three triggers on `outlook_event_links` (MA-INV-32, 33, 35) live in the migration only (SQL functions): their
names are here so the invariant catalog and the bypass tests can name them.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Identity, Index, Integer, PrimaryKeyConstraint, Text
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from tenet.db.base import Base
from tenet.meetings.models import SCHEMA, USER_FK

POLICY = "outlook_policy"
MAILBOXES = "outlook_mailboxes"
SUBSCRIPTIONS = "outlook_subscriptions"
CURSORS = "outlook_delta_cursors"
CANDIDATES = "outlook_candidates"
BINDINGS = "outlook_bindings"
EXCLUSIONS = "outlook_exclusions"
LINKS = "outlook_event_links"
NOTIFICATIONS = "outlook_notifications"
RUNS = "outlook_sync_runs"
TABLES = (POLICY, MAILBOXES, SUBSCRIPTIONS, CURSORS, CANDIDATES, BINDINGS, EXCLUSIONS, LINKS, NOTIFICATIONS, RUNS)

MAILBOX_FK = f"{SCHEMA}.{MAILBOXES}.id"
BINDING_FK = f"{SCHEMA}.{BINDINGS}.id"

# Names the invariant catalog, the error mapping and the bypass tests refer to.
BINDING_EVENT_ACTIVE = "uq_outlook_bindings_event_active"
BINDING_MEETING_ACTIVE = "uq_outlook_bindings_meeting_active"
BINDING_SERIES_ACTIVE = "uq_outlook_bindings_series_active"
BINDING_TARGET_CHECK = "ck_outlook_bindings_target"
LINK_OCCURRENCE_UNIQUE = "uq_outlook_links_occurrence"
LINK_SYNC_FROM_TRIGGER = "outlook_links_respect_sync_from"
LINK_EXCLUSION_TRIGGER = "outlook_links_respect_exclusions"
LINK_SOURCE_TRIGGER = "outlook_links_from_current_source"
SUBSCRIPTION_ACTIVE = "uq_outlook_subscriptions_mailbox_active"
SUBSCRIPTION_LIFETIME_CHECK = "ck_outlook_subscriptions_lifetime"
CURSOR_WINDOW_CHECK = "ck_outlook_delta_cursors_link_has_window"
MAILBOX_ADDRESS_LIVE = "uq_outlook_mailboxes_address_live"

MAILBOX_KINDS = ("SHARED", "PERSONAL")
MAILBOX_STATES = ("PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID", "DISABLED")
SUBSCRIPTION_STATES = ("ACTIVE", "REMOVED", "EXPIRED", "DELETED")
CANDIDATE_TYPES = ("singleInstance", "seriesMaster")
BINDING_KINDS = ("SINGLE", "SERIES")
BINDING_STATES = ("PENDING", "ACTIVE", "RELEASED")
BINDING_LIVE = ("PENDING", "ACTIVE")
NOTIFICATION_KINDS = ("CHANGE", "LIFECYCLE")
NOTIFICATION_STATES = ("PENDING", "DONE", "DROPPED")
RUN_KINDS = ("DELTA", "FULL", "BINDING", "RECONCILE", "REPLAY")
RUN_STATES = ("RUNNING", "DONE", "FAILED")
# Graph's documented ceiling for Outlook event subscriptions (GRAPH.md: 10,080 minutes in current docs).
GRAPH_MAX_SUBSCRIPTION_MINUTES = 10_080

# MA-INV-39: the policy's ranges, one place for the CHECKs, the detector and the 422 answer.
POLICY_RANGES: dict[str, tuple[int, int]] = {
    "subscription_lifetime_minutes": (45, 4229),
    "renewal_margin_minutes": (1, 4228),
    "window_days_back": (0, 365),
    "window_days_ahead": (1, 730),
    "batch_size": (10, 1000),
    "max_concurrent_requests": (1, 4),
    "retry_max_attempts": (1, 20),
    "retry_base_seconds": (1, 300),
}
POLICY_DEFAULTS: dict[str, Any] = {
    "subscription_lifetime_minutes": 4200, "renewal_margin_minutes": 720, "window_days_back": 30,
    "window_days_ahead": 365, "reconcile_cron": "17 * * * *", "batch_size": 100, "max_concurrent_requests": 4,
    "retry_max_attempts": 5, "retry_base_seconds": 2,
}


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _policy_checks() -> tuple[CheckConstraint, ...]:
    ranges = tuple(CheckConstraint(f"{column} BETWEEN {low} AND {high}", name=f"{column}_range")
                   for column, (low, high) in POLICY_RANGES.items())
    return (
        CheckConstraint("id = 1", name="single_row"),
        *ranges,
        CheckConstraint("renewal_margin_minutes < subscription_lifetime_minutes", name="margin_below_lifetime"),
        CheckConstraint("reconcile_cron ~ '^[0-9*/,-]+( [0-9*/,A-Za-z-]+){4}$'", name="reconcile_cron_shape"),
        CheckConstraint("version > 0", name="version_positive"),
    )


class OutlookPolicy(Base):
    """The business policy of the sync (one row, id = 1, seeded by the migration; MA-INV-39). Read on every job
    run, so a change takes effect without a restart."""

    __tablename__ = POLICY
    __table_args__ = (*_policy_checks(), {"schema": SCHEMA})

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    subscription_lifetime_minutes: Mapped[int] = mapped_column(Integer)
    renewal_margin_minutes: Mapped[int] = mapped_column(Integer)
    window_days_back: Mapped[int] = mapped_column(Integer)
    window_days_ahead: Mapped[int] = mapped_column(Integer)
    reconcile_cron: Mapped[str] = mapped_column(Text)
    batch_size: Mapped[int] = mapped_column(Integer)
    max_concurrent_requests: Mapped[int] = mapped_column(Integer)
    retry_max_attempts: Mapped[int] = mapped_column(Integer)
    retry_base_seconds: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime | None]
    # No foreign key: the seeded row must survive `TRUNCATE iam.user_account CASCADE` (test clean-ups, a restore);
    # who changed it is also in the audit log (MA-INV-40).
    updated_by_id: Mapped[uuid.UUID | None]
    version: Mapped[int] = mapped_column(Integer, server_default=sql("1"))


class OutlookMailbox(Base):
    """A source of events (spec layer 1): a shared or personal mailbox, its access state and last error."""

    __tablename__ = MAILBOXES
    __table_args__ = (
        CheckConstraint("address = lower(btrim(address)) AND address ~ '^[^@[:space:]]+@[^@[:space:]]+$' AND "
                        "length(address) <= 320", name="address_normalised"),
        CheckConstraint(_one_of("kind", MAILBOX_KINDS), name="kind"),
        CheckConstraint(_one_of("state", MAILBOX_STATES), name="state"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(MAILBOX_ADDRESS_LIVE, "address", unique=True, postgresql_where=sql("state <> 'DISABLED'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    address: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    graph_user_id: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, server_default=sql("'PENDING'"))
    last_error_code: Mapped[str | None] = mapped_column(Text)
    last_error_request_id: Mapped[str | None] = mapped_column(Text)
    last_error_hint: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None]
    last_notification_at: Mapped[datetime | None]
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=sql("1"))


class OutlookSubscription(Base):
    """A Graph subscription on a mailbox's events (MA-INV-36: at most one ACTIVE per mailbox)."""

    __tablename__ = SUBSCRIPTIONS
    __table_args__ = (
        CheckConstraint(_one_of("status", SUBSCRIPTION_STATES), name="status"),
        CheckConstraint(f"expires_at > created_at AND expires_at <= greatest(created_at, renewed_at, reauthorized_at) "
                        f"+ interval '{GRAPH_MAX_SUBSCRIPTION_MINUTES} minutes'", name="lifetime"),
        Index(SUBSCRIPTION_ACTIVE, "mailbox_id", unique=True, postgresql_where=sql("status = 'ACTIVE'")),
        Index("uq_outlook_subscriptions_graph_id", "graph_subscription_id", unique=True),
        Index("ix_outlook_subscriptions_expiry", "expires_at", postgresql_where=sql("status = 'ACTIVE'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK))
    graph_subscription_id: Mapped[str] = mapped_column(Text)
    resource: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime]
    status: Mapped[str] = mapped_column(Text, server_default=sql("'ACTIVE'"))
    created_at: Mapped[datetime]
    renewed_at: Mapped[datetime | None]
    reauthorized_at: Mapped[datetime | None]


class OutlookDeltaCursor(Base):
    """A mailbox's calendarView/delta position (MA-INV-37: a link always has its window)."""

    __tablename__ = CURSORS
    __table_args__ = (
        CheckConstraint("(delta_link IS NULL AND next_link IS NULL) OR "
                        "(window_start IS NOT NULL AND window_end IS NOT NULL)", name="link_has_window"),
        CheckConstraint("window_end > window_start", name="window_order"),
        {"schema": SCHEMA},
    )

    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK), primary_key=True)
    window_start: Mapped[datetime | None]
    window_end: Mapped[datetime | None]
    next_link: Mapped[str | None] = mapped_column(Text)
    delta_link: Mapped[str | None] = mapped_column(Text)
    round_started_at: Mapped[datetime | None]
    last_round_at: Mapped[datetime | None]
    full_pass_requested_at: Mapped[datetime | None]


class OutlookCandidate(Base):
    """An event of a mailbox an administrator may choose to manage (a single event or a series master). Rows are
    never deleted (a confirmed deletion sets `gone_at`), so the pool also tells which ids a mailbox ever held."""

    __tablename__ = CANDIDATES
    __table_args__ = (
        PrimaryKeyConstraint("mailbox_id", "graph_event_id"),
        CheckConstraint(_one_of("type", CANDIDATE_TYPES), name="type"),
        CheckConstraint("end_at >= start_at", name="time_order"),
        Index("ix_outlook_candidates_mailbox_start", "mailbox_id", "start_at", "graph_event_id",
              postgresql_where=sql("gone_at IS NULL")),
        Index("ix_outlook_candidates_mailbox_ical_uid", "mailbox_id", "ical_uid",
              postgresql_where=sql("ical_uid IS NOT NULL")),
        {"schema": SCHEMA},
    )

    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK))
    graph_event_id: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)
    subject: Mapped[str | None] = mapped_column(Text)
    start_at: Mapped[datetime]
    end_at: Mapped[datetime]
    timezone: Mapped[str | None] = mapped_column(Text)
    recurrence: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    organizer_email: Mapped[str | None] = mapped_column(Text)
    change_key: Mapped[str | None] = mapped_column(Text)
    # Graph's iCalUId: the same in every mailbox's copy of a single event or series master (a takeover finds the new
    # mailbox's copy by it); NULL for rows read before it was kept, until a delta round sees them again.
    ical_uid: Mapped[str | None] = mapped_column(Text)
    last_seen_at: Mapped[datetime]
    gone_at: Mapped[datetime | None]


class OutlookBinding(Base):
    """An administrator's decision that one Graph event (a single event or a series master) manages one Tenet
    meeting or series (MA-INV-30, 31)."""

    __tablename__ = BINDINGS
    __table_args__ = (
        CheckConstraint(_one_of("kind", BINDING_KINDS), name="kind"),
        CheckConstraint(_one_of("status", BINDING_STATES), name="status"),
        CheckConstraint("(kind = 'SINGLE' AND series_id IS NULL) OR (kind = 'SERIES' AND meeting_id IS NULL)",
                        name="target"),
        CheckConstraint("status <> 'ACTIVE' OR meeting_id IS NOT NULL OR series_id IS NOT NULL",
                        name="active_has_target"),
        CheckConstraint("(status = 'RELEASED') = (released_at IS NOT NULL)", name="released_has_time"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(BINDING_EVENT_ACTIVE, "graph_event_id", unique=True,
              postgresql_where=sql("status IN ('PENDING', 'ACTIVE')")),
        Index(BINDING_MEETING_ACTIVE, "meeting_id", unique=True,
              postgresql_where=sql("status IN ('PENDING', 'ACTIVE') AND meeting_id IS NOT NULL")),
        Index(BINDING_SERIES_ACTIVE, "series_id", unique=True,
              postgresql_where=sql("status IN ('PENDING', 'ACTIVE') AND series_id IS NOT NULL")),
        Index("ix_outlook_bindings_mailbox", "mailbox_id", postgresql_where=sql("status IN ('PENDING', 'ACTIVE')")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    graph_event_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK))
    bound_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    sync_from: Mapped[datetime]
    meeting_id: Mapped[str | None] = mapped_column(ForeignKey(f"{SCHEMA}.meetings.id"))
    series_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(f"{SCHEMA}.meeting_series.id"))
    status: Mapped[str] = mapped_column(Text, server_default=sql("'PENDING'"))
    last_synced_at: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, server_default=sql("1"))


class OutlookExclusion(Base):
    """An occurrence of a bound series the sync must never write again (MA-INV-33)."""

    __tablename__ = EXCLUSIONS
    __table_args__ = (PrimaryKeyConstraint("binding_id", "original_start"), {"schema": SCHEMA})

    binding_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(BINDING_FK))
    original_start: Mapped[datetime]
    created_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(USER_FK))
    created_at: Mapped[datetime]


class OutlookEventLink(Base):
    """Which meeting mirrors which occurrence (MA-INV-34: one per (binding, original start))."""

    __tablename__ = LINKS
    __table_args__ = (
        Index(LINK_OCCURRENCE_UNIQUE, "binding_id", "original_start", unique=True),
        {"schema": SCHEMA},
    )

    meeting_id: Mapped[str] = mapped_column(ForeignKey(f"{SCHEMA}.meetings.id"), primary_key=True)
    binding_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(BINDING_FK))
    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK))
    original_start: Mapped[datetime]
    graph_event_id: Mapped[str] = mapped_column(Text)
    change_key: Mapped[str | None] = mapped_column(Text)
    synced_attendee_ids: Mapped[list[uuid.UUID]] = mapped_column(ARRAY(UUID), server_default=sql("'{}'"))
    last_synced_at: Mapped[datetime]


class OutlookNotification(Base):
    """A change or lifecycle notification as the webhook received it (consumed by the worker; kept 7 days)."""

    __tablename__ = NOTIFICATIONS
    __table_args__ = (
        CheckConstraint(_one_of("kind", NOTIFICATION_KINDS), name="kind"),
        CheckConstraint(_one_of("status", NOTIFICATION_STATES), name="status"),
        CheckConstraint("(status = 'PENDING') = (processed_at IS NULL)", name="processed_has_time"),
        Index("ix_outlook_notifications_pending", "id", postgresql_where=sql("status = 'PENDING'")),
        Index("ix_outlook_notifications_mailbox_received", "mailbox_id", "received_at"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    received_at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(Text)
    mailbox_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey(MAILBOX_FK))
    graph_subscription_id: Mapped[str | None] = mapped_column(Text)
    change_type: Mapped[str | None] = mapped_column(Text)
    lifecycle_event: Mapped[str | None] = mapped_column(Text)
    resource_id: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=sql("'PENDING'"))
    processed_at: Mapped[datetime | None]


class OutlookSyncRun(Base):
    """One round of the worker for a mailbox, with what it found and fixed by kind."""

    __tablename__ = RUNS
    __table_args__ = (
        CheckConstraint(_one_of("kind", RUN_KINDS), name="kind"),
        CheckConstraint(_one_of("status", RUN_STATES), name="status"),
        CheckConstraint("(status = 'RUNNING') = (finished_at IS NULL)", name="finished_has_time"),
        CheckConstraint("graph_requests >= 0", name="graph_requests_non_negative"),
        Index("ix_outlook_sync_runs_mailbox_started", "mailbox_id", "started_at"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    mailbox_id: Mapped[uuid.UUID] = mapped_column(ForeignKey(MAILBOX_FK))
    kind: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(Text, server_default=sql("'RUNNING'"))
    counts: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sql("'{}'::jsonb"))
    graph_requests: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    error_code: Mapped[str | None] = mapped_column(Text)
    error_request_id: Mapped[str | None] = mapped_column(Text)
