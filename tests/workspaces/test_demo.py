"""`tenet demo` loads a workspace with members and a pending invitation, and is safe to run again."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psycopg

from tenet.db import migrate
from tenet.demo import load_demo
from tests.conftest import test_settings


def test_demo_workspace_is_created_once_and_keeps_every_rule(scratch_database, tmp_path):
    url = scratch_database("ws_demo")
    migrate.upgrade(url)  # alembic runs its own event loop: this test is synchronous
    settings = test_settings(data_dir=tmp_path)
    first = asyncio.run(load_demo(settings, url))
    second = asyncio.run(load_demo(settings, url))
    assert any(line.startswith("created workspace 'Demo workspace'") for line in first)
    assert "kept workspace 'Demo workspace'" in second
    with psycopg.connect(url) as connection:
        roles = connection.execute(
            "SELECT role, count(*) FROM workspace.membership WHERE status = 'ACTIVE' GROUP BY role ORDER BY role"
        ).fetchall()
        invitations = connection.execute(
            "SELECT status, count(*) FROM workspace.invitation GROUP BY status ORDER BY status").fetchall()
    assert roles == [("admin", 1), ("member", 1), ("owner", 1)]
    assert invitations == [("ACCEPTED", 2), ("PENDING", 1)]
    result = subprocess.run([sys.executable, "-m", "tenet", "invariants", "check", "--database-url", url],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
