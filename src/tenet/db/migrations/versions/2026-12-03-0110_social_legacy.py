"""social_legacy: the cut-over tooling's own tables (issue 20): back-fill checkpoints, the legacy id -> new id
map, the change log the legacy triggers write, the difference log, the read switch

Revision ID: 7c3e9a1d5b20
Revises: 8b4f2d6a1c37 (legacy_import)
Create Date: 2026-12-03 01:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from tenet.db.migration_helpers import create_schema, deny_all

revision: str = "7c3e9a1d5b20"
down_revision: str | Sequence[str] | None = "8b4f2d6a1c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Outside the domain schemas on purpose: these tables live only for the weeks of a cut-over and are dropped by
# `tenet social legacy cutover --clean-up` (with this migration's downgrade as the other way out).
TABLES = ("checkpoints", "id_map", "changes", "differences", "read_switch")


def upgrade() -> None:
    create_schema("social_legacy")
    op.execute("""
        CREATE TABLE social_legacy.checkpoints (
            source_table text PRIMARY KEY,
            last_legacy_id bigint NOT NULL DEFAULT 0,
            rows_read bigint NOT NULL DEFAULT 0 CHECK (rows_read >= 0),
            rows_applied bigint NOT NULL DEFAULT 0 CHECK (rows_applied >= 0),
            rows_refused bigint NOT NULL DEFAULT 0 CHECK (rows_refused >= 0),
            started_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            finished_at timestamptz
        )""")
    op.execute("""
        CREATE TABLE social_legacy.id_map (
            source_table text NOT NULL,
            legacy_id bigint NOT NULL,
            new_id uuid NOT NULL,
            mapped_at timestamptz NOT NULL,
            PRIMARY KEY (source_table, legacy_id)
        )""")
    op.execute("CREATE INDEX ix_id_map_new_id ON social_legacy.id_map (new_id)")
    op.execute("""
        CREATE TABLE social_legacy.changes (
            id bigserial PRIMARY KEY,
            captured_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            source_table text NOT NULL,
            operation text NOT NULL CHECK (operation IN ('INSERT', 'UPDATE', 'DELETE')),
            legacy_id bigint NOT NULL,
            row_data jsonb NOT NULL,
            applied_at timestamptz
        )""")
    op.execute("CREATE INDEX ix_changes_pending ON social_legacy.changes (id) WHERE applied_at IS NULL")
    op.execute("""
        CREATE TABLE social_legacy.differences (
            id bigserial PRIMARY KEY,
            noted_at timestamptz NOT NULL,
            phase text NOT NULL CHECK (phase IN ('backfill', 'sync', 'replay')),
            source_table text NOT NULL,
            legacy_id bigint NOT NULL,
            operation text NOT NULL CHECK (operation IN ('INSERT', 'UPDATE', 'DELETE')),
            change_id bigint,
            captured_at timestamptz NOT NULL,
            code text NOT NULL,
            detail text NOT NULL,
            row_data jsonb,
            resolved_at timestamptz
        )""")
    op.execute("CREATE INDEX ix_differences_captured_at ON social_legacy.differences (captured_at) "
               "WHERE resolved_at IS NULL")
    op.execute("""
        CREATE TABLE social_legacy.read_switch (
            id boolean PRIMARY KEY DEFAULT true CHECK (id),
            read_percent smallint NOT NULL CHECK (read_percent BETWEEN 0 AND 100),
            changed_at timestamptz NOT NULL,
            previous_percent smallint CHECK (previous_percent BETWEEN 0 AND 100)
        )""")
    for table in TABLES:
        deny_all(f"social_legacy.{table}")


def downgrade() -> None:
    # CASCADE: `sync --install` may have put its capture function here and triggers on the legacy tables that
    # call it; they go with the schema (the legacy app keeps writing, unobserved).
    op.execute("DROP SCHEMA social_legacy CASCADE")
