"""The plain unit of work (Database.transaction): one transaction of plain statements on the primary's psycopg pool,
with the unit of work's contract — commit once on success, roll back on error, commit first for an error that
`commits_transaction`, after-commit steps only once committed — and the read path's answers when the database
is out of reach. Run on real connections that commit (committed_db and a Database of its own)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tenet.db.database import Database, after_commit, libpq_url
from tenet.kernel.errors import ServiceUnavailable
from tenet.meetings.errors import DeviceAlreadyUsed

TABLE = "public.plain_unit_probe"


@pytest.fixture
async def probe_table(database_url: str) -> AsyncIterator[str]:
    url = libpq_url(database_url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connection.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id uuid PRIMARY KEY, note text NOT NULL)")
        await connection.execute(f"TRUNCATE {TABLE}")
    yield url
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connection.execute(f"DROP TABLE IF EXISTS {TABLE}")


@pytest.fixture
async def small_db(engine: AsyncEngine) -> AsyncIterator[Database]:
    """A Database whose primary pool holds one connection, answering 503 after half a second without one."""
    database = Database(engine, watch_outages=False, read_pool_size=1, read_timeout=0.5)
    yield database
    await database.dispose()


async def _stored(url: str, row_id: uuid.UUID) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        rows = await (await connection.execute(f"SELECT note FROM {TABLE} WHERE id = %s", (row_id,))).fetchall()
    return [note for (note,) in rows]


async def test_it_commits_once_the_block_ends_and_then_runs_its_after_commit_steps(small_db, probe_table):
    row_id, seen_at_commit = uuid.uuid4(), []

    async def step() -> None:
        seen_at_commit.append(await _stored(probe_table, row_id))

    async with small_db.transaction() as sql:
        await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'kept')", {"id": row_id})
        after_commit(sql, step)
        assert await _stored(probe_table, row_id) == []  # not visible outside before the commit
        assert seen_at_commit == []
    assert seen_at_commit == [["kept"]]  # the step ran after the commit, which it could see


async def test_an_error_rolls_everything_back_and_skips_the_after_commit_steps(small_db, probe_table):
    row_id, ran = uuid.uuid4(), []

    async def step() -> None:
        ran.append(True)

    with pytest.raises(ZeroDivisionError):
        async with small_db.transaction() as sql:
            await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'lost')", {"id": row_id})
            after_commit(sql, step)
            raise ZeroDivisionError
    assert await _stored(probe_table, row_id) == []
    assert ran == []


async def test_a_failed_statement_leaves_nothing_half_written(small_db, probe_table):
    row_id = uuid.uuid4()
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with small_db.transaction() as sql:
            await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'first')", {"id": row_id})
            await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'again')", {"id": row_id})
    assert await _stored(probe_table, row_id) == []
    async with small_db.transaction() as sql:  # the pool's one connection came back usable
        assert await sql.value("SELECT 1") == 1


async def test_a_refusal_that_commits_keeps_its_record_and_still_travels_on(small_db, probe_table):
    row_id, ran = uuid.uuid4(), []

    async def step() -> None:
        ran.append(True)

    refusal = DeviceAlreadyUsed()  # a refused check-in: its REFUSED scan must persist (kernel.refusals.refuse)
    refusal.commits_transaction = True
    with pytest.raises(DeviceAlreadyUsed) as raised:
        async with small_db.transaction() as sql:
            await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'the record')", {"id": row_id})
            after_commit(sql, step)
            raise refusal
    assert raised.value is refusal
    assert await _stored(probe_table, row_id) == ["the record"]
    assert ran == []  # as in unit_of_work: a refusal's commit runs no after-commit step


async def test_no_connection_is_held_before_the_first_statement(small_db):
    """A request counts its rate limit on the same pool before its first statement: were the connection taken
    when the block opens, the pool's one connection would be held and the count would wait for it (503)."""
    async with small_db.transaction() as sql:
        assert await small_db.reads.value("SELECT 41 + 1") == 42
        assert await sql.value("SELECT 7") == 7
    async with small_db.transaction():
        pass  # a block that runs no statement takes no connection and commits nothing
    assert await small_db.reads.value("SELECT 1") == 1


async def test_a_connection_lost_inside_the_transaction_answers_503_and_keeps_nothing(small_db, probe_table):
    row_id = uuid.uuid4()
    with pytest.raises(ServiceUnavailable):
        async with small_db.transaction() as sql:
            await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'cut')", {"id": row_id})
            pid = await sql.value("SELECT pg_backend_pid()")
            async with await psycopg.AsyncConnection.connect(probe_table, autocommit=True) as killer:
                await killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            await sql.execute("SELECT 1")
    assert await _stored(probe_table, row_id) == []
    async with small_db.transaction() as sql:  # the broken connection was not given out again
        assert await sql.value("SELECT 1") == 1


async def test_an_idle_connection_that_died_is_replaced_before_anything_runs(small_db, probe_table):
    """A restarted server leaves dead connections in the pool: the one found dead at BEGIN is replaced (nothing
    had run on it), and the transaction goes on as if nothing happened."""
    pid = await small_db.reads.value("SELECT pg_backend_pid()")
    async with await psycopg.AsyncConnection.connect(probe_table, autocommit=True) as killer:
        await killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    row_id = uuid.uuid4()
    async with small_db.transaction() as sql:
        await sql.execute(f"INSERT INTO {TABLE} VALUES (%(id)s, 'after the restart')", {"id": row_id})
        assert await sql.value("SELECT pg_backend_pid()") != pid
    assert await _stored(probe_table, row_id) == ["after the restart"]


async def test_in_the_tests_bound_mode_it_is_a_savepoint_of_the_test_transaction(db):
    with pytest.raises(ZeroDivisionError):
        async with db.transaction() as sql:
            await sql.execute("CREATE TEMP TABLE bound_probe (n int)")
            raise ZeroDivisionError
    async with db.transaction() as sql:  # rolled back to its savepoint: the table is gone, the transaction goes on
        assert await sql.value("SELECT to_regclass('pg_temp.bound_probe') IS NULL") is True
        await sql.execute("CREATE TEMP TABLE bound_probe (n int)")
    assert await db.reads.value("SELECT to_regclass('pg_temp.bound_probe') IS NOT NULL") is True
