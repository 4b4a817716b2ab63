"""Social data for the social_* scenarios: accounts registered through the API, then, per account, the typical
data of issue 9 generated inside PostgreSQL (`INSERT .. SELECT generate_series`, no client round trips): 500 inbox
messages (60 pending), 200 schedule items (20 % weekly series) each subscribed by two other accounts, 300 todos
(120 pending, a tenth of those without a due date). `tenet invariants check` must pass on the result.

Scale with BENCH_SOCIAL_USERS (default 200 accounts: about 100k messages, 40k items, 80k subscriptions, 60k
todos). The issue's 100k-user data set (about 150M rows) does not fit the shared 2-core machine's time budget;
the statements are index range scans per user, so their cost depends on the user's rows, not on the table size.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from bench.loading import check_invariants, register_users, sign_in

USERS = int(os.environ.get("BENCH_SOCIAL_USERS", "200"))
NOW = datetime.now(UTC).replace(microsecond=0)

GENERATE = """
WITH u AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n, count(*) OVER () AS total
             FROM iam.user_account WHERE email LIKE %(pattern)s)
INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, related_id, actionable,
                                   status, created_at, read_at, acted_at)
SELECT gen_random_uuid(), u.id, 'schedule_reminder', '{}'::jsonb, 'schedule_item', gen_random_uuid(), false,
       CASE WHEN i < 60 THEN 'pending' WHEN i < 400 THEN 'read' ELSE 'dismissed' END,
       %(now)s - make_interval(mins => i * 7 + u.n::int),
       CASE WHEN i >= 60 THEN %(now)s END, CASE WHEN i >= 400 THEN %(now)s END
  FROM u, generate_series(0, 499) AS i;

WITH u AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM iam.user_account WHERE email LIKE %(pattern)s)
INSERT INTO social.schedule_items (id, owner_id, title, start_at, end_at, timezone, recurrence_rule, series_end_at,
                                   created_at, updated_at, created_by)
SELECT gen_random_uuid(), u.id, 'Item ' || i,
       %(now)s - interval '100 days' + make_interval(hours => i * 12),
       %(now)s - interval '100 days' + make_interval(hours => i * 12 + 1),
       'America/Los_Angeles',
       CASE WHEN i %% 5 = 0 THEN 'FREQ=WEEKLY' END,
       CASE WHEN i %% 5 = 0 THEN NULL ELSE %(now)s - interval '100 days' + make_interval(hours => i * 12 + 1) END,
       %(now)s, %(now)s, u.id
  FROM u, generate_series(0, 199) AS i;

WITH u AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n, count(*) OVER () AS total
             FROM iam.user_account WHERE email LIKE %(pattern)s)
INSERT INTO social.schedule_subscriptions (id, item_id, subject_type, subscriber_id, permission, notify_level, status,
                                           accepted_at, created_at, updated_at, created_by)
SELECT gen_random_uuid(), i.id, 'user', s.id, '["view"]'::jsonb, 'all', 'active', %(now)s, %(now)s, %(now)s, i.owner_id
  FROM social.schedule_items i JOIN u o ON o.id = i.owner_id
  JOIN u s ON s.n IN ((o.n + 1) %% o.total, (o.n + 2) %% o.total) AND s.id <> o.id;

WITH u AS (SELECT id FROM iam.user_account WHERE email LIKE %(pattern)s)
INSERT INTO social.todos (id, owner_id, title, due_at, priority, status, completed_at, created_at, updated_at,
                          created_by)
SELECT gen_random_uuid(), u.id, 'Todo ' || i,
       CASE WHEN i < 120 AND i %% 10 = 0 THEN NULL ELSE %(now)s + make_interval(hours => i - 60) END,
       (ARRAY['low', 'medium', 'high', 'urgent'])[1 + i %% 4],
       CASE WHEN i < 120 THEN 'pending' WHEN i < 250 THEN 'done' ELSE 'canceled' END,
       CASE WHEN i >= 120 AND i < 250 THEN %(now)s END, %(now)s - make_interval(mins => i), %(now)s, u.id
  FROM u, generate_series(0, 299) AS i;

ANALYZE social.inbox_messages, social.schedule_items, social.schedule_subscriptions, social.todos
"""


@dataclass(frozen=True)
class SocialContext:
    user_id: uuid.UUID
    token: str
    users: int
    counts: dict[str, int]


async def load(client: httpx.AsyncClient, database_url: str) -> SocialContext:
    users = await register_users(client, USERS, prefix="social")
    pattern = users[0].email.rsplit("-", 1)[0] + "-%"
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        for statement in (part.strip() for part in GENERATE.split(";\n\n")):
            if statement:
                await connection.execute(statement.rstrip(";"), {"pattern": pattern, "now": NOW})
        await connection.commit()
        counts = {}
        for table in ("inbox_messages", "schedule_items", "schedule_subscriptions", "todos"):
            (counts[table],) = await (await connection.execute(
                f"SELECT count(*) FROM social.{table}")).fetchone()
    check_invariants(database_url)
    me = users[len(users) // 2]
    return SocialContext(user_id=me.id, token=await sign_in(client, me), users=len(users), counts=counts)


def week() -> tuple[datetime, datetime]:
    """A week around now: the window a calendar client asks for."""
    start = NOW - timedelta(days=NOW.weekday())
    return start, start + timedelta(days=7)
