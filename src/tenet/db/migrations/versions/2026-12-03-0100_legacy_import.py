"""meeting_attendance: legacy_import_rows and legacy_import_runs, the memory of the legacy SQLite import (issue 20)

Revision ID: 8b4f2d6a1c37
Revises: 5d2a8c4e9f13 (web_sessions)
Create Date: 2026-12-03 01:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenet.db.migration_helpers import allow_again, deny_all

revision: str = "8b4f2d6a1c37"
down_revision: str | Sequence[str] | None = "5d2a8c4e9f13"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = "meeting_attendance"
SOURCE_TABLES = ("users", "meeting_series", "meetings", "meeting_required_attendees", "attendances", "templates",
                 "template_attendees", "audit_logs")


def upgrade() -> None:
    op.create_table(
        "legacy_import_rows",
        sa.Column("source_table", sa.Text(), nullable=False),
        sa.Column("legacy_key", sa.Text(), nullable=False),
        sa.Column("target_key", sa.Text(), nullable=False),
        sa.Column("owned", sa.Boolean(), nullable=False),
        sa.Column("source_digest", sa.Text(), nullable=False),
        sa.Column("row_digest", sa.Text(), nullable=True),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source_table IN ('" + "', '".join(SOURCE_TABLES) + "')",
                           name=op.f("ck_legacy_import_rows_source_table")),
        sa.CheckConstraint("source_digest ~ '^sha256:[0-9a-f]{64}$'",
                           name=op.f("ck_legacy_import_rows_source_digest_shape")),
        sa.CheckConstraint("row_digest IS NULL OR row_digest ~ '^sha256:[0-9a-f]{64}$'",
                           name=op.f("ck_legacy_import_rows_row_digest_shape")),
        sa.PrimaryKeyConstraint("source_table", "legacy_key", name=op.f("pk_legacy_import_rows")),
        schema=SCHEMA,
    )
    op.create_table(
        "legacy_import_runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("file_name", sa.Text(), nullable=False),
        sa.Column("file_sha256", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("report", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.CheckConstraint("file_sha256 ~ '^[0-9a-f]{64}$'", name=op.f("ck_legacy_import_runs_file_sha256_shape")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_legacy_import_runs")),
        schema=SCHEMA,
    )
    for table in ("legacy_import_rows", "legacy_import_runs"):
        deny_all(f"{SCHEMA}.{table}")


def downgrade() -> None:
    for table in ("legacy_import_runs", "legacy_import_rows"):
        allow_again(f"{SCHEMA}.{table}")
        op.drop_table(table, schema=SCHEMA)
