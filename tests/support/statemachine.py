"""Running a domain's Hypothesis state machine against the real database: one place for the loop, the engine and
the settings every property test shares (`run_machine`), and the machine's own plumbing (`DatabaseMachine`): one
transaction rolled back at the end, commands as units of work, the detectors after a step."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tenet.db.database import Database, make_engine
from tenet.kernel.clock import FrozenClock
from tenet.kernel.errors import DomainError
from tenet.kernel.invariants import Violation, all_invariants, check


class DatabaseMachine(RuleBasedStateMachine):
    """A state machine's run on one connection inside one transaction, rolled back at teardown (`db` binds every
    unit of work to it as a savepoint). A subclass sets `outcomes` (its module's Counter, which `run_machine`
    clears and the test asserts on) and `start` (the frozen clock's first instant), and adds its scene in
    `__init__` after `super().__init__()`."""

    loop: asyncio.AbstractEventLoop
    engine: AsyncEngine
    outcomes: Counter[str]
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __init__(self) -> None:
        super().__init__()
        self.connection = self.run(self.engine.connect())
        self.transaction = self.run(self.connection.begin())
        self.db = Database(self.engine, bind=self.connection)
        self.clock = FrozenClock(self.start)

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        self.run(self.transaction.rollback())
        self.run(self.connection.close())

    def command(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        """`body(session)` in one unit of work; a DomainError is an allowed answer (counted by its code), anything
        else fails the run."""

        async def go() -> Any:
            async with self.db.unit_of_work() as session:
                return await body(session)

        try:
            result = self.run(go())
        except DomainError as exc:
            self.outcomes[str(exc.code)] += 1
            return None
        self.outcomes["ok"] += 1
        return result

    @staticmethod
    def pick(items: list[Any], index: int) -> Any:
        return items[index % len(items)]

    async def detected(self, prefix: str, now: datetime | None = None) -> list[Violation]:
        """What the detectors of the ids starting with `prefix` find on the machine's connection, judged at `now`
        when given (`tenet.now`)."""
        if now is not None:
            await self.connection.execute(text("SELECT set_config('tenet.now', :now, true)"), {"now": now.isoformat()})
        return await check(self.connection, [i for i in all_invariants() if i.id.startswith(prefix)])


EXPLORE = os.environ.get("TENET_PROPERTY_EXPLORE") == "1"


def run_machine(commands: type[RuleBasedStateMachine], database_url: str, outcomes: Counter[str], *,
                max_examples: int, steps: int) -> None:
    """Run `commands` (a state machine whose steps use the class attributes `loop` and `engine`) with a fresh
    event loop and a one-connection engine; `outcomes` is cleared first and printed after the run, for the
    caller's assertions on what the run explored.

    The sequences are the same on every run (a seed from the test's name): every caller asserts that the run
    reached rare outcomes, and a random run misses one now and then (a red CI that no change caused).
    `TENET_PROPERTY_EXPLORE=1` draws fresh sequences instead, for hunting new failures (`make property-explore`);
    there a coverage assertion that fails means "explore longer", not a bug."""
    loop = asyncio.new_event_loop()
    engine = make_engine(database_url, pool_size=1, max_overflow=0, application_name="tenet-property")
    machine = type("Machine", (commands,), {"loop": loop, "engine": engine})
    outcomes.clear()
    try:
        run_state_machine_as_test(machine, settings=settings(
            max_examples=max_examples, stateful_step_count=steps, deadline=None, derandomize=not EXPLORE,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ))
    finally:
        loop.run_until_complete(engine.dispose())
        loop.close()
    print("outcomes:", dict(outcomes))
