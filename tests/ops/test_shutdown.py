"""Stopping on the embedded database: SIGTERM/SIGINT to `tenet serve` (and `tenet worker`) finish what is
in flight, then stop the embedded PostgreSQL they started, and exit 0. The last process holding the
server stops it; the others leave it running."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import EmbeddedPostgres, LiveProcess, LiveServer, process_alive, service_env

pytestmark = pytest.mark.live_server


def embedded_env(data_dir: Path) -> dict[str, str]:
    return service_env(TENET_DATA_DIR=str(data_dir))


def wait_stopped(postgres: EmbeddedPostgres, pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not postgres.is_stopped(pid):
        if time.monotonic() > deadline:
            pytest.fail(f"the embedded PostgreSQL (pid {pid}) is still running {timeout}s after the stop")
        time.sleep(0.1)


def stop_with(process: LiveProcess, sig: signal.Signals, timeout: float = 40.0) -> int:
    assert process.process is not None
    process.process.send_signal(sig)
    try:
        return process.process.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {timeout}s after {sig.name}:\n{process.output[-3000:]}")


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_stops_the_embedded_postgres_and_exits_0(embedded, tmp_path, workers):
    postgres = embedded
    server = LiveServer(env=embedded_env(postgres.data_dir), log_path=tmp_path / "serve.log", workers=workers).start()
    try:
        server.wait_ready(timeout=120)
        pid = postgres.running_pid()
        code = stop_with(server, signal.SIGTERM)
        assert code == 0, server.output[-3000:]
        wait_stopped(postgres, pid)
    finally:
        server.stop()
    assert "Finished server process" in server.output


def test_the_last_process_holding_the_server_stops_it(embedded, tmp_path):
    """`tenet serve` and `tenet worker` share one embedded server: stopping the first leaves it running for
    the other; stopping the last one stops it. A holder killed outright (SIGKILL: no exit hooks) does
    not keep it alive for ever."""
    postgres = embedded
    env = embedded_env(postgres.data_dir)
    killed = LiveServer(env=env, log_path=tmp_path / "killed.log").start()
    try:
        killed.wait_ready(timeout=120)
        pid = postgres.running_pid()
    finally:
        killed.process.kill()
        killed.stop()
    assert process_alive(pid)  # left behind, with the dead process still listed as a holder

    server = LiveServer(env=env, log_path=tmp_path / "serve.log").start()
    worker = LiveProcess(["worker", "--concurrency", "1"], env=env, log_path=tmp_path / "worker.log")
    try:
        server.wait_ready(timeout=60)
        assert postgres.running_pid() == pid  # joined the running server
        worker.start()
        deadline = time.monotonic() + 60
        while "worker started" not in worker.output:
            assert worker.process.poll() is None and time.monotonic() < deadline, worker.output[-3000:]
            time.sleep(0.1)

        assert stop_with(server, signal.SIGINT) == 0, server.output[-3000:]
        assert process_alive(pid) and postgres.pid() == pid, "stopped while the worker still used it"

        assert stop_with(worker, signal.SIGTERM) == 0, worker.output[-3000:]
        wait_stopped(postgres, pid)
    finally:
        server.stop()
        if worker.process is not None:
            worker.stop()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{server.url}/healthz", timeout=1)
