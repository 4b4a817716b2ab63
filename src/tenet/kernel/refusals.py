"""Refusals that leave a record, without a service ending its transaction (docs/kernel.md §4, "Recorded refusals").

Some refusals are facts worth keeping: a refused check-in is a REFUSED scan in its meeting's log (MA-INV-11). The
command that refuses must leave that record and nothing else it attempted, and it may not commit or roll back
itself: only its boundary (`Database.unit_of_work`) ends the transaction. Two pieces make that possible:

- `attempt(session, sql, params, refused_by=...)` runs one statement the database may refuse (a trigger or a
  constraint named in `refused_by`) behind a savepoint sent in the same round trip, so the happy path costs nothing
  more. When the database refuses, the transaction is taken back to the savepoint and goes on: the command can read
  again and decide what to answer. `Attempt.undo()` takes back a statement that ran but must not stay (it lost a
  race and wrote a row that belongs to the winner's story only).
- `refuse(session, error, record=(sql, params))` writes the record and answers `error` marked `commits_transaction`:
  the unit of work commits what the transaction holds (the record, and whatever the command did before its attempt:
  its reads) and then lets the error travel on. Anything the command changed and must not keep, it takes back first
  with an attempt's savepoint; a command that changed nothing before refusing needs no attempt at all.

Both run on the unit of work's own connection (tenet.kernel.statements): the session's ORM objects know nothing of
them, so a command using them reasons in plain rows.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TypeVar

import psycopg

from tenet.kernel.errors import DomainError
from tenet.kernel.statements import Params, Row, Statements, Unit, statements

E = TypeVar("E", bound=DomainError)

_SAVEPOINT = "SAVEPOINT tenet_attempt"
_BACK = "ROLLBACK TO SAVEPOINT tenet_attempt"


@dataclass
class Attempt:
    """One statement run behind a savepoint: its first row, or the constraint by which the database refused it."""

    row: Row | None
    refused: str | None
    _sql: Statements

    async def undo(self) -> None:
        """Take back what the statement did (it ran, and lost a race); the transaction goes on."""
        await self._sql.execute(_BACK)


async def attempt(session: Unit, sql: str, params: Params = None, *,
                  refused_by: Collection[str]) -> Attempt:
    """Run `sql` behind a savepoint (both in one round trip). A violation of a constraint in `refused_by` (a
    trigger's `RAISE ... USING CONSTRAINT`, a CHECK, a unique index) is the database refusing: the transaction is
    taken back to the savepoint and the answer says which. Any other error is raised as it is (the transaction is
    then aborted, and the boundary rolls it back)."""
    handle = await statements(session)
    try:
        _, row = await handle.ones((_SAVEPOINT, None), (sql, params))
    except psycopg.errors.IntegrityError as exc:
        constraint = exc.diag.constraint_name
        if constraint not in refused_by:
            raise
        await handle.execute(_BACK)
        return Attempt(None, constraint, handle)
    return Attempt(row, None, handle)


async def refuse(session: Unit, error: E, *, record: tuple[str, Params]) -> E:
    """Write `record` (one statement) and answer `error` to raise, marked so that its unit of work commits before
    it travels on: the record persists although the request fails."""
    sql, params = record
    await (await statements(session)).execute(sql, params)
    error.commits_transaction = True
    return error
