"""`probe` and `backfill` on the generator's legacy schema (issue 20): the plan names what is missing, a run
maps every clean row and refuses every dirty one with its reason, a rerun adds nothing, and a run stopped
halfway then rerun ends exactly where one uninterrupted run ends; the invariants hold after each."""

from __future__ import annotations

import asyncio

import pytest
from tests.social.legacy.conftest import _setup
from tests.support.invariants import rules_hold

from tenet.social.legacy.backfill import BackfillInterrupted, backfill, plan

# What one uninterrupted run of the clean sample (12 users) makes, per source table.
CLEAN_COUNTS = {"users": 12, "user_profiles": 12, "friend_requests": 11, "groups": 2, "group_members": 10,
                "schedule_items": 24, "item_shares": 11, "todos": 24}


async def _tenet(setup, statement: str, params: dict | None = None) -> list[tuple]:
    async with setup.db.unit_of_work() as session:
        from sqlalchemy import text

        return [tuple(r) for r in (await session.execute(text(statement), params or {})).all()]


async def _outcome(setup) -> dict:
    """Everything a back-fill decides, without the ids and times a run draws: compared across runs."""
    mapped = await _tenet(setup, "SELECT source_table, count(*) FROM social_legacy.id_map GROUP BY 1 ORDER BY 1")
    refused = await _tenet(setup, "SELECT source_table, legacy_id, code FROM social_legacy.differences "
                                  "ORDER BY 1, 2, 3")
    shape = await _tenet(setup, """
        SELECT (SELECT count(*) FROM iam.user_account), (SELECT count(*) FROM social.friendships),
               (SELECT string_agg(status, ',' ORDER BY status) FROM social.friendships),
               (SELECT count(*) FROM social.groups), (SELECT count(*) FROM social.group_members),
               (SELECT count(*) FROM social.schedule_items), (SELECT count(*) FROM social.todos),
               (SELECT count(*) FROM social.todos WHERE status = 'done'),
               (SELECT string_agg(status || permission::text, ',' ORDER BY status || permission::text)
                  FROM social.schedule_subscriptions),
               (SELECT count(*) FROM social.inbox_messages WHERE message_type = 'friend_request'
                   AND status IN ('pending', 'read'))""")
    return {"mapped": mapped, "refused": refused, "shape": shape}


async def test_probe_names_missing_tables_and_columns_and_skips_them(clean):
    await clean.legacy.execute("DROP TABLE legacy.todos")
    await clean.legacy.execute("ALTER TABLE legacy.groups DROP COLUMN owner_id")
    await clean.legacy.execute("ALTER TABLE legacy.schedule_items DROP COLUMN notes")
    lines = {line.source.table: line.describe() for line in await plan(clean.db, clean.legacy, "legacy")}
    assert lines["todos"] == "skip todos: no such table in the legacy schema"
    assert lines["groups"] == "skip groups: required column(s) owner_id missing"
    assert lines["schedule_items"].startswith("back-fill schedule_items -> social.schedule_items: 24 row(s)")
    assert "(without notes" in lines["schedule_items"]

    report = await backfill(clean.db, clean.legacy, "legacy", await clean.context(), batch_size=5)
    assert "todos" not in report and "groups" not in report
    assert report["schedule_items"] == (24, 0)
    assert report["group_members"] == (0, 10)  # their groups were skipped: refused, each with its reason
    await rules_hold(clean.db)


async def test_probe_of_an_absent_schema_skips_everything(bare):
    lines = await plan(bare.db, bare.legacy, "legacy")
    assert [line.runnable for line in lines] == [False] * len(lines)


@pytest.mark.invariant("SOC-INV-01", "SOC-INV-04", "SOC-INV-06", "SOC-INV-07", "SOC-INV-12")
async def test_backfill_maps_every_clean_row_and_a_rerun_adds_nothing(clean):
    report = await backfill(clean.db, clean.legacy, "legacy", await clean.context(), batch_size=5)
    assert report == {table: (count, 0) for table, count in CLEAN_COUNTS.items()}
    first = await _outcome(clean)
    assert dict(first["mapped"]) == CLEAN_COUNTS
    # 11 requests: statuses cycle accepted, accepted, pending, rejected from i = 1 (index i % 4).
    assert first["shape"][0][2].split(",").count("pending") == 3
    assert first["shape"][0][9] == 3  # each pending request is in its recipient's inbox
    assert first["shape"][0][8].count("active") == 11  # shares in force in the old app arrive accepted
    await rules_hold(clean.db)

    again = await backfill(clean.db, clean.legacy, "legacy", await clean.context(), batch_size=5)
    assert again == {}  or all(v == (0, 0) for v in again.values())
    assert await _outcome(clean) == first
    await rules_hold(clean.db)


