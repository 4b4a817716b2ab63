# ruff: noqa: S608  (SQL built from this module's constants)
"""outlook_out_of_range_repair: instants outside the supported range (1900-01-01 to 2200-01-01 UTC) that the console
could store before the binding commands checked them (issue 17, the outside audit): `10000-01-01 07:59+00` from
`9999-12-31T23:59` in Los Angeles, which psycopg cannot read, so the binding answered 422 and its sync failed for good.

An exclusion outside the range excludes no occurrence (every meeting lies in it): deleted. A `sync_from` after the
range means "write nothing": 2200-01-01 says the same and can be read; one before it means "write everything":
1900-01-01 says the same. No downgrade: the old values were unreadable.

Revision ID: 9e3a5b7d2f14
Revises: 8d2f4a6c1e93 (outlook_candidate_ical_uid)
Create Date: 2026-12-04 01:10:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "9e3a5b7d2f14"
down_revision: str | Sequence[str] | None = "8d2f4a6c1e93"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FROM, UNTIL = "'1900-01-01 00:00:00+00'::timestamptz", "'2200-01-01 00:00:00+00'::timestamptz"


def upgrade() -> None:
    op.execute("DELETE FROM meeting_attendance.outlook_exclusions "
               f"WHERE original_start >= {UNTIL} OR original_start < {FROM}")
    op.execute(f"UPDATE meeting_attendance.outlook_bindings SET sync_from = {UNTIL} WHERE sync_from > {UNTIL}")
    op.execute(f"UPDATE meeting_attendance.outlook_bindings SET sync_from = {FROM} WHERE sync_from < {FROM}")


def downgrade() -> None:
    pass
