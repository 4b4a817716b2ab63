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


async def test_ones_answers_each_first_row_in_order(db):
    async with db.unit_of_work() as session:
        sql = await statements(session)
        assert await sql.ones(("SELECT 1 AS n", None), ("SELECT 2 AS n WHERE false", None),
                              ("SELECT %(x)s::int AS n", {"x": 3})) == [{"n": 1}, None, {"n": 3}]


async def test_ones_runs_a_read_after_the_lock_before_it_was_granted(committed_db, clock):
    """The statements of one trip run one after the other, each with its own snapshot: a read sent with a
    lock that had to wait sees what the lock's holder committed meanwhile (what the invite path relies on)."""
    import asyncio

    bucket = {"bucket": f"test:ones:{uuid.uuid4()}", "at": clock.now()}
    insert = ("INSERT INTO kernel.rate_limit_counter (bucket, window_start, hits, expires_at) "
              "VALUES (%(bucket)s, %(at)s, 1, %(at)s)")
    lock = "SELECT hits FROM kernel.rate_limit_counter WHERE bucket = %(bucket)s FOR UPDATE"
    read = "SELECT hits FROM kernel.rate_limit_counter WHERE bucket = %(bucket)s"
    async with committed_db.unit_of_work() as session:
        await (await statements(session)).execute(insert, bucket)

    async def waiting_trip() -> list:
        async with committed_db.unit_of_work() as session:
            return await (await statements(session)).ones((lock, bucket), (read, bucket))

    async with committed_db.unit_of_work() as holder:
        held = await statements(holder)
        await held.execute(lock, bucket)
        await held.execute("UPDATE kernel.rate_limit_counter SET hits = 2 WHERE bucket = %(bucket)s", bucket)
        trip = asyncio.create_task(waiting_trip())
        await asyncio.sleep(0.3)
        assert not trip.done()  # waiting for the lock
    assert await trip == [{"hits": 2}, {"hits": 2}]
    async with committed_db.unit_of_work() as session:
        await (await statements(session)).execute(
            "DELETE FROM kernel.rate_limit_counter WHERE bucket = %(bucket)s", bucket)


def test_the_read_path_and_a_unit_of_works_statements_are_both_runners():
    """Query functions take a `Runner`: both handles must keep its three methods with one signature."""
    import inspect

    from tenet.kernel.reads import PooledReads, Runner
    from tenet.kernel.statements import Statements

    for name in ("all", "one", "value"):
        wanted = inspect.signature(getattr(Runner, name))
        for handle in (PooledReads, Statements):
            found = inspect.signature(getattr(handle, name)).parameters.keys()
            assert found == wanted.parameters.keys(), (handle, name)
