"""`reconcile` (spec 000 §G phase 3, "每日对账"): per source table, old vs new: record counts, status
distributions and key-field hashes, written as a report; a table whose deviation is above the gate (spec:
"偏差 < 0.1%") makes the command exit non-zero.

A legacy row deviates when it has no Tenet row (never mapped: refused, or not back-filled or synced yet), when its
mapped row is gone, or when the key fields differ (each side's fields normalised the way the back-fill normalises
them, then hashed). The key fields are the ones a user would notice: an account's email and whether it is
deleted (a user deleted in the old app whose account lives on deviates: sync notes it, an administrator deletes
the account), a profile's name, a friendship's or a todo's state, a group's name and state, a member's role, an
item's title and times, a share's permission.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from tenet.db.database import Database
from tenet.kernel.emails import InvalidEmail, clean_email, normalize_email
from tenet.kernel.statements import statements
from tenet.social.legacy.people import clean_text, loose_boolean
from tenet.social.legacy.schema import BY_TABLE, columns_present, qualified
from tenet.social.legacy.work import ROLES

GATE = 0.001  # 0.1 %


def _user(row: dict[str, Any]) -> tuple[Any, ...]:
    alive = "deleted" if loose_boolean(row.get("is_deleted")) else "live"
    try:
        return normalize_email(clean_email(str(row.get("email") or ""))), alive
    except InvalidEmail:
        return "<invalid>", alive


_FRIEND = {"rejected": "declined", "cancelled": "canceled"}

# table -> (legacy key fields, the new side's SQL over ids answering (id, fields...), the status field's index)
Compare = tuple[Callable[[dict[str, Any]], tuple[Any, ...]], str, int | None]
COMPARES: dict[str, Compare] = {
    "users": (_user, "SELECT id, email_normalized, CASE WHEN status = 'deleted' THEN 'deleted' ELSE 'live' END "
                     "FROM iam.user_account WHERE id = ANY(%(ids)s)", 1),
    "user_profiles": (lambda r: (clean_text(r.get("nickname"), 200),),
                      "SELECT id, username FROM social.profiles WHERE id = ANY(%(ids)s)", None),
    "friend_requests": (lambda r: (_FRIEND.get(s := str(r.get("status") or "").strip().lower(), s),),
                        "SELECT id, status FROM social.friendships WHERE id = ANY(%(ids)s)", 0),
    "groups": (lambda r: (clean_text(r.get("name"), 200), "archived" if loose_boolean(r.get("archived")) else "active"),
               "SELECT id, name, status FROM social.groups WHERE id = ANY(%(ids)s)", 1),
    "group_members": (lambda r: (ROLES.get(str(r.get("role") or "member").strip().lower(), "member"),),
                      "SELECT id, role FROM social.group_members WHERE id = ANY(%(ids)s)", 0),
    "schedule_items": (lambda r: (clean_text(r.get("title"), 200), r.get("starts_at"), r.get("ends_at")),
                       "SELECT id, title, start_at, end_at FROM social.schedule_items WHERE id = ANY(%(ids)s)", None),
    "item_shares": (lambda r: ('["view", "edit"]' if loose_boolean(r.get("can_edit")) else '["view"]', "active"),
                    "SELECT id, permission::text, status FROM social.schedule_subscriptions WHERE id = ANY(%(ids)s)",
                    1),
    "todos": (lambda r: (clean_text(r.get("title"), 200), "done" if loose_boolean(r.get("done")) else "pending"),
              "SELECT id, title, status FROM social.todos WHERE id = ANY(%(ids)s)", 1),
}


def row_hash(fields: tuple[Any, ...]) -> str:
    return hashlib.sha256(json.dumps(list(fields), default=str).encode()).hexdigest()


@dataclass
class TableReport:
    table: str
    legacy_rows: int = 0
    new_rows: int = 0
    unmapped: int = 0
    gone: int = 0
    differing: int = 0
    legacy_statuses: dict[str, int] = field(default_factory=dict)
    new_statuses: dict[str, int] = field(default_factory=dict)
    legacy_digest: str = ""
    new_digest: str = ""
    samples: list[str] = field(default_factory=list)

    @property
    def deviation(self) -> float:
        return (self.unmapped + self.gone + self.differing) / self.legacy_rows if self.legacy_rows else 0.0

    @property
    def passes(self) -> bool:
        return self.deviation <= GATE

    def line(self) -> str:
        verdict = "ok" if self.passes else "ABOVE THE GATE"
        return (f"{self.table}: {self.legacy_rows} legacy, {self.new_rows} new, {self.unmapped} unmapped, "
                f"{self.gone} gone, {self.differing} differing: deviation {self.deviation:.3%} ({verdict})")


async def _table(db: Database, legacy: psycopg.AsyncConnection, schema: str, table: str,
                 batch_size: int) -> TableReport:
    source, (legacy_fields, new_sql, status_at) = BY_TABLE[table], COMPARES[table]
    report = TableReport(table)
    legacy_hashes: list[str] = []
    new_hashes: list[str] = []
    legacy_status: Counter[str] = Counter()
    new_status: Counter[str] = Counter()
    after = 0
    while True:
        statement = sql.SQL("SELECT * FROM {} WHERE {} > %(after)s ORDER BY {} LIMIT %(n)s").format(
            qualified(schema, table), sql.Identifier(source.key), sql.Identifier(source.key))
        async with legacy.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(statement, {"after": after, "n": batch_size})
            rows = await cursor.fetchall()
        if not rows:
            break
        after = int(rows[-1][source.key])
        keys = [int(r[source.key]) for r in rows]
        async with db.unit_of_work() as session:
            run = await statements(session)
            mapping = {r["legacy_id"]: r["new_id"] for r in await run.all(
                "SELECT legacy_id, new_id FROM social_legacy.id_map WHERE source_table = %(t)s "
                "AND legacy_id = ANY(%(ids)s)", {"t": table, "ids": keys})}
            found = {r["id"]: tuple(v for k, v in r.items() if k != "id")
                     for r in await run.all(new_sql, {"ids": list(mapping.values())})}
        for row, key in zip(rows, keys, strict=True):
            mine = legacy_fields(row)
            report.legacy_rows += 1
            legacy_hashes.append(row_hash(mine))
            if status_at is not None:
                legacy_status[str(mine[status_at])] += 1
            if key not in mapping:
                report.unmapped += 1
                continue
            theirs = found.get(mapping[key])
            if theirs is None:
                report.gone += 1
                continue
            report.new_rows += 1
            new_hashes.append(row_hash(theirs))
            if status_at is not None:
                new_status[str(theirs[status_at])] += 1
            if row_hash(mine) != row_hash(theirs) and not (table == "user_profiles" and mine[0] is None):
                report.differing += 1
                if len(report.samples) < 5:
                    report.samples.append(f"legacy {key}: {mine} vs {theirs}")
    report.legacy_statuses, report.new_statuses = dict(legacy_status), dict(new_status)
    report.legacy_digest = hashlib.sha256("".join(sorted(legacy_hashes)).encode()).hexdigest()
    report.new_digest = hashlib.sha256("".join(sorted(new_hashes)).encode()).hexdigest()
    return report


async def reconcile(db: Database, legacy: psycopg.AsyncConnection, schema: str, *,
                    batch_size: int = 1000) -> list[TableReport]:
    present = await columns_present(legacy, schema)
    return [await _table(db, legacy, schema, table, batch_size) for table in COMPARES
            if table in present and all(c in present[table] for c in BY_TABLE[table].required)]


def as_json(reports: list[TableReport]) -> str:
    return json.dumps({"gate": GATE, "passes": all(r.passes for r in reports),
                       "tables": [{**asdict(r), "deviation": r.deviation, "passes": r.passes} for r in reports]},
                      indent=2, default=str)
