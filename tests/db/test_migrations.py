"""Migrations are accepted like code (INVARIANTS.md §4)."""

from __future__ import annotations

import re

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from tenet.db import migrate
from tenet.db.base import Base
from tenet.db.migrate import MIGRATIONS_DIR
from tests.conftest import APP_SCHEMAS

FILE_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{4}_[a-z0-9_]+\.py$")


def _schema_snapshot(url: str) -> dict[str, list[tuple]]:
    """Everything a migration creates, as comparable rows (tables, columns, constraints, indexes, triggers,
    policies, functions)."""
    queries = {
        "columns": """SELECT table_schema, table_name, column_name, data_type, is_nullable, column_default
                        FROM information_schema.columns
                       WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 3""",
        "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
                           WHERE connamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
                           ORDER BY 1, 2""",
        "indexes": "SELECT schemaname, indexname, indexdef FROM pg_indexes "
                   "WHERE schemaname NOT IN ('pg_catalog') ORDER BY 1, 2",
        "triggers": "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
        "policies": "SELECT schemaname, tablename, policyname, permissive, roles::text, cmd FROM pg_policies "
                    "ORDER BY 1, 2, 3",
        "functions": """SELECT n.nspname, p.proname, pg_get_function_identity_arguments(p.oid) FROM pg_proc p
                          JOIN pg_namespace n ON n.oid = p.pronamespace
                         WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 3""",
        "rls": """SELECT n.nspname, c.relname, c.relrowsecurity FROM pg_class c
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2""",
    }
    with psycopg.connect(url) as connection:
        return {name: connection.execute(sql).fetchall() for name, sql in queries.items()}


def test_migration_files_are_named_by_date_then_slug():
    names = [p.name for p in (MIGRATIONS_DIR / "versions").glob("*.py")]
    assert names, "no migrations found"
    assert [n for n in names if not FILE_NAME.match(n)] == []


def test_there_is_exactly_one_head():
    assert len(migrate.heads()) == 1, f"several heads: {migrate.heads()} — merge them"


def test_upgrade_from_empty_reaches_head(scratch_database):
    url = scratch_database("empty")
    migrate.upgrade(url)
    with psycopg.connect(url) as connection:
        (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        schemas = {s for (s,) in connection.execute("SELECT nspname FROM pg_namespace").fetchall()}
    assert version == migrate.head_revision()
    assert set(APP_SCHEMAS) <= schemas


def test_downgrade_to_base_then_upgrade_gives_the_same_schema(scratch_database):
    url = scratch_database("roundtrip")
    migrate.upgrade(url)
    first = _schema_snapshot(url)
    migrate.downgrade(url, "base")
    emptied = _schema_snapshot(url)
    assert [r for r in emptied["columns"] if r[0] != "public" or r[1] != "alembic_version"] == []
    assert emptied["functions"] == []
    migrate.upgrade(url)
    assert _schema_snapshot(url) == first


def test_every_step_downgrades_and_upgrades_again(scratch_database):
    """Walk the chain one revision at a time, down and up: each migration undoes exactly itself."""
    from alembic.script import ScriptDirectory

    url = scratch_database("steps")
    revisions = list(reversed(list(ScriptDirectory.from_config(migrate.alembic_config()).walk_revisions())))
    for revision in revisions:
        migrate.upgrade(url, revision.revision)
        before = _schema_snapshot(url)
        migrate.downgrade(url, revision.down_revision or "base")
        migrate.upgrade(url, revision.revision)
        assert _schema_snapshot(url) == before, f"{revision.revision} does not round-trip"


async def test_models_and_migrations_agree(engine):
    """Autogenerate against the migrated database finds nothing to do."""

    def diff(sync_connection):
        context = MigrationContext.configure(sync_connection, opts={
            "include_schemas": True,
            "include_name": lambda name, type_, parents: type_ != "schema" or name in APP_SCHEMAS,
            "compare_type": True,
        })
        return compare_metadata(context, Base.metadata)

    async with engine.connect() as connection:
        differences = await connection.run_sync(diff)
    assert differences == [], f"models and migrations disagree: {differences}"


@pytest.mark.parametrize("schema", APP_SCHEMAS)
async def test_each_package_owns_a_schema(engine, schema):
    async with engine.connect() as connection:
        found = (await connection.execute(
            text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": schema})).scalar_one_or_none()
    assert found == 1


def test_upgrading_a_database_with_data_of_the_previous_revision_keeps_it(scratch_database):
    """Sample rows written at the first revision survive every later migration, and the catalog holds."""
    import subprocess
    import sys

    from alembic.script import ScriptDirectory

    url = scratch_database("with_data")
    first = list(ScriptDirectory.from_config(migrate.alembic_config()).walk_revisions())[-1]
    migrate.upgrade(url, first.revision)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name,"
            " password_hash, status, created_at, updated_at) VALUES"
            " ('11111111-1111-1111-1111-111111111111', 'Old@Example.com', 'old@example.com', 'email-v1', 'Old',"
            "  '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA', 'active', now(), now())")
        connection.execute(
            "INSERT INTO iam.user_role VALUES ('11111111-1111-1111-1111-111111111111', 'Employee', now())")
    migrate.upgrade(url)
    with psycopg.connect(url) as connection:
        kept = connection.execute("SELECT email, status FROM iam.user_account").fetchall()
        roles = connection.execute("SELECT role_name FROM iam.user_role").fetchall()
    assert kept == [("Old@Example.com", "active")] and roles == [("Employee",)]
    check = subprocess.run([sys.executable, "-m", "tenet", "invariants", "check", "--database-url", url],
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stderr


def test_outlook_instants_outside_the_supported_range_are_repaired(scratch_database):
    """Before the binding commands checked their instants the console could store `10000-01-01 07:59+00` (psycopg
    cannot read it back): the repair leaves every binding readable, meaning what it meant (issue 17)."""
    url = scratch_database("outlook_repair")
    migrate.upgrade(url, "8d2f4a6c1e93")
    user, mailbox = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
    bindings = {"33333333-3333-3333-3333-333333333333": "10000-01-01 07:59:00+00",
                "44444444-4444-4444-4444-444444444444": "0001-01-01 00:00:00+00 BC",
                "55555555-5555-5555-5555-555555555555": "2026-01-05 09:00:00+00"}
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name,"
            " password_hash, status, created_at, updated_at) VALUES"
            " (%s, 'a@example.com', 'a@example.com', 'email-v1', 'A', '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA',"
            " 'active', now(), now())", (user,))
        connection.execute("INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, state, created_by_id,"
                           " created_at, updated_at) VALUES (%s, 'room@contoso.com', 'SHARED', 'OK', %s, now(), now())",
                           (mailbox, user))
        for n, (binding, sync_from) in enumerate(bindings.items()):
            connection.execute(
                "INSERT INTO meeting_attendance.outlook_bindings (id, graph_event_id, kind, mailbox_id, bound_by_id,"
                " sync_from, status, created_at, updated_at) VALUES (%s, %s, 'SERIES', %s, %s, %s::timestamptz,"
                " 'PENDING', now(), now())", (binding, f"AAMk-{n}", mailbox, user, sync_from))
            for start in ("10000-01-01 07:59:00+00", "2026-03-09 17:00:00+00"):
                connection.execute("INSERT INTO meeting_attendance.outlook_exclusions VALUES (%s, %s::timestamptz,"
                                   " %s, now())", (binding, start, user))
    migrate.upgrade(url)
    with psycopg.connect(url) as connection:
        connection.execute("SET TIME ZONE 'UTC'")
        rows = connection.execute("SELECT id::text, sync_from::text FROM meeting_attendance.outlook_bindings "
                                  "ORDER BY id").fetchall()
        kept = connection.execute("SELECT original_start::text FROM meeting_attendance.outlook_exclusions").fetchall()
    assert rows == [("33333333-3333-3333-3333-333333333333", "2200-01-01 00:00:00+00"),
                    ("44444444-4444-4444-4444-444444444444", "1900-01-01 00:00:00+00"),
                    ("55555555-5555-5555-5555-555555555555", "2026-01-05 09:00:00+00")]
    assert kept == [("2026-03-09 17:00:00+00",)] * 3
