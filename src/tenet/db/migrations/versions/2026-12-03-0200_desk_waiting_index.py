"""desk_waiting_index: the open queue tasks of a hotel by age, so the desk's "next to work" list (the head of
each order's queue, oldest first) stops after the rows it shows (issue 19)

Revision ID: 3e8b1c7d9a42
Revises: 4e8b1c7d9a62 (password_reset)
Create Date: 2026-12-03 02:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3e8b1c7d9a42"
down_revision: str | Sequence[str] | None = "4e8b1c7d9a62"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_rsv_task_open_by_age', 'workflow_reservation_task', ['hotel_id', 'created_at', 'id'],
                    unique=False, schema='reservation', postgresql_where=sa.text(
                        "queue_participation AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING')"))


def downgrade() -> None:
    op.drop_index('ix_rsv_task_open_by_age', table_name='workflow_reservation_task', schema='reservation')
