"""Routes of identity: /api/v1/auth and /api/v1/iam (API.md "Identity")."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, client_address, reads
from tenet.iam import errors, password_reset, queries, service, signin
from tenet.iam.auth import CurrentPrincipal, require
from tenet.iam.models import UserAccount
from tenet.iam.permissions import ROLE_DESCRIPTIONS, Permission, Role
from tenet.iam.principal import Principal
from tenet.iam.schemas import (
    ApiClientCreate,
    ApiClientCreated,
    ApiClientRead,
    MeRead,
    PasswordResetComplete,
    PasswordResetRequest,
    RefreshRequest,
    RoleRead,
    RolesUpdate,
    TokenResponse,
    UserCreate,
    UserRead,
    UserRegister,
)
from tenet.iam.settings import IamSettings
from tenet.kernel import permissions as permission_catalog
from tenet.kernel.audit import Actor
from tenet.kernel.http import API_PREFIX, TenetRoute, json_response, problem_responses
from tenet.kernel.idempotency import not_idempotent
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.ratelimit import RateLimiter
from tenet.kernel.settings import section
from tenet.kernel.statements import statements

# Routers carry their full path (not a prefix added at inclusion), so a matched route's template is the
# whole path for metrics and logs whatever FastAPI does with included routers.
auth_router = APIRouter(prefix=f"{API_PREFIX}/auth", tags=["auth"], route_class=TenetRoute)
admin_router = APIRouter(prefix=f"{API_PREFIX}/iam", tags=["iam"], route_class=TenetRoute,
                         responses=problem_responses(401, 403))

PageDep = Annotated[PageParams, Depends(page_params)]
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


async def _user_read(session: AsyncSession, user_id: uuid.UUID) -> UserRead:
    """The account as its GET shows it, read by the GET's query inside the writing transaction."""
    await session.flush()
    return UserRead.model_validate(await queries.user(await statements(session), user_id=user_id))


def _limiter(request: Request) -> RateLimiter:
    return request.app.state.rate_limiter


# --- /auth -------------------------------------------------------------------------------------------


@auth_router.post(
    "/register", status_code=status.HTTP_201_CREATED, response_model=UserRead,
    summary="Create an account (public, rate limited per client address)",
    responses=problem_responses(409, 422, 429),
)
async def register(body: UserRegister, request: Request, session: SessionDep, settings: SettingsDep,
                   now: NowDep) -> UserRead:
    await _limiter(request).consume(f"register:ip:{client_address(request)}",
                                    section(settings, IamSettings).registration_limit, now,
                                    "registrations from this address")
    user = await service.create_user(
        session, passwords=request.app.state.passwords, email=body.email, password=body.password,
        display_name=body.display_name, now=now, actor=Actor("anonymous"),
    )
    return await _user_read(session, user.id)


