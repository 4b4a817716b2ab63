"""The service as a real subprocess (`python -m tenet ...`) on a free port, for tests that need real HTTP,
real processes and real signals."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import TEST_SECRET

# Every live server serves /metrics to a scraper holding this token (TENET_METRICS_TOKEN).
LIVE_METRICS_TOKEN = "live-metrics-token-0123456789abcdef"
METRICS_AUTHORIZATION = {"Authorization": f"Bearer {LIVE_METRICS_TOKEN}"}

FAST_TEST_ENV = {
    "TENET_SECRET_KEY": TEST_SECRET,
    "TENET_METRICS_TOKEN": LIVE_METRICS_TOKEN,
    "TENET_PASSWORD_HASH_TIME_COST": "1",
    "TENET_PASSWORD_HASH_MEMORY_KIB": "1024",
    "TENET_REGISTRATION_LIMIT": "100000/hour",
    "TENET_LOGIN_FAILURE_LIMIT": "100000/15min",
    "TENET_PASSWORD_RESET_LIMIT": "100000/hour",  # the identity fuzz asks many from one address
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LiveProcess:
    """`python -m tenet <args>` with its output in a log file."""

    def __init__(self, args: list[str], *, env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> LiveProcess:
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "tenet", *self.args], env=self.env,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        return self

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


class LiveServer(LiveProcess):
    def __init__(self, *, env: dict[str, str], log_path: Path, workers: int = 1, extra_args: list[str] = ()) -> None:
        self.port = free_port()
        super().__init__(["serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers),
                          *extra_args], env=env, log_path=log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 150.0) -> LiveServer:
        # Generous: a cold start imports the whole app (about 3 s on a quiet machine), but on a loaded 2-core
        # runner it has taken over 60 s; a server that exits is reported at once anyway.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.output}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.output}")


def service_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENET_") and k != "DATABASE_URL"}
    return {**env, **FAST_TEST_ENV, **extra}


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class EmbeddedPostgres:
    """A fresh TENET_DATA_DIR for the embedded server, and a watch on the server under it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = data_dir / "pgdata"
        self.seen: set[int] = set()
        self.url: str | None = None  # set by the fixture that starts it in-process (private_postgres)

    def pid(self) -> int | None:
        """The postmaster's pid from postmaster.pid (None when the file is gone)."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None
        self.seen.add(pid)
        return pid

    def running_pid(self) -> int:
        pid = self.pid()
        assert pid is not None and process_alive(pid), f"no embedded PostgreSQL running under {self.pgdata}"
        return pid

    def is_stopped(self, pid: int) -> bool:
        return not process_alive(pid) and not (self.pgdata / "postmaster.pid").exists()

    def stop_fast(self, timeout: float = 30.0) -> None:
        """PostgreSQL's fast shutdown (SIGINT to the postmaster): every connection is closed and the socket
        removed, as when an operator stops the server."""
        pid = self.running_pid()
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while not self.is_stopped(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the PostgreSQL under {self.pgdata} did not stop within {timeout}s")
            time.sleep(0.05)

    def kill_leftovers(self) -> None:
        self.pid()
        for pid in self.seen:
            if process_alive(pid):
                os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
                deadline = time.monotonic() + 10
                while process_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if process_alive(pid):
                    os.kill(pid, signal.SIGKILL)


@contextmanager
def fresh_embedded_data_dir() -> Iterator[EmbeddedPostgres]:
    """A new data dir outside pytest's tmp tree (pytest resets /tmp/pytest-of-<user> to 0700 whenever a
    session or xdist worker starts, and the embedded server runs as another user when we are root, so it
    could not reach a data dir in there); whatever server is left under it is stopped at the end."""
    embedded = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="tenet-test-data-")) / "data")
    try:
        yield embedded
    finally:
        embedded.kill_leftovers()
        shutil.rmtree(embedded.data_dir.parent, ignore_errors=True)
