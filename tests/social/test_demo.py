"""`tenet demo` adds social data once, and every rule holds on it."""

from __future__ import annotations

import psycopg
from tests.support.cli import demo_loaded_twice, run_cli


def test_social_demo_is_created_once_and_keeps_every_rule(migrated_database, tmp_path):
    url, first, second = demo_loaded_twice(migrated_database, tmp_path, "social_demo")
    assert any(line.startswith("created social group 'Demo team'") for line in first)
    assert "kept social group 'Demo team'" in second
    with psycopg.connect(url) as connection:
        pending = connection.execute(
            "SELECT message_type, count(*) FROM social.inbox_messages WHERE status = 'pending' "
            "GROUP BY message_type ORDER BY message_type").fetchall()
    assert ("friend_request", 2) in pending and ("schedule_item_shared", 3) in pending
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 0, result.stdout + result.stderr
