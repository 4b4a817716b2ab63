"""`tenet demo` adds a hotel, an ingest client and batches whose tasks sit in each state, and is safe to run
again."""

from __future__ import annotations

import psycopg

from tests.support.cli import demo_loaded_twice, run_cli


def test_the_demo_shows_every_state_once_and_keeps_every_rule(migrated_database, tmp_path):
    url, first, second = demo_loaded_twice(migrated_database, tmp_path, "rsv_demo")
    assert any(line.startswith("created hotel DEMO-HOTEL") and "assigned" in line for line in first)
    assert any("replayed" in line for line in first)
    assert "kept hotel DEMO-HOTEL" in second
    with psycopg.connect(url) as connection:
        statuses = dict(connection.execute(
            "SELECT task_status, count(*) FROM reservation.workflow_reservation_task GROUP BY task_status").fetchall())
        orders = dict(connection.execute(
            "SELECT order_status, count(*) FROM reservation.workflow_reservation_order GROUP BY order_status"
        ).fetchall())
        backfilled = connection.execute(
            "SELECT order_business_key FROM reservation.workflow_reservation_order "
            "WHERE business_key_backfilled_at IS NOT NULL").fetchall()
        drafts = connection.execute("SELECT count(*) FROM reservation.workflow_reservation_task_card "
                                    "WHERE draft_payload_json IS NOT NULL").fetchone()
        errors = connection.execute("SELECT count(*) FROM reservation.workflow_reservation_ai_transition "
                                    "WHERE adapter_error_code IS NOT NULL").fetchone()
        failed_attempts = connection.execute(
            "SELECT count(*) FROM reservation.workflow_reservation_opera_operation_attempt "
            "WHERE attempt_status = 'FAILED'").fetchone()
    assert set(statuses) == {"PENDING_CONFIRM", "READY", "EXECUTING", "COMPLETED", "FAILED"}
    assert orders.get("ACTIVE", 0) >= 3 and orders.get("TEMPORARY", 0) >= 1
    assert len(backfilled) == 1 and backfilled[0][0].startswith("SIM")
    assert drafts == (1,) and errors == (1,) and failed_attempts == (2,)
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 0, result.stdout + result.stderr
