"""Run the registered detectors from a test: after a scenario, every invariant must hold."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tenet.kernel.invariants import all_invariants, check


async def assert_invariants_hold(target: AsyncSession | AsyncConnection, *, prefix: str | None = None) -> None:
    """Fail naming every violated invariant (optionally only ids starting with `prefix`, e.g. "WS-")."""
    connection = await target.connection() if isinstance(target, AsyncSession) else target
    invariants = [i for i in all_invariants() if prefix is None or i.id.startswith(prefix)]
    violations = await check(connection, invariants)
    assert not violations, "invariants violated: " + "; ".join(
        f"{v.invariant.id} ({v.rows} rows, e.g. {v.sample[:2]})" for v in violations
    )
