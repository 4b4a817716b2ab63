"""`reconcile` and `cutover` (issue 20, spec 000 §G phase 3): a clean back-fill passes the 0.1 % gate and a planted
difference fails it (non-zero exit); the read switch moves 10 % of users by a stable bucket and back; and the
whole day as commands, each a real `tenet` subprocess."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import text
from tests.support.cli import run_cli
from tests.support.invariants import rules_hold

from tenet.social.legacy import cutover
from tenet.social.legacy.backfill import backfill
from tenet.social.legacy.reconcile import reconcile


async def test_a_clean_backfill_reconciles_and_a_planted_difference_is_caught(clean):
    await backfill(clean.db, clean.legacy, "legacy", await clean.context())
    reports = {r.table: r for r in await reconcile(clean.db, clean.legacy, "legacy")}
    assert all(r.passes for r in reports.values()), [r.line() for r in reports.values()]
    assert reports["todos"].legacy_digest == reports["todos"].new_digest
    assert reports["friend_requests"].legacy_statuses == reports["friend_requests"].new_statuses

    # The old app writes with no capture installed: one todo differs now, one of 24 (above 0.1 %).
    await clean.legacy.execute("UPDATE legacy.todos SET title = 'Changed behind our back' WHERE id = 5")
    reports = {r.table: r for r in await reconcile(clean.db, clean.legacy, "legacy")}
    assert (reports["todos"].differing, reports["todos"].passes) == (1, False)
    assert reports["todos"].legacy_digest != reports["todos"].new_digest
    assert "Changed behind our back" in reports["todos"].samples[0]
    assert all(r.passes for t, r in reports.items() if t != "todos")


async def test_a_row_missing_on_the_new_side_is_caught(clean):
    await backfill(clean.db, clean.legacy, "legacy", await clean.context())
    async with clean.db.unit_of_work() as session:
        await session.execute(text("DELETE FROM social.todos WHERE id = (SELECT new_id FROM social_legacy.id_map "
                                   "WHERE source_table = 'todos' AND legacy_id = 3)"))
    reports = {r.table: r for r in await reconcile(clean.db, clean.legacy, "legacy")}
    assert (reports["todos"].gone, reports["todos"].passes) == (1, False)


async def test_the_read_switch_moves_ten_percent_of_users_and_back(clean):
    await backfill(clean.db, clean.legacy, "legacy", await clean.context())
    people = [uuid.uuid5(uuid.NAMESPACE_URL, f"user-{i}") for i in range(2000)]
    ctx = await clean.context()

    async def on_tenet() -> set[uuid.UUID]:
        async with clean.db.unit_of_work() as session:
            return {p for p in people if cutover.bucket(p) < (await cutover.current(session)).read_percent}

    assert await on_tenet() == set()  # no switch yet: everyone reads the legacy tables
    async with clean.db.unit_of_work() as session:
        await cutover.set_percent(session, percent=10, now=ctx.now)
    ten = await on_tenet()
    assert 0.08 < len(ten) / len(people) < 0.12
    async with clean.db.unit_of_work() as session:
        await cutover.set_percent(session, percent=30, now=ctx.now)
    assert ten < await on_tenet()  # growing the share keeps the users already moved
    async with clean.db.unit_of_work() as session:
        back = await cutover.set_percent(session, percent=0, now=ctx.now)
        legacy_side = await cutover.side_of(session, 1)  # a legacy user id works too
    assert (back.read_percent, back.previous_percent) == (0, 30)
    assert await on_tenet() == set()
    assert legacy_side is not None and legacy_side.user_id is not None and legacy_side.reads_from == "legacy"


def test_the_day_as_commands(tenet_url, cli_env, tmp_path):
    def tenet(*args: str):
        return run_cli("social", "legacy", *args, env_extra=cli_env)

    made = tenet("sample", "--size", "10", "--dirty")
    assert made.returncode == 0, made.stderr
    assert tenet("sample").returncode == 2  # the schema exists: kept unless --replace
    probe = tenet("probe")
    assert probe.returncode == 0, probe.stderr
    assert "back-fill todos -> social.todos" in probe.stdout
    filled = tenet("backfill", "--batch-size", "3")
    assert filled.returncode == 0, filled.stderr
    assert "users: 11 applied, 2 refused" in filled.stdout  # the same email in another case maps to one account
    assert "identity's and social's invariants hold" in filled.stdout
    assert tenet("sync", "--install").returncode == 0
    report = tmp_path / "reconcile.json"
    dirty = tenet("reconcile", "--report", str(report))
    assert dirty.returncode == 1  # the dirty rows were refused: above the gate, and said so
    assert json.loads(report.read_text())["passes"] is False
    moved = tenet("cutover", "--percent", "10", "--user", "1")
    assert moved.returncode == 0, moved.stderr
    assert "read switch: 10 % of users read from Tenet (was 0 %)" in moved.stdout
    rolled = tenet("cutover", "--rollback")
    assert rolled.returncode == 0, rolled.stderr
    assert "read switch: 0 % of users read from Tenet (was 10 %)" in rolled.stdout
    assert "stopped capturing todos" in rolled.stdout
    assert tenet("cutover", "--user", "not-a-user").returncode == 2
    checked = run_cli("invariants", "check", "--database-url", tenet_url, env_extra=cli_env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_clean_up_waits_for_everyone_then_archives_the_legacy_schema(clean):
    from tenet.social.legacy import sync

    ctx = await clean.context()
    await backfill(clean.db, clean.legacy, "legacy", ctx)
    await sync.install(clean.legacy, "legacy")
    async with clean.db.unit_of_work() as session:
        await cutover.set_percent(session, percent=10, now=ctx.now)
    with pytest.raises(cutover.CleanUpRefused):
        async with clean.db.unit_of_work() as session:
            await cutover.clean_up(session, clean.legacy, "legacy", archive_as="legacy_archived")
    assert await clean.scalar("SELECT count(*) FROM legacy.todos") == 24  # nothing moved

    async with clean.db.unit_of_work() as session:
        await cutover.set_percent(session, percent=100, now=ctx.now)
        lines = await cutover.clean_up(session, clean.legacy, "legacy", archive_as="legacy_archived")
    assert lines[-1] == "legacy schema legacy archived as legacy_archived"
    assert await clean.scalar("SELECT to_regclass('legacy.todos')::text") is None
    await clean.legacy.execute("UPDATE legacy_archived.todos SET title = 'After the end' WHERE id = 1")
    assert await clean.scalar("SELECT count(*) FROM social_legacy.changes") == 0  # no capture any more
    await rules_hold(clean.db)


async def test_a_user_deleted_in_the_old_app_but_alive_in_tenet_deviates(clean):
    await backfill(clean.db, clean.legacy, "legacy", await clean.context())
    await clean.legacy.execute("UPDATE legacy.users SET is_deleted = true WHERE id = 4")
    reports = {r.table: r for r in await reconcile(clean.db, clean.legacy, "legacy")}
    assert (reports["users"].differing, reports["users"].passes) == (1, False)
    assert reports["users"].legacy_statuses == {"live": 11, "deleted": 1}
    assert reports["users"].new_statuses == {"live": 12}
