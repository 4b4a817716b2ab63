"""The repeatability property (issue 20): importing file A and then a newer file B gives what a fresh import of B
gives, for any B made from A by the edits a legacy system makes between two syncs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tenet.meetings.legacy.sample import generate
from tests.meetings.legacy.test_import import SNAPSHOT, _empty_meeting_data, _without_ids, run, snapshot
from tests.support.invariants import rules_hold

COMPARED = ("users", "meetings", "series", "required", "attendances", "templates", "template_attendees", "qr")
EDITS = ("rename_meeting", "drop_meeting", "cancel_meeting", "drop_attendance", "move_check_in", "change_role",
         "rename_user", "drop_required", "add_required", "drop_template", "move_meeting")


def _pick(db: sqlite3.Connection, sql: str, index: int) -> tuple | None:
    rows = db.execute(sql).fetchall()
    return rows[index % len(rows)] if rows else None


def _edit(db: sqlite3.Connection, edit: str, index: int, position: int) -> None:
    """One change a legacy system makes between two syncs (never un-cancelling: Tenet refuses that, MA-INV-03)."""
    live = "SELECT id, startTime FROM meetings WHERE status <> 'CANCELLED' ORDER BY id"
    if edit in ("rename_meeting", "drop_meeting", "cancel_meeting", "move_meeting") and (m := _pick(db, live, index)):
        if edit == "rename_meeting":
            db.execute("UPDATE meetings SET title = title || ' v2' WHERE id = ?", (m[0],))
        elif edit == "cancel_meeting":
            db.execute("UPDATE meetings SET status = 'CANCELLED', cancelReason = 'Called off' WHERE id = ?", (m[0],))
        elif edit == "move_meeting":  # later by an hour: every check-in stays inside the window
            db.execute("UPDATE meetings SET endTime = endTime + 3600000 WHERE id = ?", (m[0],))
        else:
            for table in ("attendances", "meeting_required_attendees"):
                db.execute(f"DELETE FROM {table} WHERE meetingId = ?", (m[0],))
            db.execute("DELETE FROM meetings WHERE id = ?", (m[0],))
    elif edit in ("drop_attendance", "move_check_in") and (a := _pick(db, (
            "SELECT a.id, m.startTime FROM attendances a JOIN meetings m ON m.id = a.meetingId "
            "WHERE a.checkInTime IS NOT NULL AND m.status <> 'CANCELLED' ORDER BY a.id"), index)):
        if edit == "drop_attendance":
            db.execute("DELETE FROM attendances WHERE id = ?", (a[0],))
        else:
            db.execute("UPDATE attendances SET checkInTime = ? + 600000 WHERE id = ?", (a[1], a[0]))
    elif edit in ("change_role", "rename_user") and (u := _pick(db, "SELECT id FROM users ORDER BY id", index)):
        if edit == "change_role":
            db.execute("UPDATE users SET role = CASE role WHEN 'EMPLOYEE' THEN 'LEADER' ELSE 'EMPLOYEE' END "
                       "WHERE id = ?", u)
        else:
            db.execute("UPDATE users SET name = 'Renamed ' || id WHERE id = ?", u)
    elif edit == "drop_required" and (r := _pick(db, "SELECT id FROM meeting_required_attendees ORDER BY id", index)):
        db.execute("DELETE FROM meeting_required_attendees WHERE id = ?", r)
    elif edit == "add_required" and (m := _pick(db, live, index)):
        user = _pick(db, "SELECT id FROM users ORDER BY id", index // 3)
        db.execute("INSERT INTO meeting_required_attendees (id, meetingId, userId, createdAt) VALUES (?, ?, ?, 0)",
                   (f"cadded{position:03d}{index:016d}", m[0], user[0]))  # type: ignore[index]
    elif edit == "drop_template" and (t := _pick(db, "SELECT id FROM templates ORDER BY id", index)):
        db.execute("DELETE FROM template_attendees WHERE templateId = ?", t)
        db.execute("DELETE FROM templates WHERE id = ?", t)


# No shrinking: an example costs three imports; the failure message names the edits.
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None,
          phases=[Phase.explicit, Phase.generate])
@given(seed=st.integers(1, 10_000), dirty=st.booleans(),
       edits=st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 1000)), min_size=1, max_size=8))
async def test_import_a_then_b_equals_a_fresh_import_of_b(db, settings_for_import, clock, tmp_path_factory, seed,
                                                          dirty, edits):
    folder: Path = tmp_path_factory.mktemp("legacy")
    await _empty_meeting_data(db)
    older = generate(folder / "a.db", size=12, seed=seed, dirty=dirty, around=clock.now())
    newer = generate(folder / "b.db", size=12, seed=seed, dirty=dirty, around=clock.now())
    with sqlite3.connect(newer.path) as legacy:
        for position, (edit, index) in enumerate(edits):
            _edit(legacy, edit, index, position)
    await run(db, older.path, settings_for_import, clock)
    second = await run(db, newer.path, settings_for_import, clock)
    assert {n: t.conflicts for n, t in second.tables.items() if t.conflicts and n not in ("users", "audit_logs")} == {}
    incremental = await snapshot(db)
    await rules_hold(db, now=clock.now())
    await _empty_meeting_data(db)
    await run(db, newer.path, settings_for_import, clock)
    fresh = await snapshot(db)
    for name in COMPARED:
        assert _without_ids(name, incremental[name]) == _without_ids(name, fresh[name]), (name, edits)
    assert set(COMPARED) <= set(SNAPSHOT)
