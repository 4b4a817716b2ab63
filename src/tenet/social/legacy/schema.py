"""The assumed legacy schema of the old social app (docs/legacy-social.md): which tables a back-fill reads, in
dependency order, with the columns it needs and the ones it can do without.

Spec 000 names the entities, not the old shape, so the tools never trust it: `probe` compares this with
information_schema and a source whose table or required columns are missing is skipped with a line saying so.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql


@dataclass(frozen=True)
class Source:
    table: str
    key: str  # the legacy primary key (bigint): the checkpoint and the mapping are by it
    required: tuple[str, ...]
    optional: tuple[str, ...]
    target: str  # what it becomes in Tenet
    needs: tuple[str, ...] = ()  # sources whose mapping its rows refer to


SOURCES: tuple[Source, ...] = (
    Source("users", "id", ("id", "email"), ("name", "created_at", "is_deleted"), "iam.user_account (+ profile, agent)"),
    Source("user_profiles", "user_id", ("user_id",),
           ("nickname", "bio", "avatar", "theme", "lang", "tz", "notify", "allow_friend_requests"),
           "social.profiles (username, bio, avatar_url, settings)", ("users",)),
    Source("friend_requests", "id", ("id", "from_user_id", "to_user_id", "status"), ("created_at", "responded_at"),
           "social.friendships (+ the request in the inbox while pending)", ("users",)),
    Source("groups", "id", ("id", "name", "owner_id"), ("description", "is_public", "archived", "created_at"),
           "social.groups (+ the creator member)", ("users",)),
    Source("group_members", "id", ("id", "group_id", "user_id"), ("role", "joined_at"), "social.group_members",
           ("groups", "users")),
    Source("schedule_items", "id", ("id", "owner_id", "title", "starts_at", "ends_at"), ("notes", "tz", "created_at"),
           "social.schedule_items", ("users",)),
    Source("item_shares", "id", ("id", "item_id", "user_id"), ("can_edit", "created_at"),
           "social.schedule_subscriptions (accepted user subscriptions)", ("schedule_items", "users")),
    Source("todos", "id", ("id", "user_id", "title"), ("done", "due_at", "item_id", "created_at"), "social.todos",
           ("users", "schedule_items")),
)
BY_TABLE = {source.table: source for source in SOURCES}
DEFAULT_SCHEMA = "legacy"

# The generator's DDL: the old app's shape as docs/legacy-social.md writes it down (loose text columns for the
# settings, no foreign keys, no checks: the dirt a back-fill must survive is allowed here).
DDL = """
CREATE TABLE {s}.users (id bigserial PRIMARY KEY, email text, name text, created_at timestamptz DEFAULT now(),
                        is_deleted boolean DEFAULT false);
CREATE TABLE {s}.user_profiles (user_id bigint PRIMARY KEY, nickname text, bio text, avatar text, theme text,
                                lang text, tz text, notify text, allow_friend_requests text);
CREATE TABLE {s}.friend_requests (id bigserial PRIMARY KEY, from_user_id bigint, to_user_id bigint, status text,
                                  created_at timestamptz DEFAULT now(), responded_at timestamptz);
CREATE TABLE {s}.groups (id bigserial PRIMARY KEY, name text, description text, owner_id bigint,
                         is_public smallint DEFAULT 0, archived boolean DEFAULT false,
                         created_at timestamptz DEFAULT now());
CREATE TABLE {s}.group_members (id bigserial PRIMARY KEY, group_id bigint, user_id bigint, role text,
                                joined_at timestamptz DEFAULT now());
CREATE TABLE {s}.schedule_items (id bigserial PRIMARY KEY, owner_id bigint, title text, notes text,
                                 starts_at timestamptz, ends_at timestamptz, tz text,
                                 created_at timestamptz DEFAULT now());
CREATE TABLE {s}.item_shares (id bigserial PRIMARY KEY, item_id bigint, user_id bigint, can_edit boolean,
                              created_at timestamptz DEFAULT now());
CREATE TABLE {s}.todos (id bigserial PRIMARY KEY, user_id bigint, title text, done boolean DEFAULT false,
                        due_at timestamptz, item_id bigint, created_at timestamptz DEFAULT now());
"""


def qualified(schema: str, table: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))


async def columns_present(connection: psycopg.AsyncConnection, schema: str) -> dict[str, set[str]]:
    """table -> its columns, for the tables of `schema` that exist (information_schema, as the spec's risk
    table asks: "先做 schema 探测脚本")."""
    cursor = await connection.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %(s)s", {"s": schema})
    found: dict[str, set[str]] = {}
    for table, column in await cursor.fetchall():
        found.setdefault(table, set()).add(column)
    return found
