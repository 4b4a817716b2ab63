"""Plain statements in the unit of work (tenet.kernel.statements), and their pipeline."""

from __future__ import annotations

import uuid

import pytest
from psycopg.errors import DivisionByZero, UniqueViolation
from sqlalchemy import text

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.statements import statements


async def test_a_pipeline_runs_its_statements_in_order_in_the_transaction(db):
    async with db.unit_of_work() as session:
        sql = await statements(session)
        await sql.execute("CREATE TEMP TABLE counted (id int PRIMARY KEY, n int NOT NULL) ON COMMIT DROP")
        async with sql.pipeline():
            counts = [await sql.execute("INSERT INTO counted VALUES (1, 0)"),
                      await sql.execute("UPDATE counted SET n = n + 1 WHERE id = 1"),
                      await sql.execute("INSERT INTO counted VALUES (2, 0)")]
        # Inside the block nothing has answered yet; after it, every statement ran, in order.
        assert counts == [-1, -1, -1]
        assert await sql.all("SELECT id, n FROM counted ORDER BY id") == [{"id": 1, "n": 1}, {"id": 2, "n": 0}]


async def test_an_error_in_a_pipeline_is_raised_at_its_end_with_its_constraint(db):
    async with db.unit_of_work() as session:
        sql = await statements(session)
        await sql.execute("CREATE TEMP TABLE once (id int CONSTRAINT once_pkey PRIMARY KEY) ON COMMIT DROP")
        with pytest.raises(UniqueViolation) as raised:
            async with sql.pipeline():
                await sql.execute("INSERT INTO once VALUES (1)")
                await sql.execute("INSERT INTO once VALUES (1)")
                reached_the_end_of_the_block = True
        assert reached_the_end_of_the_block
        assert raised.value.diag.constraint_name == "once_pkey"
        await session.rollback()


async def test_a_failed_pipeline_leaves_nothing_of_the_unit_of_work(committed_db, clock):
    """The audit row sent before the failing statement is rolled back with the rest: nothing half-written."""
    subject = uuid.uuid4()
    with pytest.raises(DivisionByZero):
        async with committed_db.unit_of_work() as session:
            sql = await statements(session)
            async with sql.pipeline():
                await audit.record(session, action="test.pipeline.failed", actor=Actor.system(),
                                   subject=("thing", subject), now=clock.now())
                await sql.execute("SELECT 1 / 0")
    async with committed_db.read_only() as session:
        stored = (await session.execute(text("SELECT count(*) FROM kernel.audit_log WHERE subject_id = :s"),
                                        {"s": str(subject)})).scalar_one()
    assert stored == 0
