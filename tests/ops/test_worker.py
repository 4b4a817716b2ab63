"""`tenet worker`: procrastinate workers on the service's own database, as a real process."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from tenet.worker import build_job_app
from tests.support.live import LiveProcess, service_env

pytestmark = pytest.mark.live_server


async def test_the_worker_delivers_outbox_mail_over_smtp(live_database_url, smtp_server, tmp_path):
    mail_id = uuid.uuid4()
    with psycopg.connect(live_database_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO kernel.email_outbox (id, kind, to_address, subject, body_text, status, attempts, created_at,"
            " next_attempt_at) VALUES (%s, 'test.worker', 'w@example.com', 'From the worker', 'Hi', 'pending', 0,"
            " %s, %s)", (mail_id, datetime.now(UTC), datetime.now(UTC)))
    worker = LiveProcess(["worker", "--concurrency", "2"], log_path=tmp_path / "worker.log", env=service_env(
        DATABASE_URL=live_database_url, TENET_SMTP_HOST="127.0.0.1", TENET_SMTP_PORT=str(smtp_server.port),
        TENET_DATA_DIR=str(tmp_path))).start()
    try:
        job_app = build_job_app(live_database_url)
        async with job_app.open_async():
            # The periodic schedule runs it every minute; defer it now rather than wait.
            await job_app.configure_task("kernel:deliver_outbox").defer_async(timestamp=int(time.time()))
        # The live database is shared with the other live-server tests, whose mail (invitations, password resets)
        # may be pending too: the worker sends it all; this test's mail must be among what arrived.
        deadline = time.monotonic() + 30
        subjects: list[str] = []
        while "From the worker" not in subjects and time.monotonic() < deadline:
            subjects = [m["Subject"] for m in smtp_server.wait_for(len(subjects) + 1, timeout=1)]
        assert "From the worker" in subjects, worker.output
    finally:
        worker.stop()
    with psycopg.connect(live_database_url) as connection:
        status = connection.execute("SELECT status FROM kernel.email_outbox WHERE id = %s", (mail_id,)).fetchone()
        job = connection.execute(
            "SELECT status::text FROM procrastinate_jobs WHERE task_name = 'kernel:deliver_outbox' "
            "ORDER BY id DESC LIMIT 1").fetchone()
    assert status == ("sent",) and job == ("succeeded",)
    assert "worker started" in worker.output


async def test_the_worker_outlives_a_database_restart(private_postgres, tmp_path):
    """procrastinate stops its worker when the database goes away; `tenet worker` starts it again when the
    database is back, so jobs deferred after the restart run without an operator restarting the worker."""
    from tenet.db.embedded import restart_embedded_server

    worker = LiveProcess(["worker", "--concurrency", "1"], log_path=tmp_path / "worker.log", env=service_env(
        DATABASE_URL=private_postgres.url, TENET_DATA_DIR=str(tmp_path))).start()
    try:
        wait_for_output(worker, "Starting worker on all queues")  # procrastinate's worker runs
        private_postgres.stop_fast()
        restart_embedded_server(private_postgres.pgdata)
        # procrastinate's worker gave up on the lost database (its listener's connection died); ours goes on.
        wait_for_output(worker, "starting it again")

        job_app = build_job_app(private_postgres.url)
        async with job_app.open_async():
            # Its own queueing lock: the worker's periodic deferrer may have queued this minute's delivery under
            # the task's lock ("periodic:deliver_outbox") already, and a second job under it is refused.
            delivery = job_app.configure_task("kernel:deliver_outbox", queueing_lock="test:after-restart")
            job_id = await delivery.defer_async(timestamp=int(time.time()))
        with psycopg.connect(private_postgres.url, autocommit=True) as connection:
            deadline = time.monotonic() + 90
            while (status := connection.execute("SELECT status::text FROM procrastinate_jobs WHERE id = %s",
                                                (job_id,)).fetchone()[0]) != "succeeded":
                assert worker.process.poll() is None, f"the worker exited:\n{worker.output[-3000:]}"
                assert time.monotonic() < deadline, f"job {status} after 90 s:\n{worker.output[-3000:]}"
                await asyncio.sleep(0.2)
    finally:
        code = worker.stop()
    assert code == 0, worker.output[-3000:]


def wait_for_output(process: LiveProcess, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.output:
        assert process.process.poll() is None or text in process.output, \
            f"exited before {text!r}:\n{process.output[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{process.output[-3000:]}"
        time.sleep(0.1)
