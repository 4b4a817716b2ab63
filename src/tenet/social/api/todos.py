"""Routes of todos: yours, and those taken from schedule items."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import errors, queries, todos
from tenet.social.api._common import IfMatch, PageDep, page, reread, social_router, values_of, window
from tenet.social.schemas import TodoCreate, TodoExtract, TodoExtracted, TodoRead, TodoStatus, TodoUpdate

router = social_router()


async def _answer(session: AsyncSession, principal_id: uuid.UUID, todo_id: uuid.UUID) -> TodoRead:
    return TodoRead.model_validate(await queries.todo(await reread(session), principal_id=principal_id,
                                                      todo_id=todo_id))


@router.post("/todos", status_code=status.HTTP_201_CREATED, response_model=TodoRead, summary="Create a todo",
             responses=problem_responses(422))
async def create_todo(body: TodoCreate, principal: CurrentUser, session: SessionDep, now: NowDep) -> TodoRead:
    todo = await todos.create_todo(session, principal_id=principal.id, title=body.title, description=body.description,
                                   due_at=body.due_at, priority=body.priority.value, source_ids=body.source_ids,
                                   now=now)
    return await _answer(session, principal.id, todo.id)


@router.get("/todos", response_model=Page[TodoRead], summary="Your todos",
            description="`status=pending` lists by due date (todos without one last), optionally only those due "
                        "before `due_before`; otherwise newest first.", responses=problem_responses(400, 422))
async def list_todos(principal: CurrentUser, request: Request, params: PageDep,
                     status_filter: Annotated[TodoStatus | None, Query(alias="status")] = None,
                     due_before: Annotated[datetime | None, Query()] = None) -> Response:
    if due_before is not None and (status_filter != TodoStatus.PENDING or due_before.tzinfo is None):
        raise errors.ScheduleWindowInvalid("due_before needs status=pending and a time zone offset")
    rows, cursor = await queries.todos(reads(request), principal_id=principal.id,
                                       status=status_filter.value if status_filter else None, due_before=due_before,
                                       page=params)
    return page(TodoRead, rows, cursor)


@router.post("/todos/extract", response_model=TodoExtracted,
             summary="Todos from items you may view (one per occurrence; never twice)",
             description="Without a window: a single item's todo, or a series' next occurrence that has not "
                         "ended; with `from`/`to` (at most 31 days): every occurrence starting in it.",
             responses=problem_responses(422))
async def extract_todos(body: TodoExtract, principal: CurrentUser, session: SessionDep,
                        now: NowDep) -> TodoExtracted:
    span = None
    if body.from_ is not None or body.to is not None:
        span = window(body.from_, body.to, todos.MAX_WINDOW)
    found, created, existing = await todos.extract(session, principal_id=principal.id, item_ids=body.schedule_item_ids,
                                                   window=span, priority=body.priority.value, now=now)
    rows = await queries.todos_by_id(await reread(session), principal_id=principal.id,
                                     todo_ids=[todo.id for todo in found])
    return TodoExtracted(items=[TodoRead.model_validate(r) for r in rows], created_ids=created,
                         existing_ids=existing)


@router.get("/todos/{todo_id}", response_model=TodoRead, summary="One of your todos")
async def get_todo(todo_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.todo(reads(request), principal_id=principal.id, todo_id=todo_id)
    return json_response(TodoRead.model_validate(row), headers={"ETag": etag(row["version"])})


@router.patch("/todos/{todo_id}", response_model=TodoRead, summary="Change a todo (status included)",
              responses=problem_responses(409, 412, 422))
async def patch_todo(todo_id: uuid.UUID, body: TodoUpdate, principal: CurrentUser, session: SessionDep,
                     now: NowDep, if_match: IfMatch = None) -> TodoRead:
    changes = values_of(body.model_dump(exclude_unset=True))
    for name in ("title", "priority", "status", "source_ids"):
        if name in changes and changes[name] is None:
            raise errors.ScheduleItemInvalid(f"{name} cannot be null")
    await todos.update_todo(session, todo_id=todo_id, principal_id=principal.id, changes=changes,
                            expected_version=if_match_version(if_match), now=now)
    return await _answer(session, principal.id, todo_id)


@router.post("/todos/{todo_id}/complete", response_model=TodoRead, summary="Mark done (again: unchanged)",
             responses=problem_responses(409))
async def complete_todo(todo_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep) -> TodoRead:
    await todos.complete(session, todo_id=todo_id, principal_id=principal.id, now=now)
    return await _answer(session, principal.id, todo_id)


@router.delete("/todos/{todo_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete one of your todos")
async def delete_todo(todo_id: uuid.UUID, principal: CurrentUser, session: SessionDep) -> None:
    await todos.delete_todo(session, todo_id=todo_id, principal_id=principal.id)
