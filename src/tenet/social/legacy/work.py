"""Legacy groups, members, schedule items and todos into their social rows, through the social services (owners
act as themselves: a row the owner could not make in Tenet is refused, with the service's code)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError
from tenet.kernel.statements import statements
from tenet.social import groups, items, todos
from tenet.social.legacy.engine import Context, Refused, mapped_id, require_mapped
from tenet.social.legacy.people import clean_text, loose_boolean


def _required_text(ctx: Context, row: dict[str, Any], column: str, limit: int, what: str) -> str:
    text = clean_text(row.get(column), limit)
    if text is None:
        raise Refused(f"{what.upper()}_MISSING", f"the {what} is empty")
    if len(clean_text(row.get(column), limit + 1) or "") > limit:
        ctx.note("VALUE_SHORTENED", f"the {what} was cut to {limit} characters")
    return text


async def group_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> uuid.UUID:
    owner = await require_mapped(session, "users", row.get("owner_id"), "user")
    name = _required_text(ctx, row, "name", 200, "name")
    visibility = "public" if loose_boolean(row.get("is_public")) else "private"
    if mapped is None:
        group = await groups.create_group(session, principal_id=owner, name=name,
                                          description=clean_text(row.get("description"), 2000), visibility=visibility,
                                          creation_limit=None, now=ctx.now)
        mapped = group.id
    else:
        await groups.update_group(session, group_id=mapped, principal_id=owner,
                                  changes={"name": name, "visibility": visibility}, expected_version=None, now=ctx.now)
    status = await (await statements(session)).value("SELECT status FROM social.groups WHERE id = %(id)s",
                                                      {"id": mapped})
    archived = bool(loose_boolean(row.get("archived")))
    if archived != (status == "archived"):
        await groups.archive_group(session, group_id=mapped, principal_id=None, now=ctx.now, unarchive=not archived)
    return mapped


async def group_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    """Groups are never deleted in Tenet: a legacy deletion archives the group."""
    if mapped is not None:
        status = await (await statements(session)).value("SELECT status FROM social.groups WHERE id = %(id)s",
                                                          {"id": mapped})
        if status == "active":
            await groups.archive_group(session, group_id=mapped, principal_id=None, now=ctx.now)


_INSERT_MEMBER = """
    INSERT INTO social.group_members (id, group_id, user_id, role, join_source, joined_at, status, version,
                                      created_at, updated_at, created_by, updated_by)
    SELECT %(id)s, g.id, %(u)s, %(role)s, 'joined', coalesce(%(joined)s, %(now)s), 'active', 1, %(now)s, %(now)s,
           %(u)s, %(u)s
      FROM social.groups g WHERE g.id = %(g)s AND g.status = 'active'
    ON CONFLICT (group_id, user_id) DO NOTHING RETURNING id"""
ROLES = {"owner": "creator", "creator": "creator", "admin": "admin", "administrator": "admin", "member": "member"}


async def member_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any],
                        mapped: uuid.UUID | None) -> uuid.UUID:
    group_id = await require_mapped(session, "groups", row.get("group_id"), "group")
    user_id = await require_mapped(session, "users", row.get("user_id"), "user")
    role = ROLES.get(str(row.get("role") or "member").strip().lower())
    if role is None:
        ctx.note("VALUE_DROPPED", f"role {row.get('role')!r} is unknown: the person is a member")
        role = "member"
    run = await statements(session)
    if mapped is not None:
        return await _mirror_role(session, ctx, mapped, role)
    if role == "creator":
        creator = await run.one("SELECT m.id FROM social.group_members m JOIN social.groups g ON g.id = m.group_id "
                                "WHERE m.group_id = %(g)s AND m.user_id = %(u)s AND m.role = 'creator' "
                                "AND g.owner_id = %(u)s", {"g": group_id, "u": user_id})
        if creator is None:
            raise Refused("SECOND_OWNER", "the legacy group names another owner: a group has exactly one creator")
        return creator["id"]
    made = await run.one(_INSERT_MEMBER, {"id": uuid.uuid4(), "g": group_id, "u": user_id, "role": role,
                                          "joined": row.get("joined_at"), "now": ctx.now})
    if made is None:
        raise Refused("ALREADY_GROUP_MEMBER", "the person is already in the group, or the group is archived")
    return made["id"]


_MEMBER = "SELECT group_id, user_id, role, status FROM social.group_members WHERE id = %(id)s"


async def _mirror_role(session: AsyncSession, ctx: Context, mapped: uuid.UUID, role: str) -> uuid.UUID:
    """A role the old app changed (admin / member), set in Tenet as the system; the creator changes only by a
    hand-over in Tenet (a difference)."""
    member = await (await statements(session)).one(_MEMBER, {"id": mapped})
    if member is None or member["status"] == "removed" or member["role"] == role:
        return mapped
    try:
        await groups.mirror_member(session, group_id=member["group_id"], user_id=member["user_id"], role=role,
                                   now=ctx.now)
    except DomainError as exc:
        raise Refused("NOT_MIRRORED", f"the legacy role {role} is not mirrored: {exc.detail}") from None
    return mapped


async def member_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    """A membership the old app deleted: the member is removed in Tenet as the system (never the creator: a
    difference, the group hands over in Tenet first)."""
    if mapped is None:
        return
    member = await (await statements(session)).one(_MEMBER, {"id": mapped})
    if member is None or member["status"] == "removed":
        return
    try:
        await groups.mirror_member(session, group_id=member["group_id"], user_id=member["user_id"], role=None,
                                   now=ctx.now)
    except DomainError as exc:
        raise Refused("NOT_MIRRORED", f"a legacy membership was deleted: {exc.detail}") from None


def instant(row: dict[str, Any], column: str, *, required: bool = True) -> datetime | None:
    """A legacy time (a datetime, or its ISO text from the change log's JSON)."""
    value = row.get(column)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise Refused("TIME_INVALID", f"{column} {value!r} is not a time") from None
    if value is None and not required:
        return None
    if not isinstance(value, datetime):
        raise Refused("SCHEDULE_ITEM_INVALID", f"{column} is missing")
    return value


async def item_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> uuid.UUID:
    owner = await require_mapped(session, "users", row.get("owner_id"), "user")
    fields: dict[str, Any] = {"title": _required_text(ctx, row, "title", 200, "title"),
                              "description": clean_text(row.get("notes"), 10000),
                              "start_at": instant(row, "starts_at"), "end_at": instant(row, "ends_at")}
    zone = clean_text(row.get("tz"), 64)
    if mapped is None:
        item = await items.create_item(session, principal_id=owner, **fields, timezone=zone, recurrence_rule=None,
                                       source_type="imported", status="active", now=ctx.now,
                                       default_timezone=ctx.default_timezone)
        return item.id
    changes = {**fields, **({"timezone": zone} if zone else {})}
    await items.update_item(session, item_id=mapped, principal_id=owner, changes=changes, expected_version=None,
                            if_match=False, now=ctx.now)
    return mapped


async def item_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    if mapped is None:
        return
    owner = await (await statements(session)).value("SELECT owner_id FROM social.schedule_items WHERE id = %(id)s",
                                                     {"id": mapped})
    if owner is not None:
        await items.delete_item(session, item_id=mapped, principal_id=owner, now=ctx.now)


async def todo_upsert(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> uuid.UUID:
    owner = await require_mapped(session, "users", row.get("user_id"), "user")
    title = _required_text(ctx, row, "title", 200, "title")
    due = instant(row, "due_at", required=False)
    status = "done" if loose_boolean(row.get("done")) else "pending"
    if mapped is None:
        sources: list[uuid.UUID] = []
        if row.get("item_id") is not None:
            item = await mapped_id(session, "schedule_items", row["item_id"])
            if item is None:
                ctx.note("SOURCE_DROPPED", f"legacy item {row['item_id']} has no Tenet item: the todo has no source")
            else:
                sources = [item]
        todo = await todos.create_todo(session, principal_id=owner, title=title, description=None, due_at=due,
                                       priority="medium", source_ids=sources, now=ctx.now)
        if status == "done":
            await todos.complete(session, todo_id=todo.id, principal_id=owner, now=ctx.now)
        return todo.id
    await todos.update_todo(session, todo_id=mapped, principal_id=owner,
                            changes={"title": title, "due_at": due, "status": status}, expected_version=None,
                            now=ctx.now)
    return mapped


async def todo_remove(session: AsyncSession, ctx: Context, row: dict[str, Any], mapped: uuid.UUID | None) -> None:
    if mapped is None:
        return
    owner = await (await statements(session)).value("SELECT owner_id FROM social.todos WHERE id = %(id)s",
                                                     {"id": mapped})
    if owner is not None:
        await todos.delete_todo(session, todo_id=mapped, principal_id=owner)
