"""Building blocks the migration files share. Keep them stable: old migrations call them too."""

from __future__ import annotations

from alembic import op

DB_ROLES = ("anon", "authenticated")


def create_schema(name: str) -> None:
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")


def ensure_db_roles() -> None:
    """The roles `anon` and `authenticated` (spec 000 P4). Roles are cluster-wide, so creation tolerates
    an existing role (another database of the same server may have made it, even at the same moment: two
    concurrent CREATE ROLE collide on pg_authid's unique index rather than raising duplicate_object)."""
    for role in DB_ROLES:
        op.execute(f"""
            DO $$ BEGIN
              CREATE ROLE {role} NOLOGIN;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END $$""")


def deny_all(qualified_table: str) -> None:
    """Row-level security on, and an explicit restrictive deny-all policy for anon and authenticated
    (spec 000 P4). The service connects as the tables' owner, which RLS does not restrict; any other
    role sees nothing. No privileges are granted to those roles either (KERNEL-INV-03)."""
    policy = "deny_all_" + qualified_table.split(".")[-1]
    op.execute(f"ALTER TABLE {qualified_table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY {policy} ON {qualified_table} AS RESTRICTIVE FOR ALL "
               f"TO {', '.join(DB_ROLES)} USING (false) WITH CHECK (false)")


def allow_again(qualified_table: str) -> None:
    """Undo `deny_all` (downgrades)."""
    policy = "deny_all_" + qualified_table.split(".")[-1]
    op.execute(f"DROP POLICY IF EXISTS {policy} ON {qualified_table}")
    op.execute(f"ALTER TABLE {qualified_table} DISABLE ROW LEVEL SECURITY")
