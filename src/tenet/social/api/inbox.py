"""Routes of the inbox: messages, their summary, and the answers to requests and offers."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Query, Request, Response

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.errors import ValidationFailed
from tenet.kernel.http import json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import inbox, queries
from tenet.social.api._common import PageDep, own, page, reread, social_router
from tenet.social.schemas import InboxActionRead, InboxMessageRead, InboxSummary, MessageStatus, MessageType

router = social_router()


@router.get("/inbox", response_model=Page[InboxMessageRead], summary="Your inbox, newest first",
            description="`status`: one or a comma-separated list (default: all).",
            responses=problem_responses(400, 422))
async def list_inbox(principal: CurrentUser, request: Request, params: PageDep,
                     status_filter: Annotated[str | None, Query(alias="status", max_length=100)] = None,
                     message_type: Annotated[MessageType | None, Query()] = None) -> Response:
    statuses = None
    if status_filter:
        statuses = [s.strip() for s in status_filter.split(",") if s.strip()]
        known = {s.value for s in MessageStatus}
        if not statuses or not set(statuses) <= known:
            raise ValidationFailed(f"status: one or more of {', '.join(sorted(known))}")
    rows, cursor = await queries.inbox(reads(request), principal_id=principal.id, statuses=statuses,
                                       message_type=message_type.value if message_type else None, page=params)
    return page(InboxMessageRead, rows, cursor)


@router.get("/inbox/summary", response_model=InboxSummary, summary="How many messages wait for you")
async def inbox_summary(principal: CurrentUser, request: Request) -> Response:
    return json_response(InboxSummary(pending_count=await queries.pending_count(reads(request),
                                                                                principal_id=principal.id)))


@router.get("/inbox/{message_id}", response_model=InboxMessageRead, summary="One of your messages")
async def get_message(message_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.message(reads(request), principal_id=principal.id, message_id=message_id)
    return json_response(InboxMessageRead.model_validate(row))


@router.post("/inbox/{message_id}/read", response_model=InboxMessageRead, summary="Mark a message read",
             responses=problem_responses(409))
async def read_message(message_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep
                       ) -> InboxMessageRead:
    await inbox.read(session, message_id=message_id, principal_id=principal.id, now=now)
    row = await queries.message(await reread(session), principal_id=principal.id, message_id=message_id)
    return InboxMessageRead.model_validate(row)


@router.post("/inbox/{message_id}/dismiss", response_model=InboxMessageRead,
             summary="Dismiss an informational message (requests and offers are answered instead)",
             responses=problem_responses(409))
async def dismiss_message(message_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep
                          ) -> InboxMessageRead:
    await inbox.dismiss(session, message_id=message_id, principal_id=principal.id, now=now)
    row = await queries.message(await reread(session), principal_id=principal.id, message_id=message_id)
    return InboxMessageRead.model_validate(row)


def _answer(accept: bool) -> Callable[..., Awaitable[InboxActionRead]]:
    async def handler(message_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep,
                      settings: SettingsDep) -> InboxActionRead:
        _, effect = await inbox.answer(session, message_id=message_id, principal_id=principal.id, accept=accept,
                                       max_members=own(settings).social_group_max_members, now=now)
        row = await queries.message(await reread(session), principal_id=principal.id, message_id=message_id)
        return InboxActionRead.model_validate({**row, "effect": effect})

    handler.__name__ = "accept_message" if accept else "reject_message"
    return handler


router.post("/inbox/{message_id}/accept", response_model=InboxActionRead,
            summary="Accept: the friendship, the group membership or the subscription happens with it",
            responses=problem_responses(409))(_answer(True))
router.post("/inbox/{message_id}/reject", response_model=InboxActionRead, summary="Reject a request or offer",
            responses=problem_responses(409))(_answer(False))
