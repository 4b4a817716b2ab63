"""Running a domain's Hypothesis state machine against the real database: one place for the loop, the engine and
the settings every property test shares."""

from __future__ import annotations

import asyncio
from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from tenet.db.database import make_engine


def run_machine(commands: type[RuleBasedStateMachine], database_url: str, outcomes: Counter[str], *,
                max_examples: int, steps: int) -> None:
    """Run `commands` (a state machine whose steps use the class attributes `loop` and `engine`) with a fresh
    event loop and a one-connection engine; `outcomes` is cleared first and printed after the run, for the
    caller's assertions on what the run explored."""
    loop = asyncio.new_event_loop()
    engine = make_engine(database_url, pool_size=1, max_overflow=0, application_name="tenet-property")
    machine = type("Machine", (commands,), {"loop": loop, "engine": engine})
    outcomes.clear()
    try:
        run_state_machine_as_test(machine, settings=settings(
            max_examples=max_examples, stateful_step_count=steps, deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ))
    finally:
        loop.run_until_complete(engine.dispose())
        loop.close()
    print("outcomes:", dict(outcomes))
