"""The README's quick start as a new user meets it: `tenet serve` on a fresh machine (no DATABASE_URL)
starts the embedded PostgreSQL, migrates it, creates the first administrator and serves /docs."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.live import LiveServer, service_env

pytestmark = pytest.mark.live_server


def test_first_start_on_the_embedded_database_prints_how_to_sign_in(embedded, tmp_path):
    data_dir = embedded.data_dir
    env = service_env(TENET_DATA_DIR=str(data_dir))
    env.pop("TENET_SECRET_KEY")  # a fresh machine has none: a development key is generated
    server = LiveServer(env=env, log_path=tmp_path / "first.log").start()
    try:
        server.wait_ready(timeout=120)
        banner = re.search(r"First administrator created: (\S+) / password (\S+)", server.output)
        assert banner, server.output
        email, password = banner.groups()
        assert f"{server.url}/docs" in server.output
        assert httpx.get(f"{server.url}/docs").status_code == 200
        tokens = httpx.post(f"{server.url}/api/v1/auth/token",
                            data={"grant_type": "password", "username": email, "password": password})
        assert tokens.status_code == 200, tokens.text
        me = httpx.get(f"{server.url}/api/v1/auth/me",
                       headers={"Authorization": f"Bearer {tokens.json()['access_token']}"}).json()
        assert "Administrator" in me["roles"]
    finally:
        server.stop()
    assert (data_dir / "pgdata" / "PG_VERSION").exists() and (data_dir / "secret_key").exists()

    # A second start keeps the data and does not create another administrator.
    again = LiveServer(env=env, log_path=tmp_path / "second.log").start()
    try:
        again.wait_ready(timeout=120)
        assert "First administrator created" not in again.output
        assert "tenet users create-admin" in again.output
        tokens = httpx.post(f"{again.url}/api/v1/auth/token",
                            data={"grant_type": "password", "username": email, "password": password})
        assert tokens.status_code == 200
    finally:
        again.stop()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) +[\w.]+: \S")


def _serve_on_a_terminal(env: dict[str, str], port: int, *, until: str, timeout: float = 120) -> str:
    """`tenet serve` with a pseudo-terminal as its stdout and stderr, as `make run` meets a person: what it
    printed (colours removed) once `until` has appeared, and one second more."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tenet", "serve", "--host", "127.0.0.1", "--port", str(port)],
                               env=env, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    seen, deadline, found_at = b"", time.monotonic() + timeout, None
    try:
        while time.monotonic() < (found_at + 1 if found_at else deadline):
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(controller, 65536)
                except OSError:
                    break
            if found_at is None and until.encode() in ANSI.sub("", seen.decode(errors="replace")).encode():
                found_at = time.monotonic()
    finally:
        process.terminate()
        process.wait(20)
        os.close(controller)
    text = ANSI.sub("", seen.decode(errors="replace")).replace("\r\n", "\n")
    assert until in text, text
    return text


def test_on_a_terminal_the_log_is_one_readable_line_a_record_and_the_greeting_comes_last(embedded):
    from alembic.script import ScriptDirectory

    from tenet.db.migrate import alembic_config
    from tests.support.live import free_port, service_env

    port = free_port()
    text = _serve_on_a_terminal(service_env(TENET_DATA_DIR=str(embedded.data_dir)), port,
                                until="This password is shown once")
    lines = [line for line in text.splitlines() if line.strip()]
    greeting = next(i for i, line in enumerate(lines) if line.startswith("─") and "Tenet" in line)
    log, banner = lines[:greeting], lines[greeting:]
    assert log and all(LOG_LINE.match(line) for line in log), log  # no JSON, no record over several lines
    # Every migration is one line: its revision and the first words of its title.
    for revision in ScriptDirectory.from_config(alembic_config()).walk_revisions():
        title = " ".join((revision.doc or "").split())[:30]
        assert sum(f"upgrade to {revision.revision}: {title}" in line for line in log) == 1, (revision.revision, log)
    # The greeting is last: the address, the account and its password, and nothing logged after it.
    assert f"http://127.0.0.1:{port}/docs" in banner[1]
    assert re.search(r"First administrator created: \S+@\S+ / password \S{12,}", "\n".join(banner)), banner
    assert banner[-1].startswith("─") and not any(LOG_LINE.match(line) for line in banner), banner
