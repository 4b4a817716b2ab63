"""`tenet demo` adds meetings, a series, check-ins and a guest, keeping every rule, and is safe to run again."""

from __future__ import annotations

import psycopg

from tests.support.cli import demo_loaded_twice, run_cli


def test_demo_meetings_are_created_once_and_keep_every_rule(migrated_database, tmp_path):
    url, first, second = demo_loaded_twice(migrated_database, tmp_path, "ma_demo")
    assert any(line.startswith("created meetings 'Demo: all-hands'") for line in first)
    assert "kept meeting demo data ('Demo: all-hands')" in second
    with psycopg.connect(url) as connection:
        meetings = connection.execute("SELECT count(*) FROM meeting_attendance.meetings").fetchone()[0]
        statuses = dict(connection.execute(
            "SELECT status, count(*) FROM meeting_attendance.attendances GROUP BY status").fetchall())
        guests = connection.execute("SELECT count(*) FROM meeting_attendance.guests").fetchone()[0]
        agenda = connection.execute(
            "SELECT (SELECT count(*) FROM meeting_attendance.meeting_agenda_sections), "
            "(SELECT count(*) FROM meeting_attendance.meeting_agenda_items), "
            "(SELECT count(*) FROM meeting_attendance.meeting_agenda_item_upload_tasks)").fetchone()
    assert meetings == 8 and guests == 1 and tuple(agenda) == (2, 3, 1)
    assert statuses["EXCUSED"] == 1 and statuses.get("PRESENT", 0) + statuses.get("LATE", 0) >= 4
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 0, result.stdout + result.stderr
