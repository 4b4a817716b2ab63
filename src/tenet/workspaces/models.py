"""Tables of workspaces (schema `workspace`), derived from the rules WS-INV-01..09 (invariants.py).

Nothing here is ever deleted: workspaces, memberships and invitations end in a state, so audit rows,
foreign keys and the history of who joined through which invitation keep pointing at real rows (the
database refuses DELETE and TRUNCATE of them: the `*_never_deleted` triggers). Every unique rule therefore
names the live subset it covers (partial unique indexes).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Identity, Index, Text, text
from sqlalchemy.orm import Mapped, mapped_column

import tenet.iam.models  # noqa: F401  (iam.user_account must be on the metadata for the foreign keys)
from tenet.db.base import Base

SCHEMA = "workspace"

# Names the invariant catalog, the error mapping and the bypass tests refer to.
MEMBERSHIP_ACTIVE_INDEX = "uq_membership_active"
INVITATION_PENDING_INDEX = "uq_invitation_pending_email"
INVITATION_TOKEN_UNIQUE = "uq_invitation_token_digest"
INVITATION_TERMINAL_TRIGGER = "invitation_terminal_is_final"
MEMBERSHIP_TERMINAL_TRIGGER = "membership_terminal_is_final"
WORKSPACE_TERMINAL_TRIGGER = "workspace_terminal_is_final"
INVITATION_ACCEPT_TRIGGER = "invitation_accepted_has_membership"
MEMBERSHIP_INVITATION_TRIGGER = "membership_invitation_is_accepted"
# Nothing here is deleted (module docstring): these refuse DELETE and TRUNCATE, whoever connects.
WORKSPACE_NEVER_DELETED_TRIGGER = "workspace_never_deleted"
MEMBERSHIP_NEVER_DELETED_TRIGGER = "membership_never_deleted"
INVITATION_NEVER_DELETED_TRIGGER = "invitation_never_deleted"

_DIGEST = "'^sha256:[0-9a-f]{64}$'"


class Workspace(Base):
    """ACTIVE -> DELETING -> DELETED (transitions.py). DELETING is read-only; DELETED is invisible."""

    __tablename__ = "workspace"
    __table_args__ = (
        CheckConstraint("status IN ('ACTIVE', 'DELETING', 'DELETED')", name="status"),
        CheckConstraint("(status = 'ACTIVE') = (deletion_requested_at IS NULL)", name="deletion_requested_has_time"),
        CheckConstraint("(status = 'DELETED') = (deleted_at IS NOT NULL)", name="deleted_has_time"),
        CheckConstraint("length(name) BETWEEN 1 AND 200", name="name_length"),
        CheckConstraint("version > 0", name="version_positive"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'ACTIVE'"))
    version: Mapped[int] = mapped_column(server_default=text("1"))
    created_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id"))
    updated_at: Mapped[datetime]
    deletion_requested_at: Mapped[datetime | None]
    deletion_requested_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("iam.user_account.id"))
    deleted_at: Mapped[datetime | None]


class Membership(Base):
    """A user's membership of one workspace. ACTIVE -> LEFT | REMOVED | CLOSED (workspace deleted).

    WS-INV-02: at most one ACTIVE row per (workspace, user) — `uq_membership_active`. Rejoining after
    leaving makes a new row; the old one stays as history.
    """

    __tablename__ = "membership"
    __table_args__ = (
        CheckConstraint("status IN ('ACTIVE', 'LEFT', 'REMOVED', 'CLOSED')", name="status"),
        CheckConstraint("role IN ('owner', 'admin', 'member')", name="role"),
        CheckConstraint("(status = 'ACTIVE') = (ended_at IS NULL)", name="ended_has_time"),
        CheckConstraint("version > 0", name="version_positive"),
        Index(MEMBERSHIP_ACTIVE_INDEX, "workspace_id", "user_id", unique=True,
              postgresql_where=text("status = 'ACTIVE'")),
        # "My workspaces" and the owner count of WS-INV-01 read only active rows.
        Index("ix_membership_user_active", "user_id", "workspace_id", postgresql_where=text("status = 'ACTIVE'")),
        Index("ix_membership_workspace_active", "workspace_id", "role", postgresql_where=text("status = 'ACTIVE'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    workspace_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workspace.workspace.id"))
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id"))
    role: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'ACTIVE'"))
    version: Mapped[int] = mapped_column(server_default=text("1"))
    # WS-INV-05: the invitation this membership was created from (NULL for the creator); one each.
    invitation_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("workspace.invitation.id"), unique=True)
    joined_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    ended_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("iam.user_account.id"))


class Invitation(Base):
    """An email invitation. PENDING -> ACCEPTED | REVOKED | EXPIRED; terminal states are final (WS-INV-04,
    also refused by the trigger `invitation_terminal_is_final`).

    Only a SHA-256 digest of the token is stored (WS-INV-06). A resend replaces the digest, so the old
    token matches no row any more. The email is kept as typed (for display and sending) beside its
    `email-v1` comparison key and the name of the algorithm that produced it.
    """

    __tablename__ = "invitation"
    __table_args__ = (
        CheckConstraint("status IN ('PENDING', 'ACCEPTED', 'REVOKED', 'EXPIRED')", name="status"),
        CheckConstraint("role IN ('admin', 'member')", name="role"),
        CheckConstraint(f"token_digest ~ {_DIGEST}", name="token_is_digest"),
        CheckConstraint("email_normalized <> '' AND email_normalized = btrim(email_normalized)",
                        name="email_normalized_trimmed"),
        CheckConstraint("email_normalization <> ''", name="email_normalization_named"),
        CheckConstraint("expires_at > created_at", name="expires_after_creation"),
        CheckConstraint("(status = 'ACCEPTED') = (accepted_at IS NOT NULL AND accepted_by IS NOT NULL)",
                        name="accepted_has_time"),
        CheckConstraint("(status = 'REVOKED') = (revoked_at IS NOT NULL)", name="revoked_has_time"),
        CheckConstraint("(status = 'EXPIRED') = (expired_at IS NOT NULL)", name="expired_has_time"),
        # WS-INV-06: an expired token never yields membership, whoever writes the row.
        CheckConstraint("accepted_at IS NULL OR accepted_at < expires_at", name="accepted_before_expiry"),
        CheckConstraint("version > 0", name="version_positive"),
        # WS-INV-03: one PENDING invitation per (workspace, normalised email). The app pre-check only
        # gives the friendlier message; this index decides races.
        Index(INVITATION_PENDING_INDEX, "workspace_id", "email_normalized", unique=True,
              postgresql_where=text("status = 'PENDING'")),
        Index("ix_invitation_workspace_id_created_at", "workspace_id", "created_at", "id"),
        # The expiry sweep reads only pending rows by due time.
        Index("ix_invitation_pending_expires_at", "expires_at", postgresql_where=text("status = 'PENDING'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    workspace_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workspace.workspace.id"))
    email: Mapped[str] = mapped_column(Text)
    email_normalized: Mapped[str] = mapped_column(Text)
    email_normalization: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'PENDING'"))
    version: Mapped[int] = mapped_column(server_default=text("1"))
    token_digest: Mapped[str] = mapped_column(Text, unique=True)
    invited_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id"))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    last_sent_at: Mapped[datetime]
    accepted_at: Mapped[datetime | None]
    accepted_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("iam.user_account.id"))
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("iam.user_account.id"))
    expired_at: Mapped[datetime | None]


class InvitationSend(Base):
    """One row per invitation mail (first send and every resend): the daily limit per workspace counts
    these rows inside the workspace lock, so two racing invites cannot both take the last slot."""

    __tablename__ = "invitation_send"
    __table_args__ = (
        CheckConstraint("reason IN ('invite', 'resend')", name="reason"),
        Index("ix_invitation_send_workspace_id_sent_at", "workspace_id", "sent_at"),
        Index("ix_invitation_send_invitation_id", "invitation_id"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    workspace_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workspace.workspace.id"))
    invitation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workspace.invitation.id"))
    sent_at: Mapped[datetime]
    reason: Mapped[str] = mapped_column(Text)
