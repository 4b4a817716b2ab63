"""Routes of identity: /api/v1/auth and /api/v1/iam (API.md "Identity")."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response, status

from tenet.deps import NowDep, SessionDep, SettingsDep, client_address
from tenet.iam import errors, service
from tenet.iam.auth import CurrentPrincipal, require
from tenet.iam.permissions import ROLE_DESCRIPTIONS, ROLE_PERMISSIONS, Permission, Role
from tenet.iam.principal import Principal
from tenet.iam.schemas import (
    ApiClientCreate,
    ApiClientCreated,
    ApiClientRead,
    MeRead,
    RefreshRequest,
    RoleRead,
    RolesUpdate,
    TokenResponse,
    UserCreate,
    UserRead,
    UserRegister,
)
from tenet.kernel.audit import Actor
from tenet.kernel.emails import normalize_email
from tenet.kernel.http import API_PREFIX, TenetRoute, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.ratelimit import RateLimiter

# Routers carry their full path (not a prefix added at inclusion), so a matched route's template is the
# whole path for metrics and logs whatever FastAPI does with included routers.
auth_router = APIRouter(prefix=f"{API_PREFIX}/auth", tags=["auth"], route_class=TenetRoute)
admin_router = APIRouter(prefix=f"{API_PREFIX}/iam", tags=["iam"], route_class=TenetRoute,
                         responses=problem_responses(401, 403))

PageDep = Annotated[PageParams, Depends(page_params)]
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


async def _user_read(session, user) -> UserRead:
    roles = (await service.roles_of(session, [user.id]))[user.id]
    return UserRead(id=user.id, email=user.email, display_name=user.display_name, status=user.status,
                    roles=roles, created_at=user.created_at)


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
    await _limiter(request).consume(f"register:ip:{client_address(request)}", settings.registration_limit, now,
                                    "registrations from this address")
    user = await service.create_user(
        session, passwords=request.app.state.passwords, email=body.email, password=body.password,
        display_name=body.display_name, now=now, actor=Actor("anonymous"),
    )
    return await _user_read(session, user)


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
    "/token", response_model=TokenResponse, response_model_exclude_none=True,
    summary="OAuth2 token endpoint: password, client_credentials or refresh_token grant",
    description=(
        "Form-encoded (RFC 6749). `grant_type=password` with `username` (the email) and `password`; "
        "`grant_type=client_credentials` with `client_id` and `client_secret` (or HTTP Basic); "
        "`grant_type=refresh_token` with `refresh_token`. Failed sign-ins are rate limited per account "
        "and per client address. `Idempotency-Key` is ignored here: token answers are never stored."
    ),
    responses=problem_responses(400, 401, 422, 429),
)
async def token(
    request: Request,
    response: Response,
    session: SessionDep,
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
    response.headers.update(NO_STORE)
    state = request.app.state
    refresh_ttl = timedelta(days=settings.refresh_token_ttl_days)
    if grant_type == "password":
        if not username or password is None:
            raise errors.InvalidCredentials("username and password are required for the password grant")
        limiter = _limiter(request)
        buckets = [f"login:account:{normalize_email(username)}", f"login:ip:{client_address(request)}"]
        failures = await limiter.check(buckets, settings.login_failure_limit, now, "failed sign-ins")
        try:
            user = await service.authenticate_password(session, passwords=state.passwords, email=username,
                                                       password=password, now=now)
        except errors.InvalidCredentials:
            for bucket in buckets:
                await limiter.hit(bucket, settings.login_failure_limit, now)
            raise
        if failures[buckets[0]]:
            await limiter.reset(buckets[0], settings.login_failure_limit, now)
        return await service.issue_user_tokens(session, user_id=user.id, access_tokens=state.access_tokens,
                                               refresh_ttl=refresh_ttl, now=now)
    if grant_type == "client_credentials":
        basic = _basic_client_credentials(request)
        if basic:
            client_id, client_secret = basic
        if not client_id or not client_secret:
            raise errors.InvalidClient("client_id and client_secret are required")
        client = await service.authenticate_client(session, client_id=client_id, client_secret=client_secret)
        return TokenResponse(
            access_token=state.access_tokens.issue(subject=client.id, kind="client", now=now,
                                                   scopes=tuple(client.scopes)),
            expires_in=int(state.access_tokens.ttl.total_seconds()), scope=" ".join(client.scopes) or None,
        )
    if grant_type == "refresh_token":
        if not refresh_token:
            raise errors.InvalidRefreshToken("refresh_token is required")
        return await service.rotate_refresh_token(session, refresh_token=refresh_token,
                                                  access_tokens=state.access_tokens, refresh_ttl=refresh_ttl, now=now)
    raise errors.UnsupportedGrantType(f"grant_type {grant_type!r} is not supported")


@auth_router.post(
    "/refresh", response_model=TokenResponse, response_model_exclude_none=True,
    summary="Rotate a refresh token (JSON form of grant_type=refresh_token)",
    description="Spends the refresh token and answers a new pair. Presenting a spent token again revokes "
                "its whole family (every session started by that sign-in).",
    responses=problem_responses(401, 422),
)
async def refresh(body: RefreshRequest, request: Request, response: Response, session: SessionDep,
                  settings: SettingsDep, now: NowDep) -> TokenResponse:
    response.headers.update(NO_STORE)
    return await service.rotate_refresh_token(
        session, refresh_token=body.refresh_token, access_tokens=request.app.state.access_tokens,
        refresh_ttl=timedelta(days=settings.refresh_token_ttl_days), now=now,
    )


@auth_router.post("/revoke", status_code=status.HTTP_204_NO_CONTENT,
                  summary="Sign out: revoke a refresh token's family",
                  responses=problem_responses(422))
async def revoke(body: RefreshRequest, session: SessionDep, now: NowDep) -> None:
    await service.revoke_refresh_token(session, refresh_token=body.refresh_token, now=now)


@auth_router.get("/me", response_model=MeRead, summary="Who am I: user or API client, roles, permissions",
                 responses=problem_responses(401))
async def me(principal: CurrentPrincipal, session: SessionDep) -> MeRead:
    if principal.kind == "user" and principal.profile is not None:
        profile, roles = principal.profile, sorted(principal.roles)
        user = UserRead(id=principal.id, email=profile.email, display_name=profile.display_name,
                        status=profile.status, roles=roles, created_at=profile.created_at)
        return MeRead(principal_type="user", user=user, roles=roles, permissions=sorted(principal.permissions),
                      scopes=[])
    client = await service.get_api_client(session, principal.id)
    return MeRead(principal_type="client", client=ApiClientRead.model_validate(client), roles=[], permissions=[],
                  scopes=sorted(principal.scopes))


# --- /iam (administration) ---------------------------------------------------------------------------

ManageUsers = Annotated[Principal, Depends(require(Permission.IAM_USER_MANAGE))]
ReadUsers = Annotated[Principal, Depends(require(Permission.IAM_USER_READ))]
AssignRoles = Annotated[Principal, Depends(require(Permission.IAM_ROLE_ASSIGN))]
ManageClients = Annotated[Principal, Depends(require(Permission.IAM_API_CLIENT_MANAGE))]


@admin_router.post("/users", status_code=status.HTTP_201_CREATED, response_model=UserRead,
                   summary="Create a user (administrators)", responses=problem_responses(409, 422))
async def create_user(body: UserCreate, request: Request, admin: ManageUsers, session: SessionDep,
                      now: NowDep) -> UserRead:
    user = await service.create_user(
        session, passwords=request.app.state.passwords, email=body.email, password=body.password,
        display_name=body.display_name, now=now, actor=admin.actor,
        roles=body.roles if body.roles is not None else [Role.EMPLOYEE],
    )
    return await _user_read(session, user)


@admin_router.get("/users", response_model=Page[UserRead], summary="List users, oldest first",
                  responses=problem_responses(400))
async def list_users(_: ReadUsers, session: SessionDep, params: PageDep) -> Page[UserRead]:
    users, next_cursor = await service.list_users(session, params=params)
    roles = await service.roles_of(session, [u.id for u in users])
    items = [UserRead(id=u.id, email=u.email, display_name=u.display_name, status=u.status, roles=roles[u.id],
                      created_at=u.created_at) for u in users]
    return Page[UserRead](items=items, next_cursor=next_cursor)


@admin_router.get("/users/{user_id}", response_model=UserRead, summary="One user",
                  responses=problem_responses(404))
async def get_user(user_id: uuid.UUID, _: ReadUsers, session: SessionDep) -> UserRead:
    return await _user_read(session, await service.get_user(session, user_id))


@admin_router.put("/users/{user_id}/roles", response_model=UserRead, summary="Replace a user's system roles",
                  responses=problem_responses(404, 409, 422))
async def put_user_roles(user_id: uuid.UUID, body: RolesUpdate, admin: AssignRoles, session: SessionDep,
                         now: NowDep) -> UserRead:
    user = await service.set_user_roles(session, user_id=user_id, roles=body.roles, now=now, actor=admin.actor)
    return await _user_read(session, user)


@admin_router.delete("/users/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
                     summary="Delete a user (a state: sign-in stops, tokens die, the email is freed)",
                     responses=problem_responses(404, 409))
async def delete_user(user_id: uuid.UUID, admin: ManageUsers, session: SessionDep, now: NowDep) -> None:
    await service.delete_user(session, user_id=user_id, now=now, actor=admin.actor)


@admin_router.post("/users/{user_id}/disable", response_model=UserRead,
                   summary="Suspend an account: sign-in stops and its tokens die at once",
                   responses=problem_responses(404, 409))
async def disable_user(user_id: uuid.UUID, admin: ManageUsers, session: SessionDep, now: NowDep) -> UserRead:
    return await _user_read(session, await service.disable_user(session, user_id=user_id, now=now,
                                                                actor=admin.actor))


@admin_router.post("/users/{user_id}/enable", response_model=UserRead, summary="Re-activate a suspended account",
                   responses=problem_responses(404, 409))
async def enable_user(user_id: uuid.UUID, admin: ManageUsers, session: SessionDep, now: NowDep) -> UserRead:
    return await _user_read(session, await service.enable_user(session, user_id=user_id, now=now,
                                                               actor=admin.actor))


@admin_router.get("/roles", response_model=list[RoleRead], summary="The system roles and their permission points")
async def list_roles(_: ReadUsers) -> list[RoleRead]:
    return [RoleRead(name=r.value, description=ROLE_DESCRIPTIONS[r],
                     permissions=sorted(p.value for p in ROLE_PERMISSIONS[r])) for r in Role]


@admin_router.post("/api-clients", status_code=status.HTTP_201_CREATED, response_model=ApiClientCreated,
                   summary="Create an API client; the secret is shown once",
                   description="The answer carries `Cache-Control: no-store`; an `Idempotency-Key` does not "
                               "replay it (the secret is never kept), so a retried request creates another client.",
                   responses=problem_responses(422))
async def create_api_client(body: ApiClientCreate, admin: ManageClients, response: Response, session: SessionDep,
                            now: NowDep) -> ApiClientCreated:
    response.headers.update(NO_STORE)
    client, secret = await service.create_api_client(session, name=body.name, scopes=body.scopes,
                                                     hotel_ids=body.hotel_ids or [], now=now, actor=admin.actor)
    return ApiClientCreated(**ApiClientRead.model_validate(client).model_dump(), client_secret=secret)


@admin_router.get("/api-clients", response_model=Page[ApiClientRead], summary="List API clients",
                  responses=problem_responses(400))
async def list_api_clients(_: ManageClients, session: SessionDep, params: PageDep) -> Page[ApiClientRead]:
    clients, next_cursor = await service.list_api_clients(session, params=params)
    return Page[ApiClientRead](items=[ApiClientRead.model_validate(c) for c in clients], next_cursor=next_cursor)


@admin_router.delete("/api-clients/{api_client_id}", status_code=status.HTTP_204_NO_CONTENT,
                     summary="Revoke an API client (its tokens stop working at once)",
                     responses=problem_responses(404))
async def delete_api_client(api_client_id: uuid.UUID, admin: ManageClients, session: SessionDep,
                            now: NowDep) -> None:
    await service.revoke_api_client(session, api_client_id=api_client_id, now=now, actor=admin.actor)


routers = (auth_router, admin_router)
