"""Bypass tests of the Outlook sync's tables: illegal rows written with raw SQL are refused by PostgreSQL itself,
each by the constraint, index or trigger the catalog names (MA-INV-30..37, 39), and the detectors see rows the
database alone cannot refuse."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.kernel.invariants import check, get
from tests.meetings.test_bypass import T0, _meeting, _refused, _user

MAILBOX = ("INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, state, created_by_id, created_at, "
           "updated_at) VALUES (:id, :a, 'SHARED', :st, :u, :t, :t)")
BINDING = ("INSERT INTO meeting_attendance.outlook_bindings (id, graph_event_id, kind, mailbox_id, bound_by_id, "
           "sync_from, meeting_id, series_id, status, released_at, created_at, updated_at) "
           "VALUES (:id, :g, :k, :mb, :u, :from, :m, :s, :st, :rel, :t, :t)")
LINK = ("INSERT INTO meeting_attendance.outlook_event_links (meeting_id, binding_id, mailbox_id, original_start, "
        "graph_event_id, last_synced_at) VALUES (:m, :b, :mb, :os, 'AAMk-occ', :t)")
SUBSCRIPTION = ("INSERT INTO meeting_attendance.outlook_subscriptions (id, mailbox_id, graph_subscription_id, "
                "resource, expires_at, status, created_at) VALUES (:id, :mb, :g, '/users/x/events', :exp, :st, :t)")


async def _mailbox(db, user: uuid.UUID, address: str | None = None) -> uuid.UUID:
    mailbox_id = uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text(MAILBOX), {"id": mailbox_id, "a": address or f"{mailbox_id.hex[:8]}@contoso.com",
                                              "st": "OK", "u": user, "t": T0})
    return mailbox_id


def _binding(**overrides):
    return {"id": uuid.uuid4(), "g": "AAMk-master", "k": "SINGLE", "from": T0 - timedelta(days=1), "m": None,
            "s": None, "st": "PENDING", "rel": None, "t": T0, **overrides}


@pytest.fixture
async def world(db):
    user = await _user(db)
    mailbox = await _mailbox(db, user)
    meeting = await _meeting(db, user)
    return {"user": user, "mailbox": mailbox, "meeting": meeting}


async def _insert(db, sql: str, params: dict) -> None:
    async with db.unit_of_work() as session:
        await session.execute(text(sql), params)


async def _detected(db, rule: str) -> int:
    async with db.read_only() as session:
        violations = await check(await session.connection(), [get(rule)])
    return sum(v.rows for v in violations)


@pytest.mark.invariant("MA-INV-30")
async def test_a_second_live_binding_of_one_event_is_refused(db, world):
    await _insert(db, BINDING, _binding(mb=world["mailbox"], u=world["user"]))
    await _refused(db, BINDING, _binding(mb=world["mailbox"], u=world["user"]), "uq_outlook_bindings_event_active")
    # A released binding no longer counts: the event may be bound again.
    await _insert(db, BINDING, _binding(g="AAMk-other", mb=world["mailbox"], u=world["user"], st="RELEASED", rel=T0))
    await _insert(db, BINDING, _binding(g="AAMk-other", mb=world["mailbox"], u=world["user"]))
    assert await _detected(db, "MA-INV-30") == 0


@pytest.mark.invariant("MA-INV-31")
async def test_a_binding_target_matches_its_kind_and_is_bound_once(db, world):
    base = {"mb": world["mailbox"], "u": world["user"]}
    await _refused(db, BINDING, _binding(**base, k="SERIES", m=world["meeting"]), "ck_outlook_bindings_target")
    await _refused(db, BINDING, _binding(**base, st="ACTIVE"), "ck_outlook_bindings_active_has_target")
    await _insert(db, BINDING, _binding(**base, g="AAMk-1", st="ACTIVE", m=world["meeting"]))
    await _refused(db, BINDING, _binding(**base, g="AAMk-2", st="ACTIVE", m=world["meeting"]),
                   "uq_outlook_bindings_meeting_active")
    assert await _detected(db, "MA-INV-31") == 0


async def _active_binding(db, world, **overrides) -> uuid.UUID:
    params = _binding(mb=world["mailbox"], u=world["user"], st="ACTIVE", m=world["meeting"], **overrides)
    await _insert(db, BINDING, params)
    return params["id"]


@pytest.mark.invariant("MA-INV-32")
async def test_a_link_before_sync_from_is_refused(db, world):
    binding = await _active_binding(db, world, **{"from": T0})
    await _refused(db, LINK, {"m": world["meeting"], "b": binding, "mb": world["mailbox"],
                              "os": T0 - timedelta(minutes=1), "t": T0}, "outlook_links_respect_sync_from")
    await _insert(db, LINK, {"m": world["meeting"], "b": binding, "mb": world["mailbox"], "os": T0, "t": T0})
    assert await _detected(db, "MA-INV-32") == 0


@pytest.mark.invariant("MA-INV-33")
async def test_a_link_of_an_excluded_occurrence_is_refused(db, world):
    binding = await _active_binding(db, world)
    await _insert(db, "INSERT INTO meeting_attendance.outlook_exclusions (binding_id, original_start, created_by_id, "
                      "created_at) VALUES (:b, :os, :u, :t)", {"b": binding, "os": T0, "u": world["user"], "t": T0})
    await _refused(db, LINK, {"m": world["meeting"], "b": binding, "mb": world["mailbox"], "os": T0, "t": T0},
                   "outlook_links_respect_exclusions")


@pytest.mark.invariant("MA-INV-34")
async def test_one_meeting_per_occurrence_of_a_binding(db, world):
    binding = await _active_binding(db, world)
    await _insert(db, LINK, {"m": world["meeting"], "b": binding, "mb": world["mailbox"], "os": T0, "t": T0})
    other = await _meeting(db, world["user"])
    await _refused(db, LINK, {"m": other, "b": binding, "mb": world["mailbox"], "os": T0, "t": T0},
                   "uq_outlook_links_occurrence")
    assert await _detected(db, "MA-INV-34") == 0


@pytest.mark.invariant("MA-INV-35")
async def test_a_link_from_another_mailbox_or_a_released_binding_is_refused(db, world):
    binding = await _active_binding(db, world)
    elsewhere = await _mailbox(db, world["user"])
    await _refused(db, LINK, {"m": world["meeting"], "b": binding, "mb": elsewhere, "os": T0, "t": T0},
                   "outlook_links_from_current_source")
    await _insert(db, "UPDATE meeting_attendance.outlook_bindings SET status = 'RELEASED', released_at = :t "
                      "WHERE id = :b", {"b": binding, "t": T0})
    await _refused(db, LINK, {"m": world["meeting"], "b": binding, "mb": world["mailbox"], "os": T0, "t": T0},
                   "outlook_links_from_current_source")
    assert await _detected(db, "MA-INV-35") == 0


@pytest.mark.invariant("MA-INV-36")
async def test_one_active_subscription_per_mailbox_within_graph_s_limit(db, world):
    sub = {"mb": world["mailbox"], "st": "ACTIVE", "t": T0, "exp": T0 + timedelta(minutes=4200)}
    await _refused(db, SUBSCRIPTION, {**sub, "id": uuid.uuid4(), "g": "s0", "exp": T0 + timedelta(minutes=10_081)},
                   "ck_outlook_subscriptions_lifetime")
    await _refused(db, SUBSCRIPTION, {**sub, "id": uuid.uuid4(), "g": "s0", "exp": T0},
                   "ck_outlook_subscriptions_lifetime")
    await _insert(db, SUBSCRIPTION, {**sub, "id": uuid.uuid4(), "g": "s1"})
    await _refused(db, SUBSCRIPTION, {**sub, "id": uuid.uuid4(), "g": "s2"}, "uq_outlook_subscriptions_mailbox_active")
    await _insert(db, SUBSCRIPTION, {**sub, "id": uuid.uuid4(), "g": "s3", "st": "REMOVED"})
    assert await _detected(db, "MA-INV-36") == 0


@pytest.mark.invariant("MA-INV-37")
async def test_a_cursor_with_a_link_has_its_window(db, world):
    sql = ("INSERT INTO meeting_attendance.outlook_delta_cursors (mailbox_id, window_start, window_end, delta_link) "
           "VALUES (:mb, :ws, :we, :dl)")
    await _refused(db, sql, {"mb": world["mailbox"], "ws": None, "we": None, "dl": "https://graph/delta?token"},
                   "ck_outlook_delta_cursors_link_has_window")
    await _insert(db, sql, {"mb": world["mailbox"], "ws": T0, "we": T0 + timedelta(days=1), "dl": "https://g/d?t"})
    assert await _detected(db, "MA-INV-37") == 0


@pytest.mark.invariant("MA-INV-39")
@pytest.mark.parametrize(("column", "value", "constraint"), [
    ("subscription_lifetime_minutes", 4230, "ck_outlook_policy_subscription_lifetime_minutes_range"),
    ("subscription_lifetime_minutes", 44, "ck_outlook_policy_subscription_lifetime_minutes_range"),
    ("renewal_margin_minutes", 4200, "ck_outlook_policy_margin_below_lifetime"),
    ("window_days_back", 366, "ck_outlook_policy_window_days_back_range"),
    ("window_days_ahead", 0, "ck_outlook_policy_window_days_ahead_range"),
    ("batch_size", 9, "ck_outlook_policy_batch_size_range"),
    ("max_concurrent_requests", 5, "ck_outlook_policy_max_concurrent_requests_range"),
    ("retry_max_attempts", 21, "ck_outlook_policy_retry_max_attempts_range"),
])
async def test_policy_values_out_of_range_are_refused(db, column, value, constraint):
    # The margin is made small first, so only the named CHECK can refuse the value.
    margin = ", renewal_margin_minutes = 1" if column == "subscription_lifetime_minutes" else ""
    await _refused(db, f"UPDATE meeting_attendance.outlook_policy SET {column} = :v{margin} WHERE id = 1",
                   {"v": value}, constraint)


@pytest.mark.invariant("MA-INV-39")
async def test_the_policy_is_one_seeded_row(db):
    await _refused(db, "INSERT INTO meeting_attendance.outlook_policy SELECT 2, subscription_lifetime_minutes, "
                       "renewal_margin_minutes, window_days_back, window_days_ahead, reconcile_cron, batch_size, "
                       "max_concurrent_requests, retry_max_attempts, retry_base_seconds FROM "
                       "meeting_attendance.outlook_policy", {}, "ck_outlook_policy_single_row")
    assert await _detected(db, "MA-INV-39") == 0
    await _insert(db, "DELETE FROM meeting_attendance.outlook_policy", {})
    assert await _detected(db, "MA-INV-39") == 1
