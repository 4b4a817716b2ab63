"""`tenet demo` adds social data once, and every rule holds on it."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psycopg
from tests.conftest import test_settings

from tenet.db import migrate
from tenet.demo import load_demo


def test_social_demo_is_created_once_and_keeps_every_rule(scratch_database, tmp_path):
    url = scratch_database("social_demo")
    migrate.upgrade(url)
    settings = test_settings(data_dir=tmp_path)
    first = asyncio.run(load_demo(settings, url))
    second = asyncio.run(load_demo(settings, url))
    assert any(line.startswith("created social group 'Demo team'") for line in first)
    assert "kept social group 'Demo team'" in second
    with psycopg.connect(url) as connection:
        pending = connection.execute(
            "SELECT message_type, count(*) FROM social.inbox_messages WHERE status = 'pending' "
            "GROUP BY message_type ORDER BY message_type").fetchall()
    assert ("friend_request", 2) in pending and ("schedule_item_shared", 3) in pending
    result = subprocess.run([sys.executable, "-m", "tenet", "invariants", "check", "--database-url", url],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
