"""iam: web_sessions, the consoles' server-side sessions (issue 18)

Revision ID: 5d2a8c4e9f13
Revises: 6a1f3e8c2b57 (the Outlook sync tables)
Create Date: 2026-12-02 01:10:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tenet.db.migration_helpers import deny_all

revision: str = "5d2a8c4e9f13"
down_revision: str | Sequence[str] | None = "6a1f3e8c2b57"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("token_digest", sa.Text(), nullable=False),
        sa.Column("token_epoch", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name=op.f("ck_web_sessions_token_is_digest")),
        sa.CheckConstraint("expires_at > created_at", name=op.f("ck_web_sessions_expires_after_created")),
        sa.ForeignKeyConstraint(["user_id"], ["iam.user_account.id"], name=op.f("fk_web_sessions_user_id_user_account"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_web_sessions_token_digest")),
        schema="iam",
    )
    op.create_index("ix_web_sessions_user_id", "web_sessions", ["user_id"], unique=False, schema="iam",
                    postgresql_where=sa.text("revoked_at IS NULL"))
    deny_all("iam.web_sessions")


def downgrade() -> None:
    op.drop_index("ix_web_sessions_user_id", table_name="web_sessions", schema="iam",
                  postgresql_where=sa.text("revoked_at IS NULL"))
    op.drop_table("web_sessions", schema="iam")
