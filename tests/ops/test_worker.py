"""`tenet worker`: procrastinate workers on the service's own database, as a real process."""

from __future__ import annotations

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
        messages = smtp_server.wait_for(1, timeout=30)
        assert [m["Subject"] for m in messages] == ["From the worker"], worker.output
    finally:
        worker.stop()
    with psycopg.connect(live_database_url) as connection:
        status = connection.execute("SELECT status FROM kernel.email_outbox WHERE id = %s", (mail_id,)).fetchone()
        job = connection.execute(
            "SELECT status::text FROM procrastinate_jobs WHERE task_name = 'kernel:deliver_outbox' "
            "ORDER BY id DESC LIMIT 1").fetchone()
    assert status == ("sent",) and job == ("succeeded",)
    assert "worker started" in worker.output
