"""What /metrics tells an operator beyond request counts (issue 21, "Also"): how long checkouts wait for a pooled
connection, the pool's overflow, the job queue's ready depth and oldest age, the outbox's due backlog and its age,
all on the real database; and that the scrape's database part is bounded and its gauges appear once per scrape in
multi-process mode."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from tenet.app import create_app
from tenet.db.database import Database, libpq_url, make_engine
from tenet.kernel.errors import ServiceUnavailable
from tenet.kernel.reads import PooledReads
from tenet.ops import SCRAPE_DATABASE_SECONDS
from tests.conftest import test_settings
from tests.support.metrics import METRICS_TOKEN, scrape, value


def _counted(name: str, pool: str) -> float:
    """This process's value of a pool metric (the tests below look at what one checkout adds)."""
    return REGISTRY.get_sample_value(name, {"pool": pool}) or 0.0


def _fast_checkouts(pool: str, within: str = "0.5") -> float:
    return REGISTRY.get_sample_value("tenet_db_pool_checkout_seconds_bucket", {"pool": pool, "le": within}) or 0.0


class TestPoolWaits:
    async def test_a_checkout_that_waits_for_the_busy_pool_is_timed_and_counted(self, database_url):
        engine = make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=10)
        waits, checkouts = _counted("tenet_db_pool_waits_total", "write"), _counted(
            "tenet_db_pool_checkout_seconds_count", "write")
        fast = _fast_checkouts("write")
        try:
            async with engine.connect() as first:  # opens the pool's only connection: no idle one, so a wait
                await first.execute(text("SELECT 1"))

                async def second() -> None:
                    async with engine.connect() as connection:
                        await connection.execute(text("SELECT 1"))

                waiting = asyncio.create_task(second())
                await asyncio.sleep(1.0)
                assert not waiting.done()
            await waiting
        finally:
            await engine.dispose()
        assert _counted("tenet_db_pool_checkout_seconds_count", "write") - checkouts == 2
        assert _counted("tenet_db_pool_waits_total", "write") - waits == 2
        # The second waited the second the first held the only connection: not within half a second.
        assert _fast_checkouts("write") - fast == 1

    async def test_a_checkout_that_gives_up_is_a_timeout(self, database_url):
        engine = make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=0.3)
        timeouts = _counted("tenet_db_pool_timeouts_total", "write")
        try:
            async with engine.connect() as first:
                await first.execute(text("SELECT 1"))
                with pytest.raises(PoolTimeoutError):
                    async with engine.connect():
                        pass
        finally:
            await engine.dispose()
        assert _counted("tenet_db_pool_timeouts_total", "write") - timeouts == 1

    async def test_the_read_path_s_pool_is_timed_under_its_own_label(self, database_url):
        reads = PooledReads(libpq_url(database_url), size=1, timeout=0.3)
        timeouts, checkouts = _counted("tenet_db_pool_timeouts_total", "read"), _counted(
            "tenet_db_pool_checkout_seconds_count", "read")
        try:
            assert await reads.value("SELECT 1") == 1
            async with reads.pool.connection():
                with pytest.raises(ServiceUnavailable):  # the 503 a request gets
                    await reads.value("SELECT 2")
            assert await reads.value("SELECT 3") == 3
        finally:
            await reads.close()
        assert _counted("tenet_db_pool_timeouts_total", "read") - timeouts == 1
        assert _counted("tenet_db_pool_checkout_seconds_count", "read") - checkouts == 3

    async def test_overflow_in_use_is_scraped(self, database_url, clock, tmp_path):
        database = Database.from_url(database_url, pool_size=1, max_overflow=3, watch_outages=False)
        app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=database,
                         clock=clock, run_background_tasks=False)
        try:
            async with contextlib.AsyncExitStack() as held:
                for _ in range(3):
                    await (await held.enter_async_context(database.engine.connect())).execute(text("SELECT 1"))
                busy = await scrape(app)
            idle = await scrape(app)
        finally:
            await database.dispose()
        assert value(busy, "tenet_db_pool_overflow_connections") == 2.0
        assert value(busy, "tenet_db_pool_connections", state="checked_out") == 3.0
        # Overflow connections are closed when they come back.
        assert value(idle, "tenet_db_pool_overflow_connections") == 0.0


@pytest.fixture
def committed_app(committed_db, clock, tmp_path):
    return create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=committed_db,
                      clock=clock, run_background_tasks=False)


async def _job(connection, queue: str, *, status: str = "todo", scheduled: str | None = None,
               entered_ago: str) -> None:
    """A procrastinate job row (its insert trigger records `deferred` now), its entry into todo moved back."""
    job_id = (await connection.execute(text(
        f"INSERT INTO procrastinate_jobs (queue_name, task_name, status, scheduled_at) "
        f"VALUES (:queue, 'test_task', CAST(:status AS procrastinate_job_status), {scheduled or 'NULL'}) "
        f"RETURNING id"), {"queue": queue, "status": status})).scalar_one()
    await connection.execute(text(f"UPDATE procrastinate_events SET at = now() - interval '{entered_ago}' "
                                  "WHERE job_id = :id"), {"id": job_id})


