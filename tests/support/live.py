"""The service as a real subprocess (`python -m tenet ...`) on a free port, for tests that need real HTTP,
real processes and real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import TEST_SECRET

FAST_TEST_ENV = {
    "TENET_SECRET_KEY": TEST_SECRET,
    "TENET_PASSWORD_HASH_TIME_COST": "1",
    "TENET_PASSWORD_HASH_MEMORY_KIB": "1024",
    "TENET_REGISTRATION_LIMIT": "100000/hour",
    "TENET_LOGIN_FAILURE_LIMIT": "100000/15min",
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

    def wait_ready(self, timeout: float = 60.0) -> LiveServer:
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
