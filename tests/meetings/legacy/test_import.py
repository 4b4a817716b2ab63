"""The legacy SQLite import (issue 20) on generated files: clean, dirty, rerun, newer file, conflicts; the
invariants hold after every run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.kernel.clock import FrozenClock
from tenet.meetings.legacy.importer import import_file
from tenet.meetings.legacy.sample import evolve, generate
from tests.conftest import test_settings
from tests.support.invariants import rules_hold


def _legacy(column: str) -> str:
    """A meeting id as the file names it (a generated id differs between two fresh imports)."""
    return (f"coalesce((SELECT l.legacy_key FROM meeting_attendance.legacy_import_rows l WHERE l.source_table = "
            f"'meetings' AND l.target_key = {column}), {column})")


SNAPSHOT = {
    "users": "SELECT u.email_normalized, u.display_name, array_agg(r.role_name ORDER BY r.role_name)::text "
             "FROM iam.user_account u JOIN iam.user_role r ON r.user_id = u.id GROUP BY u.id ORDER BY 1",
    "meetings": f"SELECT {_legacy('m.id')} AS id, title, start_time, end_time, timezone, status, "
                "series_id IS NOT NULL, organizer_id FROM meeting_attendance.meetings m ORDER BY 1",
    "series": "SELECT title, rrule, start_date, status FROM meeting_attendance.meeting_series ORDER BY title",
    "required": f"SELECT {_legacy('a.meeting_id')}, u.email_normalized "
                "FROM meeting_attendance.meeting_required_attendees a "
                "JOIN iam.user_account u ON u.id = a.user_id ORDER BY 1, 2",
    "attendances": f"SELECT {_legacy('a.meeting_id')}, coalesce(u.email_normalized, g.name, 'erased'), a.status, "
                   "a.checked_in_at, a.mode FROM meeting_attendance.attendances a "
                   "LEFT JOIN iam.user_account u ON u.id = a.user_id "
                   "LEFT JOIN meeting_attendance.guests g ON g.id = a.guest_id ORDER BY 1, 2, 3",
    "templates": "SELECT label, title, status FROM meeting_attendance.templates ORDER BY 1",
    "template_attendees": "SELECT t.label, u.email_normalized FROM meeting_attendance.template_attendees a "
                          "JOIN meeting_attendance.templates t ON t.id = a.template_id "
                          "JOIN iam.user_account u ON u.id = a.user_id ORDER BY 1, 2",
    "audit": "SELECT changes->'legacy'->>'id', action FROM meeting_attendance.audit_logs "
             "WHERE changes ? 'legacy' ORDER BY 1",
    "qr": f"SELECT {_legacy('meeting_id')}, mode, substring(payload from '\\?mode=.*$') "
          "FROM meeting_attendance.meeting_qr_codes ORDER BY 1, 2",
}


async def snapshot(db: Database) -> dict[str, list[tuple]]:
    async with db.read_only() as session:
        return {name: [tuple(r) for r in (await session.execute(text(sql))).all()] for name, sql in SNAPSHOT.items()}


GUEST_CHECK = "meeting_attendance.guests_have_attendance"


async def as_committed(db: Database) -> None:
    """Run the deferred checks now, as each batch's commit would: the test's units of work are savepoints of one
    transaction, where a guest inserted by one run and removed by the next would be checked only at the end."""
    async with db.unit_of_work() as session:
        await session.execute(text(f"SET CONSTRAINTS {GUEST_CHECK} IMMEDIATE"))
        await session.execute(text(f"SET CONSTRAINTS {GUEST_CHECK} DEFERRED"))


async def run(db: Database, path: Path, settings, clock: FrozenClock, **options):
    report = await import_file(db, path, settings=settings, now=clock.now(), **options)
    await as_committed(db)
    return report


def changed(report) -> dict[str, tuple[int, int, int]]:
    return {name: (t.inserted, t.updated, t.removed) for name, t in report.tables.items()
            if t.inserted or t.updated or t.removed}


async def test_a_clean_file_imports_whole_with_codes_and_the_invariants_hold(db, settings, clock, tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, around=clock.now())
    report = await run(db, sample.path, settings, clock)
    for name, table in report.tables.items():
        assert table.refused == [], (name, table.refused)
        assert table.conflicts == [], (name, table.conflicts)
        assert table.read == sample.counts.get(name, 0), name
        assert table.inserted + table.skipped == table.read, (name, table)
    assert report["attendances"].skipped_reasons and all("ABSENT" in r for r in report["attendances"].skipped_reasons)
    state = await snapshot(db)
    assert len(state["meetings"]) == sample.counts["meetings"]
    assert report.qr_codes == len(state["meetings"])
    assert len(state["qr"]) == 2 * len(state["meetings"])
    assert {s for *_, s, _, _ in state["meetings"]} == {"ACTIVE", "CANCELLED"}
    await rules_hold(db, now=clock.now())


@pytest.mark.invariant("MA-INV-04")
async def test_a_dirty_file_refuses_exactly_the_bad_rows_each_with_its_reason(db, settings, clock, tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, dirty=True, around=clock.now())
    report = await run(db, sample.path, settings, clock)
    refused = {(name, key) for name, t in report.tables.items() for key, _ in t.refused}
    assert refused == sample.refused
    reasons = {key: reason for t in report.tables.values() for key, reason in t.refused}
    assert all(reasons.values())
    texts = " | ".join(reasons.values())
    for expected in ("not an address", "not a system user", "is not a user of the file", "is not in the file",
                     "second attendance of the same person", "outside the check-in window", "unbounded",
                     "not an IANA zone", "not a timestamp", "was refused", "unknown attendance status"):
        assert expected in texts, expected
    notes = " | ".join(n for t in report.tables.values() for _, n in t.notes)
    for expected in ("unknown legacy role", "the same person as legacy user", "imported as a meeting on its own",
                     "does not fit MA-INV-01", "personal keys left out"):
        assert expected in notes, expected
    state = await snapshot(db)
    assert len([u for u in state["users"] if u[0] == "alice.wong@example.com"]) == 1
    await rules_hold(db, now=clock.now())


async def test_a_second_run_of_the_same_file_changes_nothing(db, settings, clock, tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, dirty=True, around=clock.now())
    await run(db, sample.path, settings, clock)
    before = await snapshot(db)
    again = await run(db, sample.path, settings, clock)
    assert changed(again) == {} and again.qr_codes == 0  # the codes encode the current address already
    assert all(t.conflicts == [] for name, t in again.tables.items() if name != "audit_logs")
    after = await snapshot(db)
    assert after == before
    moved = await run(db, sample.path, test_settings(data_dir=tmp_path, public_base_url="https://ma.example.com"),
                      clock)
    assert changed(moved) == {} and moved.qr_codes == len(after["meetings"]) - sum(
        1 for m in after["meetings"] if m[5] == "DELETED")
    await rules_hold(db, now=clock.now())


async def test_a_newer_file_gives_what_a_fresh_import_of_it_gives(db, settings, clock, tmp_path):
    older = generate(tmp_path / "old.db", size=24, around=clock.now())
    newer = generate(tmp_path / "new.db", size=24, around=clock.now())
    evolve(newer.path)
    await run(db, older.path, settings, clock)
    report = await run(db, newer.path, settings, clock)
    moves = changed(report)
    assert moves["meetings"][1] >= 3 and moves["meetings"][2] == 1, moves
    assert moves["attendances"][2] >= 1 and moves["users"][0] == 1, moves
    assert {n: t.conflicts for n, t in report.tables.items() if t.conflicts} == {}
    incremental = await snapshot(db)
    await _empty_meeting_data(db)  # the same connection: the fixture's transaction holds the rows
    again = await run(db, newer.path, settings, clock)
    assert {n: t.refused for n, t in again.tables.items() if t.refused} == {}
    fresh = await snapshot(db)
    for name in SNAPSHOT:
        if name in ("users", "meetings", "required", "attendances", "templates", "template_attendees", "series"):
            assert _without_ids(name, incremental[name]) == _without_ids(name, fresh[name]), name
    await rules_hold(db, now=clock.now())


def _without_ids(name: str, rows: list[tuple]) -> list[tuple]:
    """Meeting ids kept from the file compare as they are; generated ones (series, organizer uuids) do not."""
    if name == "meetings":
        return sorted((r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows)
    return rows


async def _empty_meeting_data(db: Database) -> None:
    await as_committed(db)
    async with db.unit_of_work() as session:
        await session.execute(text(
            "TRUNCATE meeting_attendance.legacy_import_rows, meeting_attendance.attendance_corrections, "
            "meeting_attendance.attendances, meeting_attendance.guests, meeting_attendance.meeting_qr_codes, "
            "meeting_attendance.meeting_required_attendees, meeting_attendance.meetings, "
            "meeting_attendance.series_required_attendees, meeting_attendance.meeting_series, "
            "meeting_attendance.template_attendees, meeting_attendance.templates CASCADE"))


async def test_a_tenet_side_change_is_a_conflict_and_is_kept(db, settings, clock, tmp_path):
    sample = generate(tmp_path / "dev.db", size=20, around=clock.now())
    await run(db, sample.path, settings, clock)
    with sqlite3.connect(sample.path) as legacy:
        meeting_id = legacy.execute("SELECT id FROM meetings WHERE status = 'COMPLETED' ORDER BY id LIMIT 1"
                                    ).fetchone()[0]
        legacy.execute("UPDATE meetings SET title = 'Renamed in the legacy system' WHERE id = ?", (meeting_id,))
    async with db.unit_of_work() as session:
        await session.execute(text("UPDATE meeting_attendance.meetings SET title = 'Renamed in Tenet', "
                                   "version = version + 1 WHERE id = :id"), {"id": meeting_id})
    report = await run(db, sample.path, settings, clock)
    assert [key for key, _ in report["meetings"].conflicts] == [meeting_id]
    assert "changed in Tenet" in report["meetings"].conflicts[0][1]
    assert report["meetings"].updated == 0
    async with db.read_only() as session:
        title = (await session.execute(text("SELECT title FROM meeting_attendance.meetings WHERE id = :id"),
                                       {"id": meeting_id})).scalar_one()
    assert title == "Renamed in Tenet"
    await rules_hold(db, now=clock.now())


@pytest.mark.parametrize("broken", ["not sqlite", "no tables"])
async def test_a_file_that_is_not_a_legacy_database_is_refused_whole(db, settings, clock, tmp_path, broken):
    from tenet.meetings.legacy.source import NotALegacyFile

    path = tmp_path / "dev.db"
    if broken == "not sqlite":
        path.write_text("hello")
    else:
        sqlite3.connect(path).execute("CREATE TABLE users (id TEXT)").connection.close()
    with pytest.raises(NotALegacyFile):
        await run(db, path, settings, clock)


async def test_a_row_taking_the_place_of_a_removed_one_finds_it_gone(db, settings, clock, tmp_path):
    """The newer file drops the attendance that was kept over its duplicate (the same person under a second legacy
    user): the duplicate is now the person's one attendance, as a fresh import of the newer file has it."""
    sample = generate(tmp_path / "dev.db", size=20, dirty=True, around=clock.now())
    first = await run(db, sample.path, settings, clock)
    twin = next(key for table, key in sample.refused if table == "attendances" and key.startswith("zz"))
    assert twin in {key for key, _ in first["attendances"].refused}
    with sqlite3.connect(sample.path) as legacy:
        meeting_id, at = legacy.execute('SELECT "meetingId", "checkInTime" FROM attendances WHERE id = ?',
                                        (twin,)).fetchone()
        legacy.execute("DELETE FROM attendances WHERE meetingId = ? AND checkInTime = ? AND id <> ?",
                       (meeting_id, at, twin))
    second = await run(db, sample.path, settings, clock)
    assert (second["attendances"].inserted, second["attendances"].removed) == (1, 1)
    assert twin not in {key for key, _ in second["attendances"].refused}
    await rules_hold(db, now=clock.now())


def test_the_generator_makes_large_files_too(tmp_path):
    sample = generate(tmp_path / "big.db", size=600, dirty=True, seed=7)
    assert sample.counts["meetings"] >= 600 and sample.counts["attendances"] > 600
    with sqlite3.connect(sample.path) as legacy:
        assert legacy.execute("SELECT count(DISTINCT id) FROM meetings").fetchone()[0] == sample.counts["meetings"]
