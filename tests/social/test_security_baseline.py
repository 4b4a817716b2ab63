"""Every social table has row-level security on and its restrictive deny-all policy (the baseline
KERNEL-INV-03 walks for every schema)."""

from __future__ import annotations

from sqlalchemy import text


async def test_every_social_table_has_the_rls_baseline(db):
    """The eleven tables, each with RLS on and its restrictive deny-all policy (KERNEL-INV-03 walks them too)."""
    async with db.read_only() as session:
        rows = (await session.execute(text(
            "SELECT c.relname, c.relrowsecurity, EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = 'social' "
            "AND p.tablename = c.relname AND p.permissive = 'RESTRICTIVE') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'social' AND c.relkind = 'r'"))).all()
    assert len(rows) == 11 and all(rls and policy for _, rls, policy in rows), rows
