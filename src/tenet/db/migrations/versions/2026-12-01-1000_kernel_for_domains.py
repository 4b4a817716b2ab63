"""kernel for domains: job run history (kernel.job_run), the account token epoch and the refresh-family
index the principal query uses (issues 6, 7)

Revision ID: 3c1f0a9e7b21
Revises: 3c8e5b1f9a27
Create Date: 2026-12-01 10:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenet.db.migration_helpers import deny_all

revision: str = "3c1f0a9e7b21"
down_revision: str | Sequence[str] | None = "3c8e5b1f9a27"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_run",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("job_name", sa.Text(), nullable=False),
        sa.Column("lock_key", sa.Text(), nullable=True),
        sa.Column("procrastinate_job_id", sa.BigInteger(), nullable=True),
        sa.Column("attempt", sa.SmallInteger(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("(status = 'running') = (finished_at IS NULL)", name=op.f("ck_job_run_finished_has_time")),
        sa.CheckConstraint("status IN ('running', 'succeeded', 'failed')", name=op.f("ck_job_run_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_run")),
        schema="kernel",
    )
    op.create_index("ix_job_run_job_name_started_at", "job_run", ["job_name", "started_at"], schema="kernel")
    op.create_index("ix_job_run_started_at", "job_run", ["started_at"], schema="kernel")
    deny_all("kernel.job_run")

    # Existing accounts start at epoch 0, which is what every token issued so far implicitly carries.
    op.add_column("user_account", sa.Column("token_epoch", sa.Integer(), server_default=sa.text("0"), nullable=False),
                  schema="iam")
    op.create_check_constraint("token_epoch_non_negative", "user_account", "token_epoch >= 0", schema="iam")
    op.create_index("ix_refresh_token_family_id_revoked", "refresh_token", ["family_id"], schema="iam",
                    postgresql_where=sa.text("revoked_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_refresh_token_family_id_revoked", table_name="refresh_token", schema="iam")
    op.drop_constraint(op.f("ck_user_account_token_epoch_non_negative"), "user_account", schema="iam", type_="check")
    op.drop_column("user_account", "token_epoch", schema="iam")
    op.drop_table("job_run", schema="kernel")