class TestBacklogs:
    async def test_ready_jobs_per_queue_and_the_oldest_one_s_wait(self, committed_app, committed_db):
        async with committed_db.engine.begin() as connection:
            await _job(connection, "default", entered_ago="120 seconds")
            # Deferred long ago for later: ready since its scheduled time, 30 s ago.
            await _job(connection, "default", scheduled="now() - interval '30 seconds'", entered_ago="600 seconds")
            await _job(connection, "default", scheduled="now() + interval '1 hour'", entered_ago="900 seconds")
            await _job(connection, "default", status="succeeded", entered_ago="1 day")
            await _job(connection, "imports", entered_ago="5 seconds")
        exposition = await scrape(committed_app)
        assert value(exposition, "tenet_jobs_ready", queue="default") == 2.0
        assert 120 <= value(exposition, "tenet_jobs_oldest_ready_age_seconds", queue="default") < 140
        assert value(exposition, "tenet_jobs_ready", queue="imports") == 1.0
        assert 5 <= value(exposition, "tenet_jobs_oldest_ready_age_seconds", queue="imports") < 25
        assert value(exposition, "tenet_jobs", queue="default", status="todo") == 3.0

    async def test_an_empty_default_queue_is_zero_not_missing(self, committed_app):
        exposition = await scrape(committed_app)
        assert value(exposition, "tenet_jobs_ready", queue="default") == 0.0
        assert value(exposition, "tenet_jobs_oldest_ready_age_seconds", queue="default") == 0.0
        assert value(exposition, "tenet_outbox_due_emails") == 0.0
        assert value(exposition, "tenet_outbox_oldest_due_age_seconds") == 0.0

    async def test_due_mail_and_how_long_the_oldest_has_been_due(self, committed_app, committed_db, clock):
        now = clock.now()
        rows = [("pending", now - timedelta(seconds=300), None), ("pending", now - timedelta(seconds=10), None),
                ("pending", now + timedelta(seconds=60), None),  # backing off after a failed attempt
                ("sent", now - timedelta(hours=1), now - timedelta(minutes=59))]
        async with committed_db.engine.begin() as connection:
            for status, next_attempt_at, sent_at in rows:
                await connection.execute(text(
                    "INSERT INTO kernel.email_outbox (id, kind, to_address, subject, body_text, status, attempts, "
                    "created_at, next_attempt_at, sent_at) VALUES (gen_random_uuid(), 'test', 'a@example.com', 's', "
                    "'b', :status, 0, :created, :next, :sent)"),
                    {"status": status, "created": now - timedelta(hours=2), "next": next_attempt_at, "sent": sent_at})
        exposition = await scrape(committed_app)
        assert value(exposition, "tenet_outbox_due_emails") == 2.0
        assert value(exposition, "tenet_outbox_oldest_due_age_seconds") == 300.0
        assert value(exposition, "tenet_outbox_emails", status="pending") == 3.0

    async def test_a_scrape_waits_for_a_locked_table_no_longer_than_its_bound(self, committed_app, committed_db):
        """The database answered, so it is up; what it read before the locked table is kept, what it would have
        read there and after is missing from this scrape only."""
        async with committed_db.engine.connect() as locker:
            await locker.execute(text("LOCK TABLE kernel.email_outbox IN ACCESS EXCLUSIVE MODE"))
            started = time.monotonic()
            blocked = await scrape(committed_app)
            elapsed = time.monotonic() - started
            await locker.rollback()
        assert SCRAPE_DATABASE_SECONDS - 0.5 < elapsed < SCRAPE_DATABASE_SECONDS + 2
        assert value(blocked, "tenet_database_up") == 1.0
        assert value(blocked, "tenet_jobs_ready", queue="default") == 0.0
        assert value(blocked, "tenet_outbox_due_emails") is None
        assert value(blocked, "tenet_jobs", queue="default", status="todo") is None
        assert value(await scrape(committed_app), "tenet_outbox_due_emails") == 0.0

    async def test_a_pool_with_no_connection_to_give_is_a_database_that_did_not_answer(self, database_url, clock,
                                                                                       tmp_path):
        database = Database.from_url(database_url, pool_size=1, max_overflow=0, watch_outages=False)
        app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=database,
                         clock=clock, run_background_tasks=False)
        try:
            async with database.engine.connect() as held:
                await held.execute(text("SELECT 1"))
                started = time.monotonic()
                exposition = await scrape(app)
                elapsed = time.monotonic() - started
        finally:
            await database.dispose()
        assert value(exposition, "tenet_database_up") == 0.0
        assert elapsed < SCRAPE_DATABASE_SECONDS + 2


def test_scrape_gauges_appear_once_per_scrape_in_multi_process_mode(tmp_path):
    """`tenet serve --workers N`: gauges computed at scrape time must not be kept in the processes' shared files,
    where the next scrape would read them back (with a pid label, frozen) beside the fresh ones."""
    script = ("from tenet.observability import render_metrics\n"
              "for up in (0.0, 1.0):\n"
              "    text = render_metrics({'tenet_database_up': ('help', [({}, up)])}).decode()\n"
              "print(text)\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                            check=True).stdout
    assert second.count("# TYPE tenet_database_up gauge") == 1, second
    assert [line for line in second.splitlines() if line.startswith("tenet_database_up")] == ["tenet_database_up 1.0"]


def test_the_command_line_does_not_import_the_metrics_library_before_serve_chooses_its_directory():
    """prometheus_client reads PROMETHEUS_MULTIPROC_DIR once, at its import: `tenet serve --workers N` sets it first,
    so anything `tenet.cli` imports on its own must not import the library (the embedded database's restarts,
    counted by serve itself, were lost from /metrics when a kernel module imported it early)."""
    probe = "import sys, tenet.cli; print('prometheus_client' in sys.modules)"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert imported.stdout.strip() == "False", imported.stderr
