"""DTOs of the Outlook routes (API.md "Outlook"; docs/design/outlook.md §7). snake_case; no secret ever appears."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class PolicyFields(BaseModel):
    """The business policy (MA-INV-39's ranges are checked by the command: 422 OUTLOOK_POLICY_INVALID)."""

    model_config = ConfigDict(extra="forbid")

    subscription_lifetime_minutes: int = Field(description="45-4,229 (under both documented Graph limits)")
    renewal_margin_minutes: int = Field(description="Renew this long before expiry; below the lifetime")
    window_days_back: int = Field(description="Delta window: days before today, 0-365")
    window_days_ahead: int = Field(description="Delta window: days after today, 1-730")
    reconcile_cron: str = Field(description="When reconciliation runs (five cron fields, UTC)")
    batch_size: int = Field(description="Prefer odata.maxpagesize, 10-1,000")
    max_concurrent_requests: int = Field(description="Graph requests in flight per mailbox, 1-4")
    retry_max_attempts: int = Field(description="Attempts of a failing job, 1-20")
    retry_base_seconds: int = Field(description="Base of the exponential retry wait, 1-300 s")


class PolicyRead(PolicyFields):
    model_config = ConfigDict(from_attributes=True)

    version: int
    updated_at: datetime | None
    updated_by_id: uuid.UUID | None
    credentials_configured: bool = Field(
        description="GRAPH_TENANT_ID, GRAPH_CLIENT_ID and GRAPH_CLIENT_SECRET are set (else the sync is off)")
    client_state_configured: bool = Field(description="GRAPH_NOTIFICATION_CLIENT_STATE is set")
    graph_base_url: str
    graph_authority_url: str


MailboxKind = Literal["SHARED", "PERSONAL"]
MailboxState = Literal["PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID", "DISABLED"]


class MailboxCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str = Field(min_length=3, max_length=320, description="The mailbox's SMTP address (UPN)")
    kind: MailboxKind = "SHARED"


class MailboxRead(BaseModel):
    id: uuid.UUID
    address: str
    kind: MailboxKind
    graph_user_id: str | None
    state: MailboxState
    last_error_code: str | None = Field(description="Graph's error code of the last failure (ErrorAccessDenied, ...)")
    last_error_request_id: str | None = Field(description="Graph's request-id of that failure (for Microsoft support)")
    last_error_hint: str | None = Field(description="What an operator can do about it")
    last_error_at: datetime | None
    last_notification_at: datetime | None
    created_by_id: uuid.UUID
    created_at: datetime
    updated_at: datetime
    version: int


class MailboxList(BaseModel):
    items: list[MailboxRead]


class Accepted(BaseModel):
    accepted: bool = True
    mailbox_id: uuid.UUID
    notifications: int | None = Field(None, description="Replay: how many stored notifications are processed again")


class Replay(BaseModel):
    model_config = ConfigDict(extra="forbid")

    since: datetime = Field(description="Notifications received since then (they are kept 7 days)")


class MailboxStatus(BaseModel):
    mailbox_id: uuid.UUID
    address: str
    kind: MailboxKind
    state: MailboxState
    subscription_id: str | None
    subscription_expires_at: datetime | None
    last_notification_at: datetime | None
    last_delta_round_at: datetime | None
    round_started_at: datetime | None
    full_pass_requested_at: datetime | None
    cursor_age_seconds: int | None = Field(description="Seconds since the last finished delta round")
    window_start: datetime | None
    window_end: datetime | None
    has_delta_cursor: bool | None
    last_error_code: str | None
    last_error_request_id: str | None
    last_error_hint: str | None
    last_error_at: datetime | None
    reconciliations: list[dict[str, Any]]


class SyncStatus(BaseModel):
    sync_on: bool
    items: list[MailboxStatus]


class CandidateRead(BaseModel):
    mailbox_id: uuid.UUID
    graph_event_id: str = Field(description="The event's ImmutableId (a single event or a series master)")
    type: Literal["singleInstance", "seriesMaster"]
    subject: str | None
    start_at: datetime
    end_at: datetime
    timezone: str | None = Field(description="The event's own IANA zone (recurrence zone, original start zone, "
                                             "else TENET_DEFAULT_TIMEZONE)")
    recurrence: dict[str, Any] | None
    organizer_email: str | None
    last_seen_at: datetime
    managed: bool
    binding_id: uuid.UUID | None


class BindingCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph_event_id: str = Field(min_length=1, max_length=512, description="A candidate's id (single or series master)")
    mailbox_id: uuid.UUID
    sync_from: AwareDatetime | None = Field(None, description="Occurrences before it are never written; default now. "
                                                               "Between 1900-01-01 and 2200-01-01 (UTC)")


class Takeover(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mailbox_id: uuid.UUID
    graph_event_id: str | None = Field(None, min_length=1, max_length=512,
                                       description="The event's id in the new mailbox; default: that "
                                                   "mailbox's copy of the same event, found by its iCalUId")
    sync_from: AwareDatetime | None = Field(None, description="Default now: the new source never rewrites the past. "
                                                               "Between 1900-01-01 and 2200-01-01 (UTC)")


class ExclusionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    original_start: AwareDatetime = Field(description="The occurrence's original start (as Graph's originalStart), "
                                                      "between 1900-01-01 and 2200-01-01 (UTC)")


class BindingRead(BaseModel):
    id: uuid.UUID
    graph_event_id: str
    kind: Literal["SINGLE", "SERIES"]
    mailbox_id: uuid.UUID
    bound_by_id: uuid.UUID
    sync_from: datetime
    meeting_id: str | None
    series_id: uuid.UUID | None
    status: Literal["PENDING", "ACTIVE", "RELEASED"]
    subject: str | None
    exclusions: list[datetime]
    linked_meetings: int
    last_synced_at: datetime | None
    released_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int


# --- launch clean-up ----------------------------------------------------------------------------------------

Weekday = Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


class LookAlike(BaseModel):
    """An Outlook series master that looks like a local series."""

    mailbox_id: uuid.UUID
    graph_event_id: str
    subject: str | None
    timezone: str | None
    weekdays: list[Weekday]
    local_time: time | None = Field(description="The master's start, on the clock of its own zone")
    managed: bool = Field(description="Already bound (its binding will produce the meetings)")
    binding_id: uuid.UUID | None
    signals: list[Literal["subject", "weekday", "time"]] = Field(
        description="Why it looks alike: the same subject (case and spacing aside, or one inside the other), a "
                    "shared weekday, a start within 15 minutes on the clock")


class LocalSeries(BaseModel):
    series_id: uuid.UUID
    title: str
    timezone: str
    rrule: str
    start_date: date
    start_local_time: time
    duration_minutes: int
    weekdays: list[Weekday]
    organizer_id: uuid.UUID
    version: int = Field(description='Send as If-Match ("<version>") with the truncation to be sure of what you saw')
    future_meetings: int = Field(description="Occurrences that have not started (they go when truncated)")
    next_start: datetime
    last_start: datetime
    look_alikes: list[LookAlike]


class LaunchStep(BaseModel):
    step: Literal["credentials", "mailboxes", "bindings", "truncate_local_series", "watch_sync"]
    title: str
    done: bool = Field(description="Read from what is stored now, never ticked by hand")
    count: int | None = None


class CleanupChecklist(BaseModel):
    """The launch checklist (spec layer 8): local series no binding manages that still have meetings to come."""

    generated_at: datetime
    series: list[LocalSeries]
    operations: list[LaunchStep]


class TruncateResult(BaseModel):
    series_id: uuid.UUID
    status: Literal["ACTIVE", "DELETED"] = Field(
        description="ACTIVE: the series now ends at `until`; DELETED: none of it had started, so nothing is kept")
    rrule: str
    until: date | None = Field(description="The last local date the series keeps (before today, or today when an "
                                           "occurrence of today has already started)")
    deleted_meeting_ids: list[str]
    changed: bool = Field(description="False when the series already ended there (a repeated call)")
