"""Routes of friendships: requests and their answers, blocks, unfriending."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Annotated

from fastapi import Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import friends, queries
from tenet.social.api._common import PageDep, own, page, reread, social_router
from tenet.social.schemas import FriendshipCreate, FriendshipRead, FriendshipStatus

router = social_router()


async def _answer(session: AsyncSession, principal_id: uuid.UUID, friendship_id: uuid.UUID) -> FriendshipRead:
    row = await queries.friendship(await reread(session), principal_id=principal_id, friendship_id=friendship_id)
    return FriendshipRead.model_validate(row)


@router.post("/friendships", status_code=status.HTTP_201_CREATED, response_model=FriendshipRead,
             summary="Ask someone to be friends (201); their pending request to you is accepted instead (200)",
             responses=problem_responses(409, 422, 429))
async def request_friendship(body: FriendshipCreate, principal: CurrentUser, session: SessionDep, now: NowDep,
                             settings: SettingsDep, response: Response) -> FriendshipRead:
    social_settings = own(settings)
    friendship, created = await friends.request(
        session, principal_id=principal.id, target_id=body.user_id,
        cooldown=timedelta(days=social_settings.social_friend_request_cooldown_days),
        inbox_limit=social_settings.social_inbox_write_limit, now=now)
    if not created:
        response.status_code = status.HTTP_200_OK
    return await _answer(session, principal.id, friendship.id)


@router.get("/friendships", response_model=Page[FriendshipRead], summary="Your friendships",
            description="`status` filters (default: all); `direction` (incoming / outgoing) by who asked.",
            responses=problem_responses(400, 422))
async def list_friendships(principal: CurrentUser, request: Request, params: PageDep,
                           status_filter: Annotated[FriendshipStatus | None, Query(alias="status")] = None,
                           direction: Annotated[str | None, Query(pattern="^(incoming|outgoing)$")] = None
                           ) -> Response:
    statuses = [status_filter.value] if status_filter else [s.value for s in FriendshipStatus]
    rows, cursor = await queries.friendships(reads(request), principal_id=principal.id, statuses=statuses,
                                             direction=direction, page=params)
    return page(FriendshipRead, rows, cursor)


@router.get("/friendships/{friendship_id}", response_model=FriendshipRead, summary="One of your friendships")
async def get_friendship(friendship_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.friendship(reads(request), principal_id=principal.id, friendship_id=friendship_id)
    return json_response(FriendshipRead.model_validate(row))


def _friendship_action(action: str) -> Callable[..., Awaitable[FriendshipRead]]:
    async def handler(friendship_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                      now: NowDep) -> FriendshipRead:
        await friends.act(session, friendship_id=friendship_id, principal_id=principal.id, action=action, now=now)
        return await _answer(session, principal.id, friendship_id)

    handler.__name__ = f"{action}_friendship"
    return handler


for _action in ("accept", "decline", "cancel", "block", "unblock"):
    router.post(f"/friendships/{{friendship_id}}/{_action}", response_model=FriendshipRead,
                summary=f"{_action.capitalize()} a friendship", responses=problem_responses(409))(
        _friendship_action(_action))


@router.post("/friendships/blocks", response_model=FriendshipRead,
             summary="Block a person (whether or not you have a friendship with them)",
             responses=problem_responses(409, 422))
async def block_person(body: FriendshipCreate, principal: CurrentUser, session: SessionDep,
                       now: NowDep) -> FriendshipRead:
    friendship = await friends.block_person(session, principal_id=principal.id, target_id=body.user_id, now=now)
    return await _answer(session, principal.id, friendship.id)


@router.delete("/friendships/{friendship_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Unfriend",
               responses=problem_responses(409))
async def unfriend(friendship_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await friends.act(session, friendship_id=friendship_id, principal_id=principal.id, action="unfriend", now=now)
