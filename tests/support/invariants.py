"""Run the registered detectors from a test: after a scenario, every invariant must hold.

`rules_hold(db, "MA-")` is the one check every domain's tests call (their fixtures and race files wrap nothing
else); `assert_invariants_hold` is the same check on a session or connection a test already has open.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tenet.db.database import Database
from tenet.kernel.invariants import all_invariants, check


async def assert_invariants_hold(target: AsyncSession | AsyncConnection, *, prefix: str | None = None) -> None:
    """Fail naming every violated invariant (optionally only ids starting with `prefix`, e.g. "WS-")."""
    connection = await target.connection() if isinstance(target, AsyncSession) else target
    invariants = [i for i in all_invariants() if prefix is None or i.id.startswith(prefix)]
    violations = await check(connection, invariants)
    assert not violations, "invariants violated: " + "; ".join(
        f"{v.invariant.id} ({v.rows} rows, e.g. {v.sample[:2]}{' ' + v.error if v.error else ''})"
        for v in violations
    )


async def rules_hold(db: Database, prefix: str | None = None, *, now: datetime | None = None) -> None:
    """Every detector whose id starts with `prefix` ("SOC-", "WS-", "MA-", "RSV-"; all when None) finds nothing
    on one read-only snapshot of `db`, judged at `now` when given (`tenet.now`, for rules that read the clock:
    a test's frozen clock is not the database's)."""
    async with db.read_only() as session:
        if now is not None:
            await session.execute(text("SELECT set_config('tenet.now', :now, true)"), {"now": now.isoformat()})
        await assert_invariants_hold(session, prefix=prefix)
