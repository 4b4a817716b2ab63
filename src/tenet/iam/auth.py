"""Authentication and authorization dependencies for every domain's routes.

    @router.get(...)
    async def handler(principal: Annotated[Principal, Depends(require(Permission.MEETING_READ))]): ...

A token is accepted only when its signature, issuer and expiry check out *and* its user (or API client)
is still active: one indexed query per request, so deleting a user or revoking a client takes effect
at once, not when the token expires.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import OAuth2PasswordBearer
from starlette.types import Scope

from tenet.deps import NowDep, SessionDep
from tenet.iam import service
from tenet.iam.principal import Principal
from tenet.iam.tokens import AccessTokens
from tenet.kernel.clock import Clock
from tenet.kernel.errors import DomainError, InvalidToken, NotAuthenticated, PermissionDenied

TOKEN_URL = "/api/v1/auth/token"
_bearer = OAuth2PasswordBearer(tokenUrl=TOKEN_URL, auto_error=False, scheme_name="OAuth2")


async def _current_principal(request: Request, session: SessionDep, now: NowDep,
                             token: Annotated[str | None, Depends(_bearer)]) -> Principal:
    if not token:
        raise NotAuthenticated()
    tokens: AccessTokens = request.app.state.access_tokens
    claims = tokens.verify(token, now=now)
    principal = await service.load_principal(session, claims)
    if principal is None:
        raise InvalidToken("The account behind this token is no longer active")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(_current_principal)]


async def _current_user(principal: CurrentPrincipal) -> Principal:
    if not principal.is_user:
        raise PermissionDenied("This route is for signed-in users, not API clients")
    return principal


CurrentUser = Annotated[Principal, Depends(_current_user)]


def require(permission: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency answering the signed-in user when they hold `permission`, else 403."""

    async def check(principal: CurrentUser) -> Principal:
        if not principal.can(permission):
            raise PermissionDenied(f"Requires the permission {permission}", permission=permission)
        return principal

    return check


def require_scope(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency answering the API client when its token carries `scope`, else 403."""

    async def check(principal: CurrentPrincipal) -> Principal:
        if not principal.has_scope(scope):
            raise PermissionDenied(f"Requires the scope {scope}", scope=scope)
        return principal

    return check


def idempotency_principal(scope: Scope) -> str | None:
    """Whose Idempotency-Key namespace a request uses: the token's subject, or the client address when
    there is no token. None when a token is present but invalid (the route will answer 401)."""
    authorization = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            authorization = value.decode("latin-1")
            break
    if authorization is None:
        client = scope.get("client")
        return f"anonymous:{client[0] if client else 'unknown'}"
    kind, _, token = authorization.partition(" ")
    if kind.lower() != "bearer" or not token:
        return None
    state = scope["app"].state
    clock: Clock = state.clock
    try:
        claims = state.access_tokens.verify(token.strip(), now=clock.now())
    except DomainError:
        return None
    return f"{claims.kind}:{claims.subject}"
