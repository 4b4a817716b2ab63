"""Tables of identity (schema `iam`)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from tenet.db.base import Base

SCHEMA = "iam"


class UserAccount(Base):
    """A person who signs in. `iam.user_account` plays spec 000's `auth.users` and spec 001's
    `platform_iam.User`. Deleting a user is a state (`deleted`), so audit rows and memberships keep
    pointing at a real row; the normalised email is freed for a new account."""

    __tablename__ = "user_account"
    __table_args__ = (
        CheckConstraint("status IN ('active', 'disabled', 'deleted')", name="status"),
        CheckConstraint("(status = 'deleted') = (deleted_at IS NOT NULL)", name="deleted_has_time"),
        CheckConstraint("length(display_name) BETWEEN 1 AND 200", name="display_name_length"),
        CheckConstraint("email_normalized <> '' AND email_normalized = btrim(email_normalized)",
                        name="email_normalized_trimmed"),
        # IAM-INV-03: only argon2id hashes are ever stored.
        CheckConstraint("password_hash LIKE '$argon2id$%'", name="password_hash_argon2id"),
        CheckConstraint("token_epoch >= 0", name="token_epoch_non_negative"),
        # IAM-INV-01: one live account per normalised email.
        Index("uq_user_account_email_live", "email_normalized", unique=True,
              postgresql_where=text("status <> 'deleted'")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    email: Mapped[str] = mapped_column(Text)
    email_normalized: Mapped[str] = mapped_column(Text)
    email_normalization: Mapped[str] = mapped_column(Text)
    display_name: Mapped[str] = mapped_column(Text)
    password_hash: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'active'"))
    # Access tokens carry the epoch they were issued in; disabling the account moves it on, so every token
    # issued before stays dead even after the account is enabled again.
    token_epoch: Mapped[int] = mapped_column(server_default=text("0"), default=0)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]
    last_login_at: Mapped[datetime | None]


class Role(Base):
    __tablename__ = "role"
    __table_args__ = ({"schema": SCHEMA},)

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    description: Mapped[str] = mapped_column(Text)


class PermissionPoint(Base):
    __tablename__ = "permission"
    __table_args__ = ({"schema": SCHEMA},)

    name: Mapped[str] = mapped_column(Text, primary_key=True)


class RolePermission(Base):
    __tablename__ = "role_permission"
    __table_args__ = ({"schema": SCHEMA},)

    role_name: Mapped[str] = mapped_column(Text, ForeignKey("iam.role.name", ondelete="CASCADE"), primary_key=True)
    permission_name: Mapped[str] = mapped_column(
        Text, ForeignKey("iam.permission.name", ondelete="CASCADE"), primary_key=True
    )


class UserRole(Base):
    __tablename__ = "user_role"
    __table_args__ = (
        Index("ix_user_role_role_name", "role_name"),
        {"schema": SCHEMA},
    )

    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("iam.user_account.id", ondelete="CASCADE"), primary_key=True
    )
    role_name: Mapped[str] = mapped_column(Text, ForeignKey("iam.role.name"), primary_key=True)
    granted_at: Mapped[datetime]


class ApiClient(Base):
    """A machine caller (client_credentials). Only a digest of its secret is kept (IAM-INV-04)."""

    __tablename__ = "api_client"
    __table_args__ = (
        CheckConstraint("secret_digest ~ '^sha256:[0-9a-f]{64}$'", name="secret_is_digest"),
        CheckConstraint("length(name) BETWEEN 1 AND 200", name="name_length"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    client_id: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str] = mapped_column(Text)
    secret_digest: Mapped[str] = mapped_column(Text)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    hotel_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))
    created_at: Mapped[datetime]
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("iam.user_account.id"))
    revoked_at: Mapped[datetime | None]


class RefreshToken(Base):
    """Rotating refresh tokens. Each sign-in starts a family; each use spends the token and issues its
    successor in the same family. At most one token per family is live (IAM-INV-02)."""

    __tablename__ = "refresh_token"
    __table_args__ = (
        Index("uq_refresh_token_family_live", "family_id", unique=True,
              postgresql_where=text("used_at IS NULL AND revoked_at IS NULL")),
        Index("ix_refresh_token_user_id", "user_id"),
        # The principal query asks, per request, whether the token's sign-in (family) was revoked.
        Index("ix_refresh_token_family_id_revoked", "family_id", postgresql_where=text("revoked_at IS NOT NULL")),
        CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name="token_is_digest"),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    family_id: Mapped[uuid.UUID]
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id", ondelete="CASCADE"))
    token_digest: Mapped[str] = mapped_column(Text, unique=True)
    issued_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class WebSession(Base):
    """A person's sign-in to the consoles (tenet.web): the browser holds a random secret in an HttpOnly cookie,
    the table only its digest. Like an access token it names the account's token epoch (a disable moves it on);
    sign-out, a change of the account's roles, a disable and a deletion revoke it (tenet.iam.web_sessions)."""

    __tablename__ = "web_sessions"
    __table_args__ = (
        CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name="token_is_digest"),
        CheckConstraint("expires_at > created_at", name="expires_after_created"),
        Index("ix_web_sessions_user_id", "user_id", postgresql_where=text("revoked_at IS NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id", ondelete="CASCADE"))
    token_digest: Mapped[str] = mapped_column(Text, unique=True)
    token_epoch: Mapped[int]
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class PasswordReset(Base):
    """A password-reset request (issue 20: imported accounts have no usable password): the mail carries a random
    secret, the table only its digest. Single use (`used_at`), short-lived (`expires_at`); setting the password
    spends every other outstanding request of the account too (tenet.iam.password_reset)."""

    __tablename__ = "password_reset"
    __table_args__ = (
        CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name="token_is_digest"),
        CheckConstraint("expires_at > created_at", name="expires_after_created"),
        Index("ix_password_reset_user_id", "user_id", postgresql_where=text("used_at IS NULL")),
        {"schema": SCHEMA},
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("iam.user_account.id", ondelete="CASCADE"))
    token_digest: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
