"""`tenet serve` started the embedded PostgreSQL, so it brings it back when it dies: the postmaster killed
outright (SIGKILL, as the OOM killer does), the service answers again without an operator."""

from __future__ import annotations

import os
import re
import signal
import time

import httpx
import pytest

from tests.support.live import METRICS_AUTHORIZATION, LiveServer, service_env

pytestmark = pytest.mark.live_server


def wait_until(predicate, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(message)
        time.sleep(0.2)


def ready(server: LiveServer) -> bool:
    try:
        return httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_restarts_the_embedded_postgres_it_started_after_it_is_killed(embedded, tmp_path):
    # Two API processes: the watchdog lives in the parent that started the server, not in them.
    server = LiveServer(env=service_env(TENET_DATA_DIR=str(embedded.data_dir)), log_path=tmp_path / "serve.log",
                        workers=2).start()
    try:
        server.wait_ready(timeout=120)
        email, password = re.search(r"First administrator created: (\S+) / password (\S+)", server.output).groups()
        tokens = httpx.post(f"{server.url}/api/v1/auth/token",
                            data={"grant_type": "password", "username": email, "password": password}).json()
        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        killed = embedded.running_pid()

        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: embedded.pid() not in (None, killed), 90,
                   f"the embedded PostgreSQL was not restarted:\n{server.output[-3000:]}")
        restarted = embedded.running_pid()
        wait_until(lambda: ready(server), 60, f"not ready again after the restart:\n{server.output[-3000:]}")

        # Every API process serves again: six requests in a row answered, whichever process answers each. A
        # process whose own probe saw the server still starting up refuses for up to one probe interval
        # after another process is ready again (kernel.availability), so the run of six may take a moment.
        answers: list[int] = []

        def six_in_a_row() -> bool:
            answers.append(httpx.get(f"{server.url}/api/v1/auth/me", headers=headers).status_code)
            return answers[-6:] == [200] * 6

        wait_until(six_in_a_row, 30, f"not every process serves again:\n{server.output[-3000:]}")
        assert f"restarted the embedded PostgreSQL (pid {restarted})" in server.output
        metrics = httpx.get(f"{server.url}/metrics", headers=METRICS_AUTHORIZATION).text
        assert re.search(r"^tenet_embedded_database_restarts_total 1\.0$", metrics, re.MULTILINE), metrics

        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(40) == 0, server.output[-3000:]
        wait_until(lambda: embedded.is_stopped(restarted), 30, "the restarted PostgreSQL outlived tenet serve")
    finally:
        server.stop()
