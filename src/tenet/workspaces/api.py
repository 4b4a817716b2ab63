"""Routes of workspaces: /api/v1/workspaces and /api/v1/invitations (API.md "Workspaces").

Routes parse, call one command (tenet.workspaces.workspaces, .members, .invitations) or query (queries.py) and
shape the answer; commands authorize by workspace role (permissions.py). A command's answer is read back through
the query its GET uses, in the command's transaction, except the invite path's (a measured hot path: its answer is
the row it inserted, docs/kernel.md). Workspaces the caller is not an active member of answer 404.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, StatementsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import API_PREFIX, TenetRoute, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.reads import Runner
from tenet.kernel.settings import section
from tenet.kernel.statements import statements
from tenet.workspaces import commands, invitations, members, queries, workspaces
from tenet.workspaces.models import Invitation
from tenet.workspaces.permissions import permission_table_markdown
from tenet.workspaces.schemas import (
    InvitationAccept,
    InvitationAccepted,
    InvitationCreate,
    InvitationRead,
    InvitationStatus,
    MemberRead,
    MemberUpdate,
    OwnershipTransfer,
    WorkspaceCreate,
    WorkspaceRead,
)
from tenet.workspaces.settings import WorkspaceSettings

TAG = "workspaces"
TAG_DESCRIPTION = (
    "Workspaces, their members (roles owner / admin / member) and email invitations (spec 002).\n\n"
    "Every workspace keeps at least one active owner (WS-INV-01: the last owner cannot leave, be removed "
    "or be demoted — `LAST_OWNER`). Invitation tokens travel only by mail and are stored as digests. "
    "Deleting a workspace moves it to DELETING (read-only, pending invitations revoked) and a background "
    "job to DELETED. Workspaces you are not an active member of answer 404.\n\n"
    "**Who may do what** (a refused role gets 403 `WORKSPACE_ROLE_FORBIDDEN`):\n\n" + permission_table_markdown()
)

# The router carries the whole path (like identity's), so route templates in metrics and logs are complete.
router = APIRouter(prefix=API_PREFIX, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))

PageDep = Annotated[PageParams, Depends(page_params)]


async def _written(session: AsyncSession) -> Runner:
    """The unit of work's statements, after the session's pending rows: what a command wrote, as a GET reads it."""
    await session.flush()
    return await statements(session)


async def _workspace_answer(session: AsyncSession, workspace_id: uuid.UUID, principal_id: uuid.UUID) -> WorkspaceRead:
    """The workspace as its GET shows it to the caller (their role included)."""
    row = await queries.workspace(await _written(session), workspace_id=workspace_id, principal_id=principal_id)
    return WorkspaceRead.model_validate(row)


async def _invitation_answer(session: AsyncSession, invitation: Invitation, principal_id: uuid.UUID,
                             now: datetime) -> InvitationRead:
    """The invitation as the list shows it (its effective status)."""
    rows, _ = await queries.invitations(await _written(session), workspace_id=invitation.workspace_id,
                                        principal_id=principal_id, status=None, page=PageParams(limit=1), now=now,
                                        invitation_id=invitation.id)
    return InvitationRead.model_validate(rows[0])


def _new_invitation_read(invitation: invitations.NewInvitation, now: datetime) -> InvitationRead:
    """The invite path's answer: the row it inserted, as the list shows it (a hot path reads nothing back)."""
    return InvitationRead(
        id=invitation.id, workspace_id=invitation.workspace_id, email=invitation.email, role=invitation.role,
        status=invitations.effective_status(invitation, now), invited_by=invitation.invited_by,
        created_at=invitation.created_at, expires_at=invitation.expires_at, last_sent_at=invitation.last_sent_at,
        accepted_at=invitation.accepted_at, accepted_by=invitation.accepted_by, revoked_at=invitation.revoked_at,
        expired_at=invitation.expired_at,
    )


# --- workspaces ----------------------------------------------------------------------------------------


@router.post("/workspaces", status_code=status.HTTP_201_CREATED, response_model=WorkspaceRead,
             summary="Create a workspace; you become its first owner",
             description="Any signed-in user may create a workspace, at most `TENET_WORKSPACE_CREATION_LIMIT` "
                         "per account in its window (429 `WORKSPACE_CREATION_LIMIT_REACHED` with `Retry-After`).",
             responses=problem_responses(422, 429))
async def create_workspace(body: WorkspaceCreate, principal: CurrentUser, request: Request, session: SessionDep,
                           now: NowDep, settings: SettingsDep, response: Response) -> WorkspaceRead:
    limit = section(settings, WorkspaceSettings).workspace_creation_limit
    async with commands.creation_slot(request.app.state.rate_limiter, owner_id=principal.id, limit=limit, now=now):
        workspace = await workspaces.create_workspace(session, name=body.name, principal_id=principal.id, now=now)
    response.headers["Location"] = f"{API_PREFIX}/workspaces/{workspace.id}"
    return await _workspace_answer(session, workspace.id, principal.id)


