"""Which handler applies a change of which legacy table (schema.SOURCES, same names)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.social.legacy import people, shares, work
from tenet.social.legacy.engine import Context

Upsert = Callable[[AsyncSession, Context, dict[str, Any], uuid.UUID | None], Awaitable[uuid.UUID]]
Remove = Callable[[AsyncSession, Context, dict[str, Any], uuid.UUID | None], Awaitable[None]]


@dataclass(frozen=True)
class Handler:
    upsert: Upsert  # insert when unmapped, else bring the mapped row in line; answers the new id
    remove: Remove
    unmap_on_delete: bool = True  # False where the Tenet row outlives the legacy one (archived groups)


HANDLERS: dict[str, Handler] = {
    "users": Handler(people.user_upsert, people.user_remove),
    "user_profiles": Handler(people.profile_upsert, people.profile_remove),
    "friend_requests": Handler(people.friendship_upsert, people.friendship_remove, unmap_on_delete=False),
    "groups": Handler(work.group_upsert, work.group_remove, unmap_on_delete=False),
    "group_members": Handler(work.member_upsert, work.member_remove),
    "schedule_items": Handler(work.item_upsert, work.item_remove),
    "item_shares": Handler(shares.share_upsert, shares.share_remove, unmap_on_delete=False),
    "todos": Handler(work.todo_upsert, work.todo_remove),
}
