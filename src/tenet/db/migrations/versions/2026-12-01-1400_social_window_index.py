"""social: the subscriptions' subscriber index gains subject_type in its key, so the schedule window reads a user's
own subscriptions and its groups' index-only (docs/decisions.md, "Social at scale")

Revision ID: 3c9e5a7f2d10
Revises: 8b4f2d6a1c07
Create Date: 2026-12-01 14:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "3c9e5a7f2d10"
down_revision: str | Sequence[str] | None = "8b4f2d6a1c07"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_schedule_subscriptions_subscriber_id_subject_type_status", "schedule_subscriptions",
                    ["subscriber_id", "subject_type", "status"], unique=False, schema="social",
                    postgresql_include=["item_id", "permission"])
    op.drop_index("ix_schedule_subscriptions_subscriber_id_status", table_name="schedule_subscriptions",
                  schema="social")


def downgrade() -> None:
    op.create_index("ix_schedule_subscriptions_subscriber_id_status", "schedule_subscriptions",
                    ["subscriber_id", "status"], unique=False, schema="social",
                    postgresql_include=["item_id", "permission"])
    op.drop_index("ix_schedule_subscriptions_subscriber_id_subject_type_status", table_name="schedule_subscriptions",
                  schema="social")
