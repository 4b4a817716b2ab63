"""Spec 000 P4: every table has row-level security, no permissive policy, no grants to anon/authenticated."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from tenet.kernel.invariants import check, get

# PostgreSQL's own schemas; every other schema is ours to check (KERNEL-INV-03).
NOT_SYSTEM = "n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"


async def _rls_violations(session) -> list[dict]:
    found = await check(await session.connection(), [get("KERNEL-INV-03")])
    return found[0].sample if found else []


async def test_database_roles_exist(db):
    async with db.read_only() as session:
        roles = set((await session.execute(
            text("SELECT rolname FROM pg_roles WHERE rolname IN ('anon', 'authenticated')"))).scalars())
    assert roles == {"anon", "authenticated"}


@pytest.mark.invariant("KERNEL-INV-03")
async def test_every_table_has_rls_and_no_permissive_policy_or_grant(db):
    """Walks pg_catalog, so a table added later without the baseline fails here."""
    async with db.read_only() as session:
        violations = await _rls_violations(session)
        schemas = set((await session.execute(text(
            f"SELECT DISTINCT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE c.relkind = 'r' AND c.relrowsecurity AND {NOT_SYSTEM}"))).scalars())
    assert schemas >= {"kernel", "iam", "workspace", "public"}  # the walk saw the real tables
    assert violations == []


@pytest.mark.invariant("KERNEL-INV-03")
async def test_a_table_without_rls_is_detected(db):
    """The detector can fail: a fresh table without the baseline is reported."""
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE TABLE kernel.forgot_rls (id int)"))
        violations = await _rls_violations(session)
        await session.rollback()
    assert [(v["schema"], v["table_name"], v["problem"]) for v in violations] == [
        ("kernel", "forgot_rls", "rls disabled")]


@pytest.mark.invariant("KERNEL-INV-03")
async def test_a_table_of_a_new_schema_is_checked_too(db):
    """No list of schemas to forget: a schema added later is walked like ours."""
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE SCHEMA scratch_reports"))
        await session.execute(text("CREATE TABLE scratch_reports.totals (id int)"))
        await session.execute(text("CREATE TABLE scratch_reports.guarded (id int)"))
        await session.execute(text("ALTER TABLE scratch_reports.guarded ENABLE ROW LEVEL SECURITY"))
        await session.execute(text(
            "CREATE POLICY lets_all_in ON scratch_reports.guarded FOR SELECT TO authenticated USING (true)"))
        violations = await _rls_violations(session)
        await session.rollback()
    assert sorted((v["schema"], v["table_name"], v["problem"]) for v in violations) == [
        ("scratch_reports", "guarded", "permissive policy lets_all_in"),
        ("scratch_reports", "totals", "rls disabled")]


async def test_postgresql_own_schemas_are_not_checked(db):
    """pg_catalog's tables have no RLS and never will; the walk leaves PostgreSQL's schemas (and temporary
    tables, which live in pg_temp_N) alone."""
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE TEMPORARY TABLE scratch_temp (id int) ON COMMIT DROP"))
        violations = await _rls_violations(session)
        await session.rollback()
    assert violations == []


@pytest.mark.invariant("KERNEL-INV-03")
@pytest.mark.parametrize("role", ["anon", "authenticated"])
async def test_low_privilege_roles_cannot_read_users(db, users, role):
    await users.make()
    async with db.unit_of_work() as session:
        await session.execute(text(f"SET LOCAL ROLE {role}"))
        with pytest.raises(ProgrammingError, match="permission denied"):
            await session.execute(text("SELECT * FROM iam.user_account"))
        await session.rollback()


@pytest.mark.invariant("KERNEL-INV-03")
async def test_rls_hides_rows_even_with_a_grant(db, users):
    """Were someone to grant SELECT by mistake, the deny-all policy still shows nothing."""
    await users.make()
    async with db.unit_of_work() as session:
        await session.execute(text("GRANT USAGE ON SCHEMA iam TO authenticated"))
        await session.execute(text("GRANT SELECT ON iam.user_account TO authenticated"))
        await session.execute(text("SET LOCAL ROLE authenticated"))
        visible = (await session.execute(text("SELECT count(*) FROM iam.user_account"))).scalar_one()
        await session.rollback()
    assert visible == 0


async def test_a_domain_schema_table_without_rls_is_detected(db):
    """The detector walks every schema, not a list: a domain added later (social) is covered without a change."""
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE SCHEMA some_new_domain"))
        await session.execute(text("CREATE TABLE some_new_domain.forgot_rls (id int)"))
        violations = await check(await session.connection(), [get("KERNEL-INV-03")])
        await session.rollback()
    assert violations and any(row["table_name"] == "forgot_rls" for row in violations[0].sample)