def _basic_client_credentials(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
    kind, _, value = header.partition(" ")
    if kind.lower() != "basic" or not value:
        return None
    try:
        client_id, sep, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise errors.InvalidClient("Malformed Basic credentials") from None
    return (client_id, secret) if sep else None


@auth_router.post(
    "/password-reset", status_code=status.HTTP_202_ACCEPTED,
    summary="Ask for a password-reset mail (public, rate limited per address asked for and per client address)",
    description=(
        "Always 202 with the same body, whether or not the address has an account (no account enumeration); an "
        "active account gets a mail with a one-time link that works for `TENET_PASSWORD_RESET_TTL_MINUTES`. "
        "Requests are counted per address asked for and per client address (`TENET_PASSWORD_RESET_LIMIT`): at "
        "the limit, 429 with `Retry-After`."
    ),
    responses=problem_responses(422, 429),
)
async def ask_password_reset(body: PasswordResetRequest, request: Request, now: NowDep) -> Response:
    await password_reset.ask(request.app.state, email=body.email, address=client_address(request), now=now)
    return JSONResponse({"detail": "If the address has an account, a mail with a link to set the password is on "
                                   "its way."}, status_code=status.HTTP_202_ACCEPTED, headers=NO_STORE)


@auth_router.post(
    "/password-reset/complete", status_code=status.HTTP_204_NO_CONTENT,
    summary="Set a new password with the secret of a password-reset mail",
    description=(
        "The secret works once and until it expires; setting the password ends every sign-in of the account "
        "(access and refresh tokens, console sessions) and spends its other reset secrets. 400 "
        "RESET_TOKEN_INVALID for an unknown, used or expired secret; 422 PASSWORD_TOO_WEAK leaves it usable."
    ),
    responses=problem_responses(400, 422),
)
@not_idempotent
async def complete_password_reset(body: PasswordResetComplete, request: Request, now: NowDep) -> Response:
    await password_reset.finish(request.app.state, token=body.token, password=body.password, now=now)
    return Response(status_code=status.HTTP_204_NO_CONTENT, headers=NO_STORE)


@auth_router.post(
    "/token", response_model=TokenResponse, response_model_exclude_none=True,
    summary="OAuth2 token endpoint: password, client_credentials or refresh_token grant",
    description=(
        "Form-encoded (RFC 6749). `grant_type=password` with `username` (the email) and `password`; "
        "`grant_type=client_credentials` with `client_id` and `client_secret` (or HTTP Basic); "
        "`grant_type=refresh_token` with `refresh_token`. Sign-ins are rate limited per account and per client "
        "address (`TENET_LOGIN_FAILURE_LIMIT`): each attempt takes a slot before the password is checked, a "
        "successful one (or one the service could not check: 503) gives it back, and at the limit the answer "
        "is 429 with `Retry-After` whatever the password. `Idempotency-Key` is ignored here: token answers are "
        "never stored."
    ),
    responses=problem_responses(400, 401, 422, 429),
)
@not_idempotent
async def token(
    request: Request,
    response: Response,
    settings: SettingsDep,
    now: NowDep,
    grant_type: Annotated[str, Form(max_length=64)],
    username: Annotated[str | None, Form(max_length=320)] = None,
    password: Annotated[str | None, Form(max_length=1024)] = None,
    client_id: Annotated[str | None, Form(max_length=64)] = None,
    client_secret: Annotated[str | None, Form(max_length=128)] = None,
    refresh_token: Annotated[str | None, Form(max_length=200)] = None,
    scope: Annotated[str | None, Form(max_length=500)] = None,
) -> TokenResponse:
    # A boundary of its own: each step opens (and ends) what it needs, so no connection is held while
    # argon2 runs and no request ever holds two pooled connections at once.
    response.headers.update(NO_STORE)
    state = request.app.state
    iam = section(settings, IamSettings)
    refresh_ttl = timedelta(days=iam.refresh_token_ttl_days)
    if grant_type == "password":
        if not username or password is None:
            raise errors.InvalidCredentials("username and password are required for the password grant")

        async def issue(session: AsyncSession, user: UserAccount) -> TokenResponse:
            return await service.issue_user_tokens(session, user=user, access_tokens=state.access_tokens,
                                                   refresh_ttl=refresh_ttl, now=now)

        return await signin.with_password(state, email=username, password=password,
                                          address=client_address(request), limit=iam.login_failure_limit, now=now,
                                          then=issue)
    if grant_type == "client_credentials":
        basic = _basic_client_credentials(request)
        if basic:
            client_id, client_secret = basic
        if not client_id or not client_secret:
            raise errors.InvalidClient("client_id and client_secret are required")
        api_client_id, scopes = await service.authenticate_client(reads(request), client_id=client_id,
                                                                  client_secret=client_secret)
        return TokenResponse(
            access_token=state.access_tokens.issue(subject=api_client_id, kind="client", now=now,
                                                   scopes=tuple(scopes)),
            expires_in=int(state.access_tokens.ttl.total_seconds()), scope=" ".join(scopes) or None,
        )
    if grant_type == "refresh_token":
        if not refresh_token:
            raise errors.InvalidRefreshToken("refresh_token is required")
        async with state.db.unit_of_work() as session:
            return await service.rotate_refresh_token(session, refresh_token=refresh_token,
                                                      access_tokens=state.access_tokens, refresh_ttl=refresh_ttl,
                                                      now=now)
    raise errors.UnsupportedGrantType(f"grant_type {grant_type!r} is not supported")


@auth_router.post(
    "/refresh", response_model=TokenResponse, response_model_exclude_none=True,
    summary="Rotate a refresh token (JSON form of grant_type=refresh_token)",
    description="Spends the refresh token and answers a new pair. Presenting a spent token again revokes "
                "its whole family (every session started by that sign-in).",
    responses=problem_responses(401, 422),
)
@not_idempotent
async def refresh(body: RefreshRequest, request: Request, response: Response, session: SessionDep,
                  settings: SettingsDep, now: NowDep) -> TokenResponse:
    response.headers.update(NO_STORE)
    return await service.rotate_refresh_token(
        session, refresh_token=body.refresh_token, access_tokens=request.app.state.access_tokens,
        refresh_ttl=timedelta(days=section(settings, IamSettings).refresh_token_ttl_days), now=now,
    )


@auth_router.post("/revoke", status_code=status.HTTP_204_NO_CONTENT,
                  summary="Sign out: revoke a refresh token's family",
                  responses=problem_responses(422))
@not_idempotent
async def revoke(body: RefreshRequest, session: SessionDep, now: NowDep) -> None:
    await service.revoke_refresh_token(session, refresh_token=body.refresh_token, now=now)


@auth_router.get("/me", response_model=MeRead, summary="Who am I: user or API client, roles, permissions",
                 responses=problem_responses(401))
async def me(principal: CurrentPrincipal, request: Request) -> Response:
    if principal.kind == "user" and principal.profile is not None:
        profile, roles = principal.profile, sorted(principal.roles)
        user = UserRead(id=principal.id, email=profile.email, display_name=profile.display_name,
                        status=profile.status, roles=roles, created_at=profile.created_at)
        return json_response(MeRead(principal_type="user", user=user, roles=roles,
                                    permissions=sorted(principal.permissions), scopes=[]))
    client = ApiClientRead.model_validate(await queries.api_client(reads(request), api_client_id=principal.id))
    return json_response(MeRead(principal_type="client", client=client, roles=[], permissions=[],
                                scopes=sorted(principal.scopes)))


# --- /iam (administration) ---------------------------------------------------------------------------

ManageUsers = Annotated[Principal, Depends(require(Permission.IAM_USER_MANAGE))]
ReadUsers = Annotated[Principal, Depends(require(Permission.IAM_USER_READ))]
AssignRoles = Annotated[Principal, Depends(require(Permission.IAM_ROLE_ASSIGN))]
ManageClients = Annotated[Principal, Depends(require(Permission.IAM_API_CLIENT_MANAGE))]


@admin_router.post("/users", status_code=status.HTTP_201_CREATED, response_model=UserRead,
                   summary="Create a user (administrators)", responses=problem_responses(409, 422))
async def create_user(body: UserCreate, request: Request, principal: ManageUsers, session: SessionDep,
                      now: NowDep) -> UserRead:
    user = await service.create_user(
        session, passwords=request.app.state.passwords, email=body.email, password=body.password,
        display_name=body.display_name, now=now, actor=principal.actor,
        roles=body.roles if body.roles is not None else [Role.EMPLOYEE],
    )
    return await _user_read(session, user.id)


@admin_router.get("/users", response_model=Page[UserRead], summary="List users, oldest first",
                  responses=problem_responses(400))
async def list_users(_: ReadUsers, request: Request, params: PageDep) -> Response:
    rows, next_cursor = await queries.users(reads(request), page=params)
    return json_response(Page[UserRead](items=[UserRead.model_validate(r) for r in rows], next_cursor=next_cursor))


@admin_router.get("/users/{user_id}", response_model=UserRead, summary="One user",
                  responses=problem_responses(404))
async def get_user(user_id: uuid.UUID, _: ReadUsers, request: Request) -> Response:
    return json_response(UserRead.model_validate(await queries.user(reads(request), user_id=user_id)))


@admin_router.put("/users/{user_id}/roles", response_model=UserRead, summary="Replace a user's system roles",
                  responses=problem_responses(404, 409, 422))
async def put_user_roles(user_id: uuid.UUID, body: RolesUpdate, principal: AssignRoles, session: SessionDep,
                         now: NowDep) -> UserRead:
    await service.set_user_roles(session, user_id=user_id, roles=body.roles, now=now, actor=principal.actor)
    return await _user_read(session, user_id)


@admin_router.delete("/users/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
                     summary="Delete a user (a state: sign-in stops, tokens die, the email is freed)",
                     responses=problem_responses(404, 409))
async def delete_user(user_id: uuid.UUID, principal: ManageUsers, session: SessionDep, now: NowDep) -> None:
    await service.delete_user(session, user_id=user_id, now=now, actor=principal.actor)


@admin_router.post("/users/{user_id}/disable", response_model=UserRead,
                   summary="Suspend an account: sign-in stops and its tokens die at once",
                   responses=problem_responses(404, 409))
async def disable_user(user_id: uuid.UUID, principal: ManageUsers, session: SessionDep, now: NowDep) -> UserRead:
    await service.disable_user(session, user_id=user_id, now=now, actor=principal.actor)
    return await _user_read(session, user_id)


@admin_router.post("/users/{user_id}/enable", response_model=UserRead, summary="Re-activate a suspended account",
                   responses=problem_responses(404, 409))
async def enable_user(user_id: uuid.UUID, principal: ManageUsers, session: SessionDep, now: NowDep) -> UserRead:
    await service.enable_user(session, user_id=user_id, now=now, actor=principal.actor)
    return await _user_read(session, user_id)


@admin_router.get("/roles", response_model=list[RoleRead], summary="The system roles and their permission points")
async def list_roles(_: ReadUsers) -> list[RoleRead]:
    return [RoleRead(name=r.value, description=ROLE_DESCRIPTIONS[r],
                     permissions=sorted(permission_catalog.points_of_role(r.value))) for r in Role]


@admin_router.post("/api-clients", status_code=status.HTTP_201_CREATED, response_model=ApiClientCreated,
                   summary="Create an API client; the secret is shown once",
                   description="The answer carries `Cache-Control: no-store`; an `Idempotency-Key` does not "
                               "replay it (the secret is never kept), so a retried request creates another client.",
                   responses=problem_responses(422))
async def create_api_client(body: ApiClientCreate, principal: ManageClients, response: Response,
                            session: SessionDep, now: NowDep) -> ApiClientCreated:
    response.headers.update(NO_STORE)
    client, secret = await service.create_api_client(session, name=body.name, scopes=body.scopes,
                                                     hotel_ids=body.hotel_ids or [], now=now, actor=principal.actor)
    written = await queries.api_client(await statements(session), api_client_id=client.id)
    return ApiClientCreated(**ApiClientRead.model_validate(written).model_dump(), client_secret=secret)


@admin_router.get("/api-clients", response_model=Page[ApiClientRead], summary="List API clients",
                  responses=problem_responses(400))
async def list_api_clients(_: ManageClients, request: Request, params: PageDep) -> Response:
    rows, next_cursor = await queries.api_clients(reads(request), page=params)
    return json_response(Page[ApiClientRead](items=[ApiClientRead.model_validate(r) for r in rows],
                                             next_cursor=next_cursor))


@admin_router.delete("/api-clients/{api_client_id}", status_code=status.HTTP_204_NO_CONTENT,
                     summary="Revoke an API client (its tokens stop working at once)",
                     responses=problem_responses(404))
async def delete_api_client(api_client_id: uuid.UUID, principal: ManageClients, session: SessionDep,
                            now: NowDep) -> None:
    await service.revoke_api_client(session, api_client_id=api_client_id, now=now, actor=principal.actor)


ROUTERS = (auth_router, admin_router)
OPENAPI_TAGS = (
    {"name": "auth", "description": "Registration, tokens, who am I"},
    {"name": "iam", "description": "Users, roles and API clients (administrators)"},
)