@router.get("/workspaces", response_model=Page[WorkspaceRead], summary="Your workspaces, oldest first",
            description="Workspaces where you are an active member (ACTIVE or DELETING), with your role.",
            responses=problem_responses(400))
async def list_workspaces(principal: CurrentUser, request: Request, params: PageDep) -> Response:
    rows, next_cursor = await queries.workspaces(reads(request), principal_id=principal.id, page=params)
    return json_response(Page[WorkspaceRead](items=[WorkspaceRead.model_validate(r) for r in rows],
                                             next_cursor=next_cursor))


@router.get("/workspaces/{workspace_id}", response_model=WorkspaceRead, summary="One of your workspaces",
            description="Any member.")
async def get_workspace(workspace_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.workspace(reads(request), workspace_id=workspace_id, principal_id=principal.id)
    return json_response(WorkspaceRead.model_validate(row))


@router.delete("/workspaces/{workspace_id}", status_code=status.HTTP_202_ACCEPTED, response_model=WorkspaceRead,
               summary="Delete a workspace (owners): ACTIVE -> DELETING now, DELETED by the worker",
               description="Revokes every pending invitation at once; the workspace is read-only until the "
                           "worker completes the deletion, then it disappears (404). Repeating the request "
                           "answers the same DELETING workspace.",
               responses=problem_responses(409))
async def delete_workspace(workspace_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                           now: NowDep) -> WorkspaceRead:
    await workspaces.request_workspace_deletion(session, workspace_id=workspace_id, principal_id=principal.id, now=now)
    return await _workspace_answer(session, workspace_id, principal.id)


# --- members -------------------------------------------------------------------------------------------


@router.get("/workspaces/{workspace_id}/members", response_model=Page[MemberRead],
            summary="Active members, in the order they joined", description="Any member.",
            responses=problem_responses(400))
async def list_members(workspace_id: uuid.UUID, principal: CurrentUser, request: Request,
                       params: PageDep) -> Response:
    rows, next_cursor = await queries.members(reads(request), workspace_id=workspace_id, principal_id=principal.id,
                                              page=params)
    return json_response(Page[MemberRead](items=[MemberRead.model_validate(r) for r in rows],
                                          next_cursor=next_cursor))


@router.patch("/workspaces/{workspace_id}/members/{user_id}", response_model=MemberRead,
              summary="Change a member's role (owners)",
              description="Owners may set any role, their own included. Demoting the last active owner "
                          "answers 409 `LAST_OWNER`.",
              responses=problem_responses(409, 422))
async def change_member_role(workspace_id: uuid.UUID, user_id: uuid.UUID, body: MemberUpdate, principal: CurrentUser,
                             session: SessionDep, now: NowDep) -> MemberRead:
    await members.change_member_role(session, workspace_id=workspace_id, principal_id=principal.id, user_id=user_id,
                                     role=body.role, now=now)
    rows, _ = await queries.members(await _written(session), workspace_id=workspace_id, principal_id=principal.id,
                                    page=PageParams(limit=1), user_id=user_id)
    return MemberRead.model_validate(rows[0])


@router.delete("/workspaces/{workspace_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a member, or leave when it is yourself",
               description="Owners remove anyone, admins remove members; anyone may leave. The last active "
                           "owner can neither leave nor be removed (409 `LAST_OWNER`).",
               responses=problem_responses(409))
async def remove_member(workspace_id: uuid.UUID, user_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                        now: NowDep) -> None:
    await members.remove_member(session, workspace_id=workspace_id, principal_id=principal.id, user_id=user_id,
                                now=now)


@router.post("/workspaces/{workspace_id}/transfer-ownership", response_model=WorkspaceRead,
             summary="Transfer ownership (owners): the member becomes owner, you become admin",
             description="The target must be an active member who is not an owner (409 `ALREADY_OWNER`, "
                         "`OWNERSHIP_TRANSFER_TO_SELF`, 404 `MEMBER_NOT_FOUND`). Answers the workspace with "
                         "your new role.",
             responses=problem_responses(409, 422))
async def transfer_ownership(workspace_id: uuid.UUID, body: OwnershipTransfer, principal: CurrentUser,
                             session: SessionDep, now: NowDep) -> WorkspaceRead:
    await members.transfer_ownership(session, workspace_id=workspace_id, principal_id=principal.id,
                                     user_id=body.user_id, now=now)
    return await _workspace_answer(session, workspace_id, principal.id)


# --- invitations ---------------------------------------------------------------------------------------


@router.post("/workspaces/{workspace_id}/invitations", status_code=status.HTTP_201_CREATED,
             response_model=InvitationRead, summary="Invite an email address (owners; admins for members)",
             description="The token is sent by mail only (an accept link and the code); it is never in a "
                         "response. One pending invitation per normalised email (409 "
                         "`INVITATION_ALREADY_PENDING`: resend it instead). At most "
                         "`TENET_INVITATIONS_PER_WORKSPACE_PER_DAY` invitation mails (invites and resends) per "
                         "workspace in any 24 hours (429 `INVITATION_LIMIT_REACHED` with `Retry-After`).",
             responses=problem_responses(409, 422, 429))
async def create_invitation(workspace_id: uuid.UUID, body: InvitationCreate, principal: CurrentUser, request: Request,
                            session: StatementsDep) -> Response:
    # A hot write (bench/invitation_create): a plain unit of work (its statements are all plain ones), the clock
    # and the settings taken from the request rather than as dependencies, the answer serialised once.
    now, settings = clock_now(request), request.app.state.settings
    limit = section(settings, WorkspaceSettings).invitation_sender_limit
    async with commands.sender_slot(request.app.state.rate_limiter, sender_id=principal.id, limit=limit, now=now):
        invitation, _token = await invitations.create_invitation(
            session, workspace_id=workspace_id, principal_id=principal.id, email=body.email, role=body.role,
            policy=invitations.InvitationPolicy.from_settings(settings), now=now,
            inviter_name=principal.profile.display_name if principal.profile else None,
        )
    return json_response(_new_invitation_read(invitation, now), status_code=status.HTTP_201_CREATED)


@router.get("/workspaces/{workspace_id}/invitations", response_model=Page[InvitationRead],
            summary="Invitations, newest first (owners and admins)", responses=problem_responses(400, 422))
async def list_invitations(
    workspace_id: uuid.UUID, principal: CurrentUser, request: Request, params: PageDep,
    status_filter: Annotated[InvitationStatus | None, Query(alias="status", description="Only this status")] = None,
) -> Response:
    at = clock_now(request)
    rows, next_cursor = await queries.invitations(
        reads(request), workspace_id=workspace_id, principal_id=principal.id,
        status=status_filter.value if status_filter else None, page=params, now=at,
    )
    return json_response(Page[InvitationRead](items=[InvitationRead.model_validate(r) for r in rows],
                                              next_cursor=next_cursor))


@router.post("/invitations/{invitation_id}/revoke", response_model=InvitationRead,
             summary="Revoke a pending invitation (owners; admins for member invitations)",
             description="Its token stops working at once. A terminal invitation answers 409 with its state's "
                         "code (`INVITATION_ALREADY_ACCEPTED`, `INVITATION_REVOKED`, `INVITATION_EXPIRED`).",
             responses=problem_responses(409))
async def revoke_invitation(invitation_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                            now: NowDep) -> InvitationRead:
    invitation = await invitations.revoke_invitation(session, invitation_id=invitation_id, principal_id=principal.id,
                                                     now=now)
    return await _invitation_answer(session, invitation, principal.id, now)


@router.post("/invitations/{invitation_id}/resend", response_model=InvitationRead,
             summary="Resend: a new token by mail, the old one dies, expiry starts again",
             description="Owners; admins for member invitations. Only an unexpired pending invitation can be "
                         "resent; an expired one is invited anew. Counts against the daily limit.",
             responses=problem_responses(409, 429))
async def resend_invitation(invitation_id: uuid.UUID, principal: CurrentUser, request: Request, session: SessionDep,
                            settings: SettingsDep, now: NowDep) -> InvitationRead:
    limit = section(settings, WorkspaceSettings).invitation_sender_limit
    async with commands.sender_slot(request.app.state.rate_limiter, sender_id=principal.id, limit=limit, now=now):
        invitation, _token = await invitations.resend_invitation(
            session, invitation_id=invitation_id, principal_id=principal.id,
            policy=invitations.InvitationPolicy.from_settings(settings), now=now,
            inviter_name=principal.profile.display_name if principal.profile else None,
        )
    return await _invitation_answer(session, invitation, principal.id, now)


@router.post("/invitations/accept", response_model=InvitationAccepted,
             summary="Accept an invitation with the token from its mail",
             description="Signed in with the invited email address (compared as email-v1; otherwise 403 "
                         "`INVITATION_EMAIL_MISMATCH`). Creates your membership with the invited role. Refused: "
                         "404 `INVITATION_TOKEN_INVALID` (unknown, or replaced by a resend), 409 "
                         "`INVITATION_ALREADY_ACCEPTED` / `INVITATION_REVOKED` / `INVITATION_EXPIRED`, 409 "
                         "`WORKSPACE_NOT_ACTIVE` (being deleted), 409 `ALREADY_MEMBER`.",
             responses=problem_responses(409, 422))
async def accept_invitation(body: InvitationAccept, principal: CurrentUser, session: SessionDep,
                            now: NowDep) -> InvitationAccepted:
    workspace, membership, invitation = await invitations.accept_invitation(session, token=body.token,
                                                                            principal_id=principal.id, now=now)
    return InvitationAccepted(invitation_id=invitation.id, membership_id=membership.id,
                              workspace=await _workspace_answer(session, workspace.id, principal.id))


ROUTERS = (router,)
OPENAPI_TAGS = ({"name": TAG, "description": TAG_DESCRIPTION},)