@pytest.mark.invariant("SOC-INV-04", "SOC-INV-07", "SOC-INV-10", "SOC-INV-11")
async def test_dirty_rows_are_refused_with_their_reasons_never_dropped_silently(dirty):
    await backfill(dirty.db, dirty.legacy, "legacy", await dirty.context(), batch_size=7)
    codes = {(t, code) for t, _, code in (await _outcome(dirty))["refused"]}
    assert {("users", "EMAIL_INVALID"), ("users", "LEGACY_USER_DELETED"), ("users", "MAPPED_BY_EMAIL"),
            ("user_profiles", "UNKNOWN_USER"), ("user_profiles", "VALUE_DROPPED"),
            ("friend_requests", "SELF_REQUEST"), ("friend_requests", "UNKNOWN_USER"),
            ("friend_requests", "DUPLICATE_PAIR"), ("groups", "NAME_MISSING"), ("group_members", "UNKNOWN_GROUP"),
            ("schedule_items", "UNKNOWN_USER"), ("item_shares", "UNKNOWN_USER"),
            ("item_shares", "CANNOT_SUBSCRIBE_OWNER"), ("todos", "UNKNOWN_USER"), ("todos", "SOURCE_DROPPED"),
            ("todos", "VALUE_SHORTENED")} <= codes
    bad_items = await _tenet(dirty, "SELECT code FROM social_legacy.differences WHERE source_table = 'schedule_items' "
                                    "AND code NOT IN ('UNKNOWN_USER') ORDER BY code")
    assert len(bad_items) == 2  # ends before it starts; a zone that is no zone
    # The same person in another case is one account; the address that is none, and the deleted user, none.
    assert (await _tenet(dirty, "SELECT count(*) FROM iam.user_account"))[0][0] == 12
    await rules_hold(dirty.db)


@pytest.fixture
def second_url(migrated_database, request) -> str:
    suffix = request.node.callspec.id if hasattr(request.node, "callspec") else "race"
    return migrated_database(f"sl_one_run_{suffix}")


@pytest.mark.parametrize("stop_after", [1, 4, 9])
async def test_backfill_stopped_halfway_then_rerun_equals_one_run(tenet_url, second_url, stop_after):
    async for stopped in _setup(tenet_url, size=12, dirty=True):
        with pytest.raises(BackfillInterrupted):
            await backfill(stopped.db, stopped.legacy, "legacy", await stopped.context(), batch_size=4,
                           stop_after_batches=stop_after)
        halfway = await _outcome(stopped)
        await rules_hold(stopped.db)
        await backfill(stopped.db, stopped.legacy, "legacy", await stopped.context(), batch_size=4)
        resumed = await _outcome(stopped)
        await rules_hold(stopped.db)
    async for one_run in _setup(second_url, size=12, dirty=True):
        await backfill(one_run.db, one_run.legacy, "legacy", await one_run.context(), batch_size=4)
        assert await _outcome(one_run) == resumed
    assert halfway != resumed and resumed["refused"]


async def test_two_backfills_racing_end_as_one_run(tenet_url, second_url):
    """Two operators start the back-fill at once (two engines, real connections): batches interleave one at a
    time, neither applies what the other did, and the end equals one run."""
    from tenet.db.database import Database

    async for racing in _setup(tenet_url, size=12, dirty=True):
        other = Database.from_url(tenet_url, pool_size=2, max_overflow=0, watch_outages=False)
        try:
            import psycopg

            from tenet.db.database import libpq_url

            async with await psycopg.AsyncConnection.connect(libpq_url(tenet_url), autocommit=True) as legacy:
                await asyncio.gather(
                    backfill(racing.db, racing.legacy, "legacy", await racing.context(), batch_size=3),
                    backfill(other, legacy, "legacy", await racing.context(), batch_size=3))
        finally:
            await other.dispose()
        raced = await _outcome(racing)
        await rules_hold(racing.db)
    async for one_run in _setup(second_url, size=12, dirty=True):
        await backfill(one_run.db, one_run.legacy, "legacy", await one_run.context(), batch_size=3)
        assert await _outcome(one_run) == raced
