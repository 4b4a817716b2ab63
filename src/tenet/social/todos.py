"""Todos (spec 000 §C.6, §E.2; SOC-INV-16, SOC-INV-17).

Extraction is idempotent by the key (owner, source item, occurrence start): `INSERT .. ON CONFLICT DO NOTHING`
on `uq_todos_extracted_occurrence`, then the existing todos of the conflicting keys are read, whatever their
status (a done or canceled todo of that occurrence counts as extracted). A recurring item's todo is tied to one
occurrence, so each week's meeting gets its own todo (D-17).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import anyio
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.social import errors, items, lifecycles, recurrence
from tenet.social.common import require_active_accounts
from tenet.social.models import ScheduleItem, Todo

MAX_EXTRACTED = 200
MAX_WINDOW = timedelta(days=31)
STATUS_TRANSITIONS = {("pending", "done"): "complete", ("pending", "canceled"): "cancel",
                      ("pending", "archived"): "archive", ("done", "pending"): "reopen",
                      ("canceled", "pending"): "reopen", ("archived", "pending"): "reopen"}


def _refusal(refusal: Refusal[Todo]) -> DomainError:
    if refusal.current is None:
        return errors.TodoNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    return errors.TodoStatusTransitionInvalid(current_status=refusal.status)


async def _check_sources(session: AsyncSession, principal_id: uuid.UUID, source_ids: list[uuid.UUID]) -> list[str]:
    if len(set(source_ids)) != len(source_ids):
        raise errors.ScheduleItemInvalid("source_ids repeats an id")
    seen = await items.viewable(session, source_ids, principal_id)
    missing = [str(i) for i in source_ids if i not in seen]
    if missing:
        raise errors.ScheduleItemNotFound(f"No viewable schedule item {missing[0]}", item_id=missing[0])
    return [str(i) for i in source_ids]


def _check_due(due_at: datetime | None) -> None:
    """A due date is an instant in the supported range: the digest and the listing add to it and compare it."""
    if due_at is not None and not recurrence.in_range(due_at):
        raise errors.ScheduleItemInvalid(f"due_at is an instant with an offset {recurrence.RANGE_TEXT}",
                                         field="due_at")


async def create_todo(session: AsyncSession, *, principal_id: uuid.UUID, title: str, description: str | None,
                      due_at: datetime | None, priority: str, source_ids: list[uuid.UUID], now: datetime) -> Todo:
    _check_due(due_at)
    await require_active_accounts(session, [principal_id])
    sources = await _check_sources(session, principal_id, source_ids)
    todo = Todo(id=uuid.uuid4(), owner_id=principal_id, title=title, description=description, due_at=due_at,
                priority=priority, source_ids=sources, status="pending", version=1, created_at=now, updated_at=now,
                created_by=principal_id)
    session.add(todo)
    await session.flush()
    return todo


async def _own(session: AsyncSession, todo_id: uuid.UUID, principal_id: uuid.UUID) -> Todo:
    todo = await session.get(Todo, todo_id, populate_existing=True)
    if todo is None or todo.owner_id != principal_id:
        raise errors.TodoNotFound()
    return todo


async def update_todo(session: AsyncSession, *, todo_id: uuid.UUID, principal_id: uuid.UUID, changes: dict[str, Any],
                      expected_version: int | None, now: datetime) -> Todo:
    _check_due(changes.get("due_at"))
    todo = await _own(session, todo_id, principal_id)
    values: dict[str, Any] = {k: v for k, v in changes.items() if k in ("title", "description", "due_at", "priority")}
    if "source_ids" in changes:
        values["source_ids"] = await _check_sources(session, principal_id, changes["source_ids"])
        if todo.source_item_id is not None and str(todo.source_item_id) not in values["source_ids"]:
            values["source_ids"].append(str(todo.source_item_id))
    values["updated_at"] = now
    target = changes.get("status", todo.status)
    if target != todo.status:
        name = STATUS_TRANSITIONS.get((todo.status, target))
        if name is None:
            raise errors.TodoStatusTransitionInvalid(current_status=todo.status, requested_status=target)
        values["completed_at"] = now if target == "done" else None
        if target == "pending" and (values.get("source_ids") or todo.source_ids):
            values["source_ids"] = await _live_sources(session, values.get("source_ids") or todo.source_ids)
    else:
        name = None
    if name is None:
        # Same status: a field edit, still conditional on the status (and version) the caller saw.
        return await _edit(session, todo, values, expected_version)
    return await transition(session, lifecycles.TODO, name, model=Todo, id=todo_id, values=values,
                            expected_version=expected_version, refuse=_refusal)


async def _live_sources(session: AsyncSession, source_ids: list[str]) -> list[str]:
    """A todo going back to pending keeps only the sources that still exist (SOC-INV-17: a pending todo is
    never linked only to deleted items; with none left it becomes a todo of its own). The items are
    share-locked first, so an item deletion, which archives the pending todos it orphans under the item's
    lock, runs entirely before or after this."""
    ids = [uuid.UUID(str(source)) for source in source_ids]
    live = {str(item_id) for item_id in await lock_rows(session, ScheduleItem, ids, mode="share")}
    return [source for source in source_ids if str(source) in live]


async def _edit(session: AsyncSession, todo: Todo, values: dict[str, Any], expected_version: int | None) -> Todo:
    conditions = [Todo.id == todo.id, Todo.status == todo.status]
    if expected_version is not None:
        conditions.append(Todo.version == expected_version)
    moved = (await session.scalars(update(Todo).where(*conditions).values(version=Todo.version + 1, **values)
                                   .returning(Todo).execution_options(populate_existing=True,
                                                                      synchronize_session=False))).one_or_none()
    if moved is None:
        current = await session.get(Todo, todo.id, populate_existing=True)
        if current is not None and expected_version is not None and current.version != expected_version:
            raise PreconditionFailed(current_version=current.version)
        raise errors.TodoStatusTransitionInvalid(current_status=current.status if current else None)
    return moved


async def complete(session: AsyncSession, *, todo_id: uuid.UUID, principal_id: uuid.UUID, now: datetime) -> Todo:
    todo = await _own(session, todo_id, principal_id)
    if todo.status == "done":
        return todo
    return await transition(session, lifecycles.TODO, "complete", model=Todo, id=todo_id,
                            values={"completed_at": now, "updated_at": now}, refuse=_refusal)


async def delete_todo(session: AsyncSession, *, todo_id: uuid.UUID, principal_id: uuid.UUID) -> None:
    await _own(session, todo_id, principal_id)
    await (await statements(session)).execute("DELETE FROM social.todos WHERE id = %(id)s", {"id": todo_id})


@dataclass(frozen=True)
class _Source:
    """What the expansion reads of an item: plain values, safe to hand to a worker thread (an ORM object is not)."""
    start_at: datetime
    end_at: datetime
    timezone: str
    recurrence_rule: str | None
    series_end_at: datetime | None


def _occurrence_keys(item: _Source, *, window: tuple[datetime, datetime] | None,
                     now: datetime) -> list[tuple[datetime | None, datetime]]:
    """(occurrence key, due_at) pairs: a single item's key is NULL; a recurring item's the occurrence start.
    Without a window: the single item, or the next occurrence of a series that has not ended."""
    if item.recurrence_rule is None:
        return [(None, item.start_at)]
    in_window = partial(recurrence.occurrences, start_at=item.start_at, end_at=item.end_at, timezone=item.timezone,
                        recurrence_rule=item.recurrence_rule, series_end_at=item.series_end_at)
    if window is None:
        found = in_window(window_from=now, window_to=now + timedelta(days=3660), limit=1)
    else:
        found = [o for o in in_window(window_from=window[0], window_to=window[1], limit=MAX_EXTRACTED + 1)
                 if o.start_at >= window[0]]
    return [(o.start_at, o.start_at) for o in found]


def _all_occurrence_keys(sources: list[_Source], window: tuple[datetime, datetime] | None,
                         now: datetime) -> list[list[tuple[datetime | None, datetime]]]:
    return [_occurrence_keys(source, window=window, now=now) for source in sources]


# Idempotent by (owner, source item, occurrence start): a todo already taken from that occurrence stays the one.
_EXTRACT = """
    INSERT INTO social.todos (id, owner_id, title, description, due_at, priority, source_ids, source_item_id,
                              source_occurrence_start, status, version, created_at, updated_at, created_by)
    VALUES (%(id)s, %(owner_id)s, %(title)s, %(description)s, %(due_at)s, %(priority)s, CAST(%(source_ids)s AS jsonb),
            %(source_item_id)s, %(source_occurrence_start)s, 'pending', 1, %(now)s, %(now)s, %(created_by)s)
    ON CONFLICT (owner_id, source_item_id, source_occurrence_start) WHERE source_item_id IS NOT NULL
    DO NOTHING RETURNING id
