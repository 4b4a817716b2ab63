"""`tenet social legacy backfill` killed for real (SIGKILL, mid-batch or between batches: wherever it is) and run
again ends exactly where one uninterrupted run ends (issue 20: "the social back-fill killed and resumed")."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from contextlib import suppress

import pytest
from tests.social.legacy.conftest import _setup
from tests.social.legacy.test_backfill import _outcome
from tests.support.cli import run_cli
from tests.support.invariants import rules_hold

from tenet.social.legacy import sample
from tenet.social.legacy.backfill import backfill


@pytest.fixture
def one_run_url(migrated_database) -> str:

    url = migrated_database("sl_killed_one_run")
    return url


async def _rows_done(setup) -> int:
    async with setup.db.unit_of_work() as session:
        from sqlalchemy import text

        return (await session.execute(text("SELECT coalesce(sum(rows_read), 0) FROM social_legacy.checkpoints"))
                ).scalar_one()


@pytest.mark.invariant("SOC-INV-01", "SOC-INV-04", "SOC-INV-07")
async def test_a_killed_backfill_rerun_equals_one_run(tenet_url, one_run_url, cli_env):
    async for setup in _setup(tenet_url, size=30, dirty=True):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tenet", "social", "legacy", "backfill", "--batch-size", "1",
            env={**os.environ, **cli_env}, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            # Until 40 rows are committed (or the process ended by itself, which the assertion below reports).
            while await _rows_done(setup) < 40:
                with suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), timeout=0.05)
                    break
            with suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
        finally:
            await process.wait()
        assert process.returncode == -signal.SIGKILL, "the back-fill finished before it could be killed"
        killed_at = await _rows_done(setup)
        await rules_hold(setup.db)
        finished = run_cli("social", "legacy", "backfill", "--batch-size", "1", env_extra=cli_env)
        assert finished.returncode == 0, finished.stderr
        resumed = await _outcome(setup)
        total = sum(len(rows) for rows in sample.generate(30, dirty=True).tables.values())
        assert 40 <= killed_at < total == await _rows_done(setup)  # every row read once, none twice
        await rules_hold(setup.db)
    async for setup in _setup(one_run_url, size=30, dirty=True):
        await backfill(setup.db, setup.legacy, "legacy", await setup.context())
        assert await _outcome(setup) == resumed
