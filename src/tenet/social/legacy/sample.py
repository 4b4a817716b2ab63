"""`tenet social legacy sample`: the assumed legacy schema (schema.DDL) filled with realistic rows, and with
`--dirty` the rows a real old database holds: the same email in another case, an address that is none, a
deleted user still referenced, settings columns with values no one validated, a request to oneself or to a user
that does not exist, the same pair asked twice in both directions, an item ending before it starts or in a zone
that is no zone, a title longer than Tenet keeps, orphan rows. Deterministic for a seed, so a test knows what
each row must become."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from tenet.social.legacy.schema import DDL

THEMES = ("dark", "light", "system")
ZONES = ("Asia/Shanghai", "Europe/Berlin", "America/Los_Angeles", "UTC")
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
UNKNOWN_USER = 999_999


@dataclass
class Rows:
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, table: str, **values: Any) -> int:
        rows = self.tables.setdefault(table, [])
        values.setdefault("id", len(rows) + 1)
        rows.append(values)
        return values["id"]


def _people(rows: Rows, rng: random.Random, size: int) -> None:
    for i in range(1, size + 1):
        rows.add("users", email=f"user{i}@example.com", name=f"User {i}", is_deleted=False,
                 created_at=START - timedelta(days=400 - i))
        rows.add("user_profiles", id=i, nickname=f"user{i}", bio=f"Bio of user {i}" if i % 3 else None,
                 avatar=f"https://cdn.example.com/a/{i}.png" if i % 4 == 0 else None, theme=rng.choice(THEMES),
                 lang=rng.choice(("en", "zh-CN")), tz=rng.choice(ZONES), notify=rng.choice(("1", "0", "true")),
                 allow_friend_requests=rng.choice(("yes", "1", None)))


def _social(rows: Rows, rng: random.Random, size: int) -> None:
    statuses = ("accepted", "accepted", "pending", "rejected")
    for i in range(1, size):
        rows.add("friend_requests", from_user_id=i, to_user_id=i + 1, status=statuses[i % len(statuses)],
                 created_at=START - timedelta(days=30 - i % 30), responded_at=None)
    for g in range(1, max(size // 5, 1) + 1):
        owner = (g - 1) * 5 + 1
        rows.add("groups", name=f"Group {g}", description=None, owner_id=owner, is_public=g % 2, archived=False,
                 created_at=START - timedelta(days=60))
        rows.add("group_members", group_id=g, user_id=owner, role="owner", joined_at=START - timedelta(days=60))
        for member in range(owner + 1, min(owner + 4, size) + 1):
            rows.add("group_members", group_id=g, user_id=member, role=rng.choice(("admin", "member", "member")),
                     joined_at=START - timedelta(days=50))


def _work(rows: Rows, rng: random.Random, size: int) -> None:
    for i in range(1, size + 1):
        for n in range(2):
            start = START + timedelta(days=i % 20, hours=n * 3)
            item = rows.add("schedule_items", owner_id=i, title=f"Meeting {n + 1} of user {i}", notes=None,
                            starts_at=start, ends_at=start + timedelta(hours=1), tz=rng.choice(ZONES),
                            created_at=START - timedelta(days=5))
            if i < size and n == 0:
                rows.add("item_shares", item_id=item, user_id=i + 1, can_edit=bool(i % 2),
                         created_at=START - timedelta(days=4))
            rows.add("todos", user_id=i, title=f"Prepare meeting {n + 1}", done=n == 1,
                     due_at=start - timedelta(hours=2) if n == 0 else None, item_id=item if n == 0 else None,
                     created_at=START - timedelta(days=3))


def _dirt(rows: Rows, size: int) -> None:
    """One of each kind of dirt, after the clean rows (their ids are known to the tests: the last ones)."""
    rows.add("users", email="USER1@Example.COM ", name="User 1 again", is_deleted=False, created_at=START)
    rows.add("users", email="not-an-email", name="Nobody", is_deleted=False, created_at=START)
    gone = rows.add("users", email="gone@example.com", name="Gone", is_deleted=True, created_at=START)
    rows.add("user_profiles", id=gone + 100, nickname="orphan", bio=None, avatar=None, theme="dark", lang="en",
             tz="UTC", notify="1", allow_friend_requests=None)
    rows.tables["user_profiles"][0].update(theme="blue", tz="Mars/Olympus", notify="maybe")
    rows.add("friend_requests", from_user_id=1, to_user_id=1, status="pending", created_at=START, responded_at=None)
    rows.add("friend_requests", from_user_id=2, to_user_id=UNKNOWN_USER, status="pending", created_at=START,
             responded_at=None)
    rows.add("friend_requests", from_user_id=2, to_user_id=1, status="accepted", created_at=START, responded_at=None)
    rows.add("groups", name="   ", description=None, owner_id=1, is_public=0, archived=False, created_at=START)
    rows.add("group_members", group_id=UNKNOWN_USER, user_id=1, role="member", joined_at=START)
    rows.add("schedule_items", owner_id=1, title="Ends before it starts", notes=None, starts_at=START,
             ends_at=START - timedelta(hours=1), tz="UTC", created_at=START)
    rows.add("schedule_items", owner_id=1, title="On Mars", notes=None, starts_at=START,
             ends_at=START + timedelta(hours=1), tz="Mars/Olympus", created_at=START)
    rows.add("schedule_items", owner_id=UNKNOWN_USER, title="Orphan", notes=None, starts_at=START,
             ends_at=START + timedelta(hours=1), tz="UTC", created_at=START)
    rows.add("item_shares", item_id=1, user_id=UNKNOWN_USER, can_edit=False, created_at=START)
    rows.add("item_shares", item_id=1, user_id=1, can_edit=True, created_at=START)  # to the item's owner
    rows.add("todos", user_id=UNKNOWN_USER, title="Orphan todo", done=False, due_at=None, item_id=None,
             created_at=START)
    rows.add("todos", user_id=2, title="Long " * 50, done=False, due_at=None, item_id=None, created_at=START)
    rows.add("todos", user_id=1, title="Points at a lost item", done=False, due_at=None, item_id=UNKNOWN_USER,
             created_at=START)


def generate(size: int, *, dirty: bool, seed: int = 20) -> Rows:
    rng = random.Random(seed)
    rows = Rows()
    _people(rows, rng, size)
    _social(rows, rng, size)
    _work(rows, rng, size)
    if dirty:
        _dirt(rows, size)
    return rows


async def create(connection: psycopg.AsyncConnection, schema: str, rows: Rows, *, replace: bool) -> dict[str, int]:
    """The schema and its rows in one transaction; answer the row count per table. An existing schema is kept
    (and the command refuses) unless `replace`."""
    name = sql.Identifier(schema)
    async with connection.transaction():
        if replace:
            await connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(name))
        await connection.execute(sql.SQL("CREATE SCHEMA {}").format(name))
        await connection.execute(sql.SQL(DDL).format(s=name))
        # In Tenet's own database the guest tables fall under its security baseline too (KERNEL-INV-03: every
        # table has row-level security): the owner, as which the old app and the tools connect, is not limited.
        for table in rows.tables:
            await connection.execute(sql.SQL("ALTER TABLE {}.{} ENABLE ROW LEVEL SECURITY").format(
                name, sql.Identifier(table)))
        for table, table_rows in rows.tables.items():
            key = "user_id" if table == "user_profiles" else "id"
            columns = [key if c == "id" else c for c in table_rows[0]]
            statement = sql.SQL("INSERT INTO {}.{} ({}) VALUES ({})").format(
                name, sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)))
            async with connection.cursor() as cursor:
                await cursor.executemany(statement, [tuple(r.values()) for r in table_rows])
            if key == "id":
                await connection.execute(sql.SQL("SELECT setval(pg_get_serial_sequence({}, 'id'), {})").format(
                    sql.Literal(f"{schema}.{table}"), sql.Literal(len(table_rows))))
    return {table: len(table_rows) for table, table_rows in rows.tables.items()}