"""


async def extract(session: AsyncSession, *, principal_id: uuid.UUID, item_ids: list[uuid.UUID],
                  window: tuple[datetime, datetime] | None, priority: str, now: datetime,
                  created_by: uuid.UUID | None = None) -> tuple[list[Todo], list[uuid.UUID], list[uuid.UUID]]:
    """Todos for the items the owner may view (one unviewable id: 404, nothing written). Answers all the todos
    of the requested occurrences, the ids created now and the ids that already existed."""
    if window is not None and (window[1] <= window[0] or window[1] - window[0] > MAX_WINDOW):
        raise errors.ScheduleWindowInvalid("from < to, at most 31 days apart")
    await require_active_accounts(session, [principal_id])
    ids = list(dict.fromkeys(item_ids))
    seen = await items.viewable(session, ids, principal_id)
    missing = [i for i in ids if i not in seen]
    if missing:
        raise errors.ScheduleItemNotFound(item_id=str(missing[0]))
    loaded = {i.id: i for i in (await session.scalars(select(ScheduleItem).where(ScheduleItem.id.in_(ids)))).all()}
    sources = [_Source(i.start_at, i.end_at, i.timezone, i.recurrence_rule, i.series_end_at)
               for i in (loaded[item_id] for item_id in ids)]
    # Up to 50 series expanded: CPU work, off the event loop.
    keys = await anyio.to_thread.run_sync(_all_occurrence_keys, sources, window, now)
    rows: list[dict[str, Any]] = []
    for item_id, item_keys in zip(ids, keys, strict=True):
        item = loaded[item_id]
        for key, due in item_keys:
            rows.append({"id": uuid.uuid4(), "owner_id": principal_id, "title": item.title,
                         "description": item.description, "due_at": due, "priority": priority,
                         "source_ids": json.dumps([str(item.id)]), "source_item_id": item.id,
                         "source_occurrence_start": key, "now": now, "created_by": created_by})
    if len(rows) > MAX_EXTRACTED:
        raise errors.ExtractLimitExceeded(limit=MAX_EXTRACTED)
    # One round trip for all: PostgreSQL runs the inserts in order, each deciding its conflict on its own.
    made = await (await statements(session)).ones(*((_EXTRACT, row) for row in rows))
    created = [row["id"] for row in made if row is not None]
    todos: list[Todo] = []
    existing: list[uuid.UUID] = []
    for row in rows:
        todo = (await session.scalars(select(Todo).where(
            Todo.owner_id == principal_id, Todo.source_item_id == row["source_item_id"],
            Todo.source_occurrence_start.is_(None) if row["source_occurrence_start"] is None
            else Todo.source_occurrence_start == row["source_occurrence_start"])
            .execution_options(populate_existing=True))).one()
        todos.append(todo)
        if todo.id not in created:
            existing.append(todo.id)
    return todos, created, existing
