"""iam: password_reset, the one-time secrets of the password-reset mail (issue 20: imported accounts sign in)

Revision ID: 4e8b1c7d9a62
Revises: 7c3e9a1d5b20 (the social legacy tables)
Create Date: 2026-12-03 01:20:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tenet.db.migration_helpers import deny_all

revision: str = "4e8b1c7d9a62"
down_revision: str | Sequence[str] | None = "7c3e9a1d5b20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "password_reset",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("token_digest", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name=op.f("ck_password_reset_token_is_digest")),
        sa.CheckConstraint("expires_at > created_at", name=op.f("ck_password_reset_expires_after_created")),
        sa.ForeignKeyConstraint(["user_id"], ["iam.user_account.id"],
                                name=op.f("fk_password_reset_user_id_user_account"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_password_reset")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_password_reset_token_digest")),
        schema="iam",
    )
    op.create_index("ix_password_reset_user_id", "password_reset", ["user_id"], unique=False, schema="iam",
                    postgresql_where=sa.text("used_at IS NULL"))
    deny_all("iam.password_reset")


def downgrade() -> None:
    op.drop_index("ix_password_reset_user_id", table_name="password_reset", schema="iam",
                  postgresql_where=sa.text("used_at IS NULL"))
    op.drop_table("password_reset", schema="iam")
