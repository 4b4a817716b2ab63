"""workspace rows are never deleted: workspaces, memberships and invitations refuse DELETE and TRUNCATE
(WS-INV-04/05/09), whoever connects

Revision ID: 203d38dffaef
Revises: 54a4ea34f27b
Create Date: 2026-12-01 04:33:00.000000+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "203d38dffaef"
down_revision: str | Sequence[str] | None = "54a4ea34f27b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, trigger) — the names are tenet.workspaces.models.*_NEVER_DELETED_TRIGGER, spelled out here because a
# migration must not change when the models do.
TRIGGERS = [
    ("workspace.workspace", "workspace_never_deleted"),
    ("workspace.membership", "membership_never_deleted"),
    ("workspace.invitation", "invitation_never_deleted"),
]


def upgrade() -> None:
    # The rows end in a state instead: a deleted membership of an accepted invitation would silently break
    # WS-INV-05, and a deleted terminal row would erase the history WS-INV-04/09 keep. One statement-level
    # trigger per table covers DELETE and TRUNCATE (also a TRUNCATE cascading from another table); it fires
    # even for a DELETE that matches no row, which is fine: nothing deletes these rows. Ordinary triggers do
    # not fire under session_replication_role = replica, which only a superuser may set (the tests' cleanup).
    op.execute("""
        CREATE FUNCTION workspace.refuse_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '%.% rows are never deleted (% refused); they end in a state instead',
              TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'restrict_violation', CONSTRAINT = TG_NAME;
        END $$""")
    for table, name in TRIGGERS:
        op.execute(f"""
            CREATE TRIGGER {name} BEFORE DELETE OR TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION workspace.refuse_deletion()""")


def downgrade() -> None:
    for table, name in TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON {table}")
    op.execute("DROP FUNCTION workspace.refuse_deletion()")
