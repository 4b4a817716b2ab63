"""The imported meetings' QR codes lead to the check-in page and work; Tenet-side rows keep an imported meeting
the newer file dropped; the `tenet meetings` commands end to end on a database of their own (dry run writes
nothing, the import's report and invariants check, regenerate-qr, legacy-sample)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from tenet.meetings.legacy.qr import live_meeting_ids, store_codes_of
from tenet.meetings.legacy.sample import generate
from tests.meetings.legacy.test_import import run
from tests.support.cli import run_cli
from tests.support.invariants import rules_hold

BASE = "http://127.0.0.1:8000"


async def _future_meeting(db) -> tuple[str, object]:
    async with db.read_only() as session:
        row = (await session.execute(text(
            "SELECT id, start_time FROM meeting_attendance.meetings WHERE status = 'ACTIVE' AND start_time > :now "
            "AND series_id IS NULL ORDER BY start_time LIMIT 1"), {"now": "2026-01-05T09:00:00+00:00"})).one()
    return row.id, row.start_time


async def _payloads(db, meeting_id: str) -> dict[str, str]:
    async with db.read_only() as session:
        rows = (await session.execute(text("SELECT mode, payload FROM meeting_attendance.meeting_qr_codes "
                                           "WHERE meeting_id = :id"), {"id": meeting_id})).all()
    return dict(rows)


@pytest.mark.invariant("MA-INV-15")
async def test_the_codes_of_an_imported_meeting_lead_to_its_check_in_page_and_work(db, ma, client, settings, clock,
                                                                                   tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, around=clock.now())
    await run(db, sample.path, settings, clock)
    meeting_id, start = await _future_meeting(db)
    payloads = await _payloads(db, meeting_id)
    assert payloads == {mode: f"{BASE}/meetingattendance/check-in/{meeting_id}?mode={mode}"
                        for mode in ("online", "offline")}
    page = await client.get(payloads["offline"].removeprefix(BASE))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")  # its script asks the API
    clock.set(start)
    checked_in = await ma.guest_check_in(meeting_id, name="Grace Guest")
    assert checked_in.status_code == 201, checked_in.text
    # A new public address: regenerate rewrites both codes of every live meeting.
    count = await store_codes_of(db, await live_meeting_ids(db), base_url="https://attendance.example.com",
                                 now=clock.now())
    assert count == len(await live_meeting_ids(db))
    assert (await _payloads(db, meeting_id))["online"] == (
        f"https://attendance.example.com/meetingattendance/check-in/{meeting_id}?mode=online")
    await rules_hold(db, now=clock.now())


async def test_a_meeting_the_newer_file_drops_is_kept_while_tenet_rows_refer_to_it(db, ma, settings, clock, tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, around=clock.now())
    await run(db, sample.path, settings, clock)
    meeting_id, start = await _future_meeting(db)
    clock.set(start)
    assert (await ma.guest_check_in(meeting_id)).status_code == 201  # a check-in made in Tenet
    with sqlite3.connect(sample.path) as legacy:
        legacy.execute("DELETE FROM meeting_required_attendees WHERE meetingId = ?", (meeting_id,))
        legacy.execute("DELETE FROM meetings WHERE id = ?", (meeting_id,))
    report = await run(db, sample.path, settings, clock)
    assert report["meeting_required_attendees"].removed > 0
    assert [key for key, _ in report["meetings"].conflicts] == [meeting_id]
    assert "gone from the file but kept" in report["meetings"].conflicts[0][1]
    assert meeting_id in await live_meeting_ids(db)
    await rules_hold(db, now=clock.now())


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as connection:
        return connection.execute(f"SELECT count(*) FROM meeting_attendance.{table}").fetchone()[0]


@pytest.fixture
def cli_database(migrated_database) -> str:
    url = migrated_database("legacy_cli")
    return url


def test_the_commands_end_to_end(cli_database: str, tmp_path: Path):
    path = tmp_path / "dev.db"
    made = run_cli("meetings", "legacy-sample", str(path), "--dirty", "--size", "14")
    assert made.returncode == 0 and path.is_file(), made.stderr
    assert "the import must refuse" in made.stdout

    plan = run_cli("meetings", "import-sqlite", str(path), "--dry-run", "--database-url", cli_database)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "Plan (dry run: nothing was written)" in plan.stdout and "refused" in plan.stdout
    assert "invariants check: clean" in plan.stdout
    assert (_count(cli_database, "meetings"), _count(cli_database, "legacy_import_rows")) == (0, 0)

    done = run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Import report" in done.stdout and "invariants check: clean" in done.stdout
    assert "meetings" in done.stderr  # the progress bars
    meetings = _count(cli_database, "meetings")
    assert meetings > 0 and _count(cli_database, "meeting_qr_codes") == 2 * meetings
    assert _count(cli_database, "legacy_import_runs") == 1

    again = run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database)
    assert again.returncode == 0 and _count(cli_database, "meetings") == meetings
    lines = [line.split() for line in again.stdout.splitlines() if line.startswith("meetings ")]
    read, inserted, updated, unchanged, removed, skipped, refused, _ = map(int, lines[0][1:9])
    assert (inserted, updated, removed) == (0, 0, 0) and unchanged + refused + skipped == read

    regenerated = run_cli("meetings", "regenerate-qr", "--all", "--database-url", cli_database)
    assert regenerated.returncode == 0 and f"of {meetings} meeting(s)" in regenerated.stdout, regenerated.stderr
    with psycopg.connect(cli_database) as connection:
        one = connection.execute("SELECT id FROM meeting_attendance.meetings WHERE status <> 'DELETED' LIMIT 1"
                                 ).fetchone()[0]
    single = run_cli("meetings", "regenerate-qr", "--meeting", one, "--database-url", cli_database)
    assert single.returncode == 0 and "of 1 meeting(s)" in single.stdout
    for wrong in (["--meeting", "nosuchmeeting0000"], ["--all", "--meeting", one], []):
        refused = run_cli("meetings", "regenerate-qr", *wrong, "--database-url", cli_database)
        assert refused.returncode == 2, (wrong, refused.stdout, refused.stderr)
    not_legacy = tmp_path / "notes.txt"
    not_legacy.write_text("hello")
    bad = run_cli("meetings", "import-sqlite", str(not_legacy), "--database-url", cli_database)
    assert bad.returncode == 2 and "not a SQLite database" in bad.stderr


def test_the_dry_run_writes_nothing_even_of_a_rerun(cli_database: str, tmp_path: Path):
    path = tmp_path / "dev.db"
    assert run_cli("meetings", "legacy-sample", str(path), "--size", "8").returncode == 0
    assert run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database).returncode == 0
    assert run_cli("meetings", "legacy-sample", str(path), "--newer").returncode == 0
    before = [_count(cli_database, t) for t in ("meetings", "attendances", "legacy_import_rows", "audit_logs")]
    plan = run_cli("meetings", "import-sqlite", str(path), "--dry-run", "--database-url", cli_database)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert [_count(cli_database, t) for t in ("meetings", "attendances", "legacy_import_rows", "audit_logs")] == before
    rows = {line.split()[0]: line.split()[1:] for line in plan.stdout.splitlines()[2:10]}
    assert int(rows["meetings"][1]) + int(rows["meetings"][2]) > 0  # the plan shows what the newer file changes




def test_one_import_at_a_time_and_never_into_rows_that_break_rules(cli_database: str, tmp_path: Path):
    path = tmp_path / "dev.db"
    assert run_cli("meetings", "legacy-sample", str(path), "--size", "6").returncode == 0
    with psycopg.connect(cli_database) as holder:  # another run, holding the import's lock on its own connection
        holder.execute("SELECT pg_advisory_xact_lock(19778, 1)")
        busy = run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database)
        assert busy.returncode == 1 and "another import-sqlite is running" in busy.stderr, busy.stderr
    assert _count(cli_database, "meetings") == 0
    with psycopg.connect(cli_database, autocommit=True) as admin:
        admin.execute("ALTER TABLE meeting_attendance.audit_logs DISABLE TRIGGER audit_logs_append_only")
        try:
            broken = run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database)
        finally:
            admin.execute("ALTER TABLE meeting_attendance.audit_logs ENABLE TRIGGER audit_logs_append_only")
    assert broken.returncode == 1 and "already breaks rules" in broken.stderr and "MA-INV-20" in broken.stderr
    assert _count(cli_database, "meetings") == 0
    assert run_cli("meetings", "import-sqlite", str(path), "--database-url", cli_database).returncode == 0
    assert _count(cli_database, "meetings") > 0
