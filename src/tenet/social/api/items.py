"""Routes of schedule items, their occurrences and their subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime
from functools import partial
from typing import Annotated

import anyio
from fastapi import Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import errors, items, queries, recurrence
from tenet.social.api._common import (
    IfMatch,
    PageDep,
    default_zone,
    own,
    page,
    reread,
    social_router,
    values_of,
    window,
)
from tenet.social.schemas import (
    ItemCreate,
    ItemStatus,
    ItemUpdate,
    OccurrenceRead,
    ScheduleItemRead,
    ScheduleSubscriptionRead,
    SubscriptionCreate,
    SubscriptionUpdate,
)

router = social_router()


async def _answer(session: AsyncSession, principal_id: uuid.UUID, item_id: uuid.UUID) -> ScheduleItemRead:
    return ScheduleItemRead.model_validate(await queries.item(await reread(session), principal_id=principal_id,
                                                              item_id=item_id))


async def _subscription(session: AsyncSession, principal_id: uuid.UUID, item_id: uuid.UUID,
                        subscription_id: uuid.UUID) -> ScheduleSubscriptionRead:
    row = await queries.subscription(await reread(session), principal_id=principal_id, item_id=item_id,
                                     subscription_id=subscription_id)
    return ScheduleSubscriptionRead.model_validate(row)


@router.post("/schedule-items", status_code=status.HTTP_201_CREATED, response_model=ScheduleItemRead,
             summary="Create a schedule item you own", responses=problem_responses(422))
async def create_item(body: ItemCreate, principal: CurrentUser, session: SessionDep, now: NowDep,
                      request: Request) -> ScheduleItemRead:
    item = await items.create_item(session, principal_id=principal.id, title=body.title, description=body.description,
                                   start_at=body.start_at, end_at=body.end_at, timezone=body.timezone,
                                   default_timezone=default_zone(request), recurrence_rule=body.recurrence_rule,
                                   source_type=body.source_type.value, status=body.status.value, now=now)
    return await _answer(session, principal.id, item.id)


@router.get("/schedule-items", response_model=Page[ScheduleItemRead],
            summary="Items you own or are subscribed to (directly or through a group), by start",
            description="With `from` and `to` (at most 400 days apart) only items with an occurrence that may "
                        "overlap the window; a recurring series is listed once (its occurrences: "
                        "`/schedule-items/{id}/occurrences`).",
            responses=problem_responses(400, 422))
async def list_items(principal: CurrentUser, request: Request, params: PageDep,
                     window_from: Annotated[datetime | None, Query(alias="from")] = None,
                     window_to: Annotated[datetime | None, Query(alias="to")] = None,
                     scope: Annotated[str, Query(pattern="^(owned|subscribed|all)$")] = "all",
                     status_filter: Annotated[ItemStatus | None, Query(alias="status")] = None) -> Response:
    start, end = window(window_from, window_to)
    rows, cursor = await queries.window(reads(request), principal_id=principal.id, window_from=start, window_to=end,
                                        scope=scope, status=status_filter.value if status_filter else None,
                                        page=params)
    return page(ScheduleItemRead, rows, cursor)


@router.get("/schedule-items/{item_id}", response_model=ScheduleItemRead, summary="An item you may view")
async def get_item(item_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.item(reads(request), principal_id=principal.id, item_id=item_id)
    return json_response(ScheduleItemRead.model_validate(row), headers={"ETag": etag(row["version"])})


@router.patch("/schedule-items/{item_id}", response_model=ScheduleItemRead, summary="Change an item (edit)",
              responses=problem_responses(409, 412, 422))
async def patch_item(item_id: uuid.UUID, body: ItemUpdate, principal: CurrentUser, session: SessionDep,
                     now: NowDep, if_match: IfMatch = None) -> ScheduleItemRead:
    changes = body.model_dump(exclude_unset=True)
    for name in ("title", "start_at", "end_at", "timezone", "source_type", "status"):
        if name in changes and changes[name] is None:
            raise errors.ScheduleItemInvalid(f"{name} cannot be null")
    await items.update_item(session, item_id=item_id, principal_id=principal.id, changes=values_of(changes),
                            expected_version=if_match_version(if_match), if_match=True, now=now)
    return await _answer(session, principal.id, item_id)


@router.delete("/schedule-items/{item_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete an item (owner): subscriptions go, todos taken from it are archived")
async def delete_item(item_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await items.delete_item(session, item_id=item_id, principal_id=principal.id, now=now)


@router.get("/schedule-items/{item_id}/occurrences", response_model=Page[OccurrenceRead],
            summary="The item's occurrences in a window (DST-correct in the item's time zone)",
            responses=problem_responses(422))
async def list_occurrences(item_id: uuid.UUID, principal: CurrentUser, request: Request,
                           window_from: Annotated[datetime, Query(alias="from")],
                           window_to: Annotated[datetime, Query(alias="to")],
                           limit: Annotated[int, Query(ge=1, le=200)] = 200) -> Response:
    start, end = window(window_from, window_to)
    row = await queries.item(reads(request), principal_id=principal.id, item_id=item_id)
    found = await anyio.to_thread.run_sync(partial(
        recurrence.occurrences, start_at=row["start_at"], end_at=row["end_at"], timezone=row["timezone"],
        recurrence_rule=row["recurrence_rule"], series_end_at=row["series_end_at"], window_from=start, window_to=end,
        limit=limit))
    return json_response(Page[OccurrenceRead](items=[OccurrenceRead(item_id=item_id, **o.__dict__) for o in found],
                                              next_cursor=None))


@router.get("/schedule-items/{item_id}/subscriptions", response_model=Page[ScheduleSubscriptionRead],
            summary="Who is subscribed (pending offers: editors only)")
async def list_subscriptions(item_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    rows = await queries.subscriptions(reads(request), principal_id=principal.id, item_id=item_id)
    return page(ScheduleSubscriptionRead, rows, None)


@router.post("/schedule-items/{item_id}/subscriptions", status_code=status.HTTP_201_CREATED,
             response_model=ScheduleSubscriptionRead,
             summary="Offer the item to a person (pending until they accept in their inbox) or share it with a "
                     "group you are in (active at once)", responses=problem_responses(409, 422, 429))
async def share_item(item_id: uuid.UUID, body: SubscriptionCreate, principal: CurrentUser, session: SessionDep,
                     now: NowDep, settings: SettingsDep) -> ScheduleSubscriptionRead:
    subscription = await items.share(
        session, item_id=item_id, principal_id=principal.id, subject_type=body.subject_type.value,
        subject_id=body.subject_id, permission=[p.value for p in body.permission] if body.permission else None,
        notify_level=body.notify_level.value, inbox_limit=own(settings).social_inbox_write_limit, now=now)
    return await _subscription(session, principal.id, item_id, subscription.id)


@router.patch("/schedule-items/{item_id}/subscriptions/{subscription_id}", response_model=ScheduleSubscriptionRead,
              summary="Change a subscription's permission (edit) or notify level; pause or resume your own",
              responses=problem_responses(409, 422))
async def patch_subscription(item_id: uuid.UUID, subscription_id: uuid.UUID, body: SubscriptionUpdate,
                             principal: CurrentUser, session: SessionDep, now: NowDep) -> ScheduleSubscriptionRead:
    await items.update_subscription(
        session, item_id=item_id, subscription_id=subscription_id, principal_id=principal.id,
        permission=[p.value for p in body.permission] if body.permission is not None else None,
        notify_level=body.notify_level.value if body.notify_level else None,
        status=body.status.value if body.status else None, now=now)
    return await _subscription(session, principal.id, item_id, subscription_id)


@router.delete("/schedule-items/{item_id}/subscriptions/{subscription_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Unsubscribe, revoke (edit) or withdraw an offer")
async def delete_subscription(item_id: uuid.UUID, subscription_id: uuid.UUID, principal: CurrentUser,
                              session: SessionDep, now: NowDep) -> None:
    await items.delete_subscription(session, item_id=item_id, subscription_id=subscription_id,
                                    principal_id=principal.id, now=now)
