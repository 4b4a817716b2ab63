"""outbox claims: a deliverer holds a pending mail by a claim token and a lease while it sends outside any
transaction (KERNEL-INV-04)

Revision ID: 3c8e5b1f9a27
Revises: 203d38dffaef
Create Date: 2026-12-01 09:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3c8e5b1f9a27"
down_revision: str | Sequence[str] | None = "203d38dffaef"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("email_outbox", sa.Column("claim_token", sa.UUID(), nullable=True), schema="kernel")
    op.add_column("email_outbox", sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
                  schema="kernel")
    op.create_check_constraint(op.f("ck_email_outbox_claim_has_lease"), "email_outbox",
                               "(claim_token IS NULL) = (claimed_until IS NULL)", schema="kernel")
    op.create_check_constraint(op.f("ck_email_outbox_claim_only_pending"), "email_outbox",
                               "claim_token IS NULL OR status = 'pending'", schema="kernel")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_email_outbox_claim_only_pending"), "email_outbox", schema="kernel", type_="check")
    op.drop_constraint(op.f("ck_email_outbox_claim_has_lease"), "email_outbox", schema="kernel", type_="check")
    op.drop_column("email_outbox", "claimed_until", schema="kernel")
    op.drop_column("email_outbox", "claim_token", schema="kernel")
