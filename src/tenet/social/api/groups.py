"""Routes of groups: the group, its members and its invitations."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import groups, queries
from tenet.social.api._common import IfMatch, PageDep, null_field, own, page, reread, social_router, values_of
from tenet.social.schemas import (
    GroupCreate,
    GroupInvitationRead,
    GroupInvite,
    GroupMemberRead,
    GroupRead,
    GroupUpdate,
    MemberUpdate,
)

router = social_router()


async def _answer(session: AsyncSession, principal_id: uuid.UUID, group_id: uuid.UUID) -> GroupRead:
    return GroupRead.model_validate(await queries.group(await reread(session), principal_id=principal_id,
                                                        group_id=group_id))


async def _member(session: AsyncSession, principal_id: uuid.UUID, group_id: uuid.UUID,
                  user_id: uuid.UUID) -> GroupMemberRead:
    return GroupMemberRead.model_validate(await queries.member(await reread(session), principal_id=principal_id,
                                                               group_id=group_id, user_id=user_id))


@router.post("/groups", status_code=status.HTTP_201_CREATED, response_model=GroupRead,
             summary="Create a group; you are its creator", responses=problem_responses(422, 429))
async def create_group(body: GroupCreate, principal: CurrentUser, session: SessionDep, now: NowDep,
                       settings: SettingsDep) -> GroupRead:
    group = await groups.create_group(session, principal_id=principal.id, name=body.name, description=body.description,
                                      visibility=body.visibility.value,
                                      creation_limit=own(settings).social_group_creation_limit, now=now)
    return await _answer(session, principal.id, group.id)


@router.get("/groups", response_model=Page[GroupRead], summary="Your groups, or the public ones",
            responses=problem_responses(400, 422))
async def list_groups(principal: CurrentUser, request: Request, params: PageDep,
                      scope: Annotated[str, Query(pattern="^(mine|public)$")] = "mine") -> Response:
    rows, cursor = await queries.groups(reads(request), principal_id=principal.id, scope=scope, page=params)
    return page(GroupRead, rows, cursor)


@router.get("/groups/{group_id}", response_model=GroupRead, summary="A group you belong to, or a public one")
async def get_group(group_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    group = GroupRead.model_validate(await queries.group(reads(request), principal_id=principal.id,
                                                         group_id=group_id))
    return json_response(group, headers={"ETag": etag(group.version)})


@router.patch("/groups/{group_id}", response_model=GroupRead, summary="Rename, describe, change visibility",
              responses=problem_responses(409, 412, 422))
async def patch_group(group_id: uuid.UUID, body: GroupUpdate, principal: CurrentUser, session: SessionDep,
                      now: NowDep, if_match: IfMatch = None) -> GroupRead:
    changes = values_of(body.model_dump(exclude_unset=True))
    if changes.get("name", "") is None or changes.get("visibility", "") is None:
        raise null_field()
    await groups.update_group(session, group_id=group_id, principal_id=principal.id, changes=changes,
                              expected_version=if_match_version(if_match), now=now)
    return await _answer(session, principal.id, group_id)


@router.post("/groups/{group_id}/archive", response_model=GroupRead, summary="Archive the group (creator)",
             responses=problem_responses(409))
async def archive_group(group_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep) -> GroupRead:
    await groups.archive_group(session, group_id=group_id, principal_id=principal.id, now=now)
    return await _answer(session, principal.id, group_id)


@router.post("/groups/{group_id}/unarchive", response_model=GroupRead, summary="Unarchive the group (creator)",
             responses=problem_responses(409))
async def unarchive_group(group_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                          now: NowDep) -> GroupRead:
    await groups.archive_group(session, group_id=group_id, principal_id=principal.id, now=now, unarchive=True)
    return await _answer(session, principal.id, group_id)


@router.post("/groups/{group_id}/join", response_model=GroupMemberRead, summary="Join a public group",
             responses=problem_responses(409))
async def join_group(group_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep,
                     settings: SettingsDep) -> GroupMemberRead:
    await groups.join(session, group_id=group_id, principal_id=principal.id,
                      max_members=own(settings).social_group_max_members, now=now)
    return await _member(session, principal.id, group_id, principal.id)


@router.get("/groups/{group_id}/members", response_model=Page[GroupMemberRead],
            summary="Current members, in the order they joined (members only)", responses=problem_responses(400))
async def list_members(group_id: uuid.UUID, principal: CurrentUser, request: Request, params: PageDep) -> Response:
    rows, cursor = await queries.members(reads(request), principal_id=principal.id, group_id=group_id, page=params)
    return page(GroupMemberRead, rows, cursor)


@router.post("/groups/{group_id}/invitations", status_code=status.HTTP_201_CREATED,
             response_model=GroupInvitationRead, summary="Invite a friend (creator and admins)",
             responses=problem_responses(409, 422, 429))
async def invite(group_id: uuid.UUID, body: GroupInvite, principal: CurrentUser, session: SessionDep, now: NowDep,
                 settings: SettingsDep) -> GroupInvitationRead:
    social_settings = own(settings)
    message = await groups.invite(session, group_id=group_id, principal_id=principal.id, user_id=body.user_id,
                                  inbox_limit=social_settings.social_inbox_write_limit,
                                  max_members=social_settings.social_group_max_members, now=now)
    row = await queries.invitation(await reread(session), principal_id=principal.id, group_id=group_id,
                                   invitation_id=message.id)
    return GroupInvitationRead.model_validate(row)


@router.get("/groups/{group_id}/invitations", response_model=Page[GroupInvitationRead],
            summary="Open invitations (members see their own)")
async def list_invitations(group_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    return page(GroupInvitationRead, await queries.invitations(reads(request), principal_id=principal.id,
                                                               group_id=group_id), None)


@router.delete("/groups/{group_id}/invitations/{invitation_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Revoke an open invitation", responses=problem_responses(409))
async def revoke_invitation(group_id: uuid.UUID, invitation_id: uuid.UUID, principal: CurrentUser,
                            session: SessionDep, now: NowDep) -> None:
    await groups.revoke_invitation(session, group_id=group_id, invitation_id=invitation_id, principal_id=principal.id,
                                   now=now)


@router.patch("/groups/{group_id}/members/{user_id}", response_model=GroupMemberRead,
              summary="Change a role (creator; role creator hands the group over), or mute yourself",
              responses=problem_responses(409, 422))
async def patch_member(group_id: uuid.UUID, user_id: uuid.UUID, body: MemberUpdate, principal: CurrentUser,
                       session: SessionDep, now: NowDep) -> GroupMemberRead:
    await groups.change_member(session, group_id=group_id, principal_id=principal.id, user_id=user_id,
                               role=body.role.value if body.role else None,
                               status=body.status.value if body.status else None, now=now)
    return await _member(session, principal.id, group_id, user_id)


@router.delete("/groups/{group_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a member, or leave when it is yourself", responses=problem_responses(409))
async def remove_member(group_id: uuid.UUID, user_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                        now: NowDep) -> None:
    await groups.remove_member(session, group_id=group_id, principal_id=principal.id, user_id=user_id, now=now)
