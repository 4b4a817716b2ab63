"""Authentication and authorization for every domain's routes: one dependency per route.

    @router.get(...)
    async def handler(principal: Annotated[Principal, Depends(require(Permission.MEETING_READ))]): ...

`CurrentPrincipal`, `CurrentUser`, `require(permission)` and `require_scope(scope)` are each a single
dependency (an `OAuth2PasswordBearer` that also resolves the caller, so the OpenAPI document keeps its
security scheme) — no chain of dependencies per request. A token is accepted only when its signature,
issuer, claims and expiry check out (signature checks are cached per token) *and* the account or API
client behind it is still active, loaded with one statement on the transaction-free read path: deleting,
disabling or signing out takes effect at once, not when the token expires.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import OAuth2PasswordBearer
from starlette.types import Scope

from tenet.iam import queries
from tenet.iam.principal import Principal
from tenet.iam.tokens import AccessTokens
from tenet.kernel.clock import Clock
from tenet.kernel.errors import DomainError, InvalidToken, NotAuthenticated, PermissionDenied

TOKEN_URL = "/api/v1/auth/token"
SCHEME_NAME = "OAuth2"


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    kind, _, token = authorization.partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def principal_for_token(state: object, token: str) -> Principal:
    """The active caller behind `token`, or NotAuthenticated / InvalidToken / TokenExpired."""
    tokens: AccessTokens = state.access_tokens  # type: ignore[attr-defined]
    clock: Clock = state.clock  # type: ignore[attr-defined]
    claims = tokens.verify(token, now=clock.now())
    principal = await queries.principal(state.db.reads, claims)  # type: ignore[attr-defined]
    if principal is None:
        raise InvalidToken("The account behind this token is no longer active")
    return principal


class Authenticated(OAuth2PasswordBearer):
    """The route's one dependency: resolves the caller from the bearer token and checks what the route
    asks (a signed-in user, a permission point, an API client scope)."""

    def __init__(self, *, users_only: bool = False, permission: str | None = None, scope: str | None = None) -> None:
        super().__init__(tokenUrl=TOKEN_URL, auto_error=False, scheme_name=SCHEME_NAME)
        self.users_only = users_only or permission is not None
        self.permission = permission
        self.scope = scope

    async def __call__(self, request: Request) -> Principal:  # type: ignore[override]
        token = _bearer_token(request.headers.get("authorization"))
        if token is None:
            raise NotAuthenticated()
        principal = await principal_for_token(request.app.state, token)
        if self.users_only and not principal.is_user:
            raise PermissionDenied("This route is for signed-in users, not API clients")
        if self.permission is not None and not principal.can(self.permission):
            raise PermissionDenied(f"Requires the permission {self.permission}", permission=self.permission)
        if self.scope is not None and not principal.has_scope(self.scope):
            raise PermissionDenied(f"Requires the scope {self.scope}", scope=self.scope)
        return principal


CurrentPrincipal = Annotated[Principal, Depends(Authenticated())]
CurrentUser = Annotated[Principal, Depends(Authenticated(users_only=True))]


def require(permission: str) -> Authenticated:
    """The dependency answering the signed-in user when they hold `permission`, else 403."""
    return Authenticated(permission=permission)


def require_scope(scope: str) -> Authenticated:
    """The dependency answering the API client when its token carries `scope`, else 403."""
    return Authenticated(scope=scope)


async def idempotency_principal(scope: Scope) -> str | None:
    """Whose Idempotency-Key namespace a request uses: the *authenticated* caller (the account still active,
    its token not revoked), or the client address when there is no token. None when a token is present
    but does not authenticate: the route answers 401 and nothing is replayed or remembered."""
    authorization = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            authorization = value.decode("latin-1")
            break
    if authorization is None:
        client = scope.get("client")
        return f"anonymous:{client[0] if client else 'unknown'}"
    token = _bearer_token(authorization)
    if token is None:
        return None
    try:
        principal = await principal_for_token(scope["app"].state, token)
    except DomainError:
        return None
    return f"{principal.kind}:{principal.id}"
