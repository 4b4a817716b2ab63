"""outlook_candidate_ical_uid: the candidate pool keeps Graph's `iCalUId` (the same for every mailbox's copy of one
single event or series master), so a takeover naming only the new mailbox finds that mailbox's copy of the binding's
event (issue 17, the outside audit). Nullable: rows read before this revision get it from the next delta round that
sees them; until then a takeover has to name the event.

Revision ID: 8d2f4a6c1e93
Revises: 3e8b1c7d9a42 (desk_waiting_index)
Create Date: 2026-12-04 01:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8d2f4a6c1e93"
down_revision: str | Sequence[str] | None = "3e8b1c7d9a42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "meeting_attendance"


def upgrade() -> None:
    op.add_column('outlook_candidates', sa.Column('ical_uid', sa.Text(), nullable=True), schema=SCHEMA)
    op.create_index('ix_outlook_candidates_mailbox_ical_uid', 'outlook_candidates', ['mailbox_id', 'ical_uid'],
                    unique=False, schema=SCHEMA, postgresql_where=sa.text('ical_uid IS NOT NULL'))


def downgrade() -> None:
    op.drop_index('ix_outlook_candidates_mailbox_ical_uid', table_name='outlook_candidates', schema=SCHEMA,
                  postgresql_where=sa.text('ical_uid IS NOT NULL'))
    op.drop_column('outlook_candidates', 'ical_uid', schema=SCHEMA)
