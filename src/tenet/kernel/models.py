"""Tables of the kernel (schema `kernel`): audit log, idempotency keys, rate-limit counters, mail outbox, job runs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Identity, Index, LargeBinary, SmallInteger, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from tenet.db.base import Base

SCHEMA = "kernel"


class AuditLog(Base):
    """Append-only: a trigger refuses UPDATE, DELETE and TRUNCATE (KERNEL-INV-01).

    Rows name stable ids (actor, subject, scope), never display names, secrets or tokens.
    """

    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint("actor_type IN ('user', 'client', 'system', 'anonymous')", name="actor_type"),
        CheckConstraint("(actor_type IN ('system', 'anonymous')) OR actor_id IS NOT NULL", name="actor_named"),
        Index("ix_audit_log_subject", "subject_type", "subject_id", "id"),
        Index("ix_audit_log_scope", "scope_type", "scope_id", "id"),
        Index("ix_audit_log_action", "action", "id"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    occurred_at: Mapped[datetime]
    action: Mapped[str] = mapped_column(Text)
    actor_type: Mapped[str] = mapped_column(Text)
    actor_id: Mapped[str | None] = mapped_column(Text)
    subject_type: Mapped[str] = mapped_column(Text)
    subject_id: Mapped[str] = mapped_column(Text)
    scope_type: Mapped[str | None] = mapped_column(Text)
    scope_id: Mapped[str | None] = mapped_column(Text)
    request_id: Mapped[str | None] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))


class IdempotencyKey(Base):
    """One row per (principal, Idempotency-Key); the primary key is what serialises duplicates."""

    __tablename__ = "idempotency_key"
    __table_args__ = (
        CheckConstraint("state IN ('in_flight', 'completed')", name="state"),
        CheckConstraint("(state = 'completed') = (response_status IS NOT NULL)", name="completed_has_response"),
        CheckConstraint("length(key) BETWEEN 1 AND 255", name="key_length"),
        Index("ix_idempotency_key_expires_at", "expires_at"),
        {"schema": SCHEMA},
    )

    principal: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text)
    lock_token: Mapped[uuid.UUID]
    locked_until: Mapped[datetime]
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    response_status: Mapped[int | None] = mapped_column(SmallInteger)
    response_headers: Mapped[list[Any] | None] = mapped_column(JSONB)
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)


class RateLimitCounter(Base):
    """Hits per bucket per fixed window, shared by every API process through the database."""

    __tablename__ = "rate_limit_counter"
    __table_args__ = (
        CheckConstraint("hits > 0", name="hits_positive"),
        Index("ix_rate_limit_counter_expires_at", "expires_at"),
        {"schema": SCHEMA},
    )

    bucket: Mapped[str] = mapped_column(Text, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(primary_key=True)
    hits: Mapped[int]
    expires_at: Mapped[datetime]


class EmailOutbox(Base):
    """Mail written in the same transaction as the change that causes it; delivered after commit.

    A deliverer holds a pending row by a claim (`claim_token`, lease `claimed_until`) while it sends it
    outside any transaction (KERNEL-INV-04); the row is claimable again when the lease has run out.
    """

    __tablename__ = "email_outbox"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'sent', 'failed')", name="status"),
        CheckConstraint("(status = 'sent') = (sent_at IS NOT NULL)", name="sent_has_time"),
        CheckConstraint("attempts >= 0", name="attempts_non_negative"),
        CheckConstraint("(claim_token IS NULL) = (claimed_until IS NULL)", name="claim_has_lease"),
        CheckConstraint("claim_token IS NULL OR status = 'pending'", name="claim_only_pending"),
        Index("ix_email_outbox_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    kind: Mapped[str] = mapped_column(Text)
    to_address: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    body_text: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    attempts: Mapped[int] = mapped_column(server_default=text("0"))
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    claim_token: Mapped[uuid.UUID | None]
    claimed_until: Mapped[datetime | None]


class JobRun(Base):
    """One run of a background job whose domain wants history (`job(..., history=True)`): when it ran, how it
    ended, and its result or a one-line error. Purged after 30 days by `kernel:purge_expired`."""

    __tablename__ = "job_run"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'succeeded', 'failed')", name="status"),
        CheckConstraint("(status = 'running') = (finished_at IS NULL)", name="finished_has_time"),
        Index("ix_job_run_job_name_started_at", "job_name", "started_at"),
        Index("ix_job_run_started_at", "started_at"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    job_name: Mapped[str] = mapped_column(Text)
    lock_key: Mapped[str | None] = mapped_column(Text)
    procrastinate_job_id: Mapped[int | None] = mapped_column(BigInteger)
    attempt: Mapped[int] = mapped_column(SmallInteger)
    status: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    result: Mapped[Any | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
