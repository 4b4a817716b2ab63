"""`tenet demo` loads a workspace with members and a pending invitation, and is safe to run again."""

from __future__ import annotations

import psycopg

from tests.support.cli import demo_loaded_twice, run_cli


def test_demo_workspace_is_created_once_and_keeps_every_rule(migrated_database, tmp_path):
    url, first, second = demo_loaded_twice(migrated_database, tmp_path, "ws_demo")
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
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 0, result.stdout + result.stderr
