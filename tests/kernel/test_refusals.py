"""Recorded refusals (tenet.kernel.refusals): an attempt behind a savepoint, and a refusal whose record commits
while what the command attempted does not — the unit of work alone ends the transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.kernel import refusals
from tenet.kernel.errors import Conflict
from tenet.kernel.statements import statements

TABLE = "public.kernel_refusal_probe"


@pytest.fixture
async def probe_table(committed_db: Database) -> AsyncIterator[Database]:
    """A real table (units of work of `committed_db` run on pooled connections: a temporary one would not be seen)."""
    async with committed_db.unit_of_work() as session:
        await session.execute(text(
            f"CREATE TABLE {TABLE} (id int CONSTRAINT kernel_refusal_probe_pkey PRIMARY KEY, "
            "kind text NOT NULL CONSTRAINT kernel_refusal_probe_kind CHECK (kind <> 'forbidden'))"))
    yield committed_db
    async with committed_db.unit_of_work() as session:
        await session.execute(text(f"DROP TABLE {TABLE}"))


async def _rows(db: Database) -> list[tuple[int, str]]:
    async with db.read_only() as session:
        return [tuple(r) for r in (await session.execute(text(f"SELECT id, kind FROM {TABLE} ORDER BY id"))).all()]


INSERT = f"INSERT INTO {TABLE} (id, kind) VALUES (%(id)s, %(kind)s) RETURNING id"


async def test_a_refused_attempt_takes_back_only_itself_and_the_transaction_goes_on(probe_table):
    async with probe_table.unit_of_work() as session:
        sql = await statements(session)
        await sql.execute(INSERT, {"id": 1, "kind": "before"})
        tried = await refusals.attempt(session, INSERT, {"id": 2, "kind": "forbidden"},
                                       refused_by={"kernel_refusal_probe_kind"})
        assert (tried.row, tried.refused) == (None, "kernel_refusal_probe_kind")
        # The transaction is usable again: a read and a write after the refusal.
        assert await sql.value(f"SELECT count(*) FROM {TABLE}") == 1
        await sql.execute(INSERT, {"id": 3, "kind": "after"})
    assert await _rows(probe_table) == [(1, "before"), (3, "after")]


async def test_an_attempt_that_ran_answers_its_row_and_can_be_taken_back(probe_table):
    async with probe_table.unit_of_work() as session:
        kept = await refusals.attempt(session, INSERT, {"id": 1, "kind": "kept"}, refused_by=())
        lost = await refusals.attempt(session, INSERT, {"id": 2, "kind": "lost a race"}, refused_by=())
        assert (kept.row, kept.refused, lost.row) == ({"id": 1}, None, {"id": 2})
        await lost.undo()
    assert await _rows(probe_table) == [(1, "kept")]


async def test_a_violation_not_named_as_a_refusal_is_raised_and_nothing_stays(probe_table):
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with probe_table.unit_of_work() as session:
            await (await statements(session)).execute(INSERT, {"id": 1, "kind": "first"})
            await refusals.attempt(session, INSERT, {"id": 1, "kind": "again"},
                                   refused_by={"kernel_refusal_probe_kind"})
    assert await _rows(probe_table) == []


async def test_a_refusal_commits_its_record_and_not_the_attempt_it_took_back(probe_table):
    """The shape of a refused check-in: an attempt refused by the database, then the record, then the error out of
    the unit of work — which committed the record (and only it) before the error reached the caller."""
    with pytest.raises(Conflict) as raised:
        async with probe_table.unit_of_work() as session:
            tried = await refusals.attempt(session, INSERT, {"id": 1, "kind": "forbidden"},
                                           refused_by={"kernel_refusal_probe_kind"})
            assert tried.refused is not None
            raise await refusals.refuse(session, Conflict(reason="test"),
                                        record=(INSERT, {"id": 9, "kind": "refused"}))
    assert raised.value.commits_transaction is True
    assert str(raised.value.code) == "CONFLICT"
    assert await _rows(probe_table) == [(9, "refused")]


async def test_the_same_error_unrecorded_rolls_everything_back(probe_table):
    """Control: without `refuse`, the error's unit of work rolls back (the flag is on the one error, not its
    class), so a row written before it is gone."""
    with pytest.raises(Conflict) as raised:
        async with probe_table.unit_of_work() as session:
            await (await statements(session)).execute(INSERT, {"id": 9, "kind": "refused"})
            raise Conflict(reason="test")
    assert raised.value.commits_transaction is False
    assert await _rows(probe_table) == []
