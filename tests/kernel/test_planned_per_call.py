"""A statement marked `PlannedPerCall` is never prepared on the server, so PostgreSQL plans it for each call's
values instead of settling on a generic plan after five calls (bench series_report: the generic plan of the series
report ran 1.8x slower); an unmarked statement is prepared as psycopg does by default."""

from __future__ import annotations

from tenet.kernel.plans import PlannedPerCall
from tenet.kernel.statements import statements

MARKED = PlannedPerCall("SELECT %(n)s::int + 1 AS marked")
UNMARKED = "SELECT %(n)s::int + 2 AS unmarked"
PREPARED = "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE %(pattern)s"


async def test_a_marked_statement_is_never_prepared_and_an_unmarked_one_is(db):
    async with db.unit_of_work() as session:
        run = await statements(session)
        for n in range(12):  # psycopg prepares a statement on its 5th execution on a connection
            assert await run.value(MARKED, {"n": n}) == n + 1
            assert await run.value(UNMARKED, {"n": n}) == n + 2
        assert await run.value(PREPARED, {"pattern": "%AS marked%"}) == 0
        assert await run.value(PREPARED, {"pattern": "%AS unmarked%"}) == 1


async def test_formatting_a_marked_statement_needs_marking_again():
    """str methods answer plain strings: a statement built from a marked template is marked where it is built."""
    template = PlannedPerCall("SELECT {column}")
    assert not isinstance(template.format(column="1"), PlannedPerCall)
    assert isinstance(PlannedPerCall(template.format(column="1")), PlannedPerCall)
