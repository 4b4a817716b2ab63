"""create_app(): the one FastAPI application serving every system."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI

from tenet import __version__, ops
from tenet.db.database import Database
from tenet.db.embedded import resolve_database_url
from tenet.iam import api as iam_api
from tenet.iam.auth import idempotency_principal
from tenet.iam.passwords import Passwords
from tenet.iam.tokens import AccessTokens
from tenet.kernel.clock import Clock, SystemClock
from tenet.kernel.http import API_PREFIX, BodySizeLimitMiddleware, install_error_handlers, install_openapi
from tenet.kernel.idempotency import IdempotencyMiddleware
from tenet.kernel.outbox import OutboxDispatcher
from tenet.kernel.ratelimit import RateLimiter
from tenet.observability import ObservabilityMiddleware, configure_logging
from tenet.settings import Settings
from tenet.web import docs, pages
from tenet.workspaces import api as workspaces_api

log = logging.getLogger(__name__)

# OAuth token answers are never stored for replay (they are secrets, and RFC 6749 says no-store).
IDEMPOTENCY_EXEMPT = frozenset({f"{API_PREFIX}/auth/token", f"{API_PREFIX}/auth/refresh", f"{API_PREFIX}/auth/revoke"})

DESCRIPTION = """
Tenet runs four invariant-first business systems on one PostgreSQL database: workspaces and
invitations, social collaboration, meeting attendance, and the hotel reservation workflow.

**Authentication.** `POST /api/v1/auth/token` (OAuth2 password or client_credentials grant), then
`Authorization: Bearer <access_token>`. Use the *Authorize* button with an email and password.

**Errors** are `application/problem+json` with a stable `code`. **Lists** take `limit` and `cursor`
and answer `{items, next_cursor}`. **POST** accepts `Idempotency-Key` (replays within 24 h carry
`Idempotent-Replayed: true`).
"""


def create_app(
    settings: Settings | None = None,
    *,
    database: Database | None = None,
    clock: Clock | None = None,
    run_background_tasks: bool = True,
) -> FastAPI:
    """Build the application. Tests pass their own `database` (bound to a rolled-back transaction) and
    a frozen `clock`; production passes nothing and gets the settings' database and the system clock."""
    settings = settings or Settings()
    configure_logging(settings.log_level, settings.log_format)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = database is None
        if owned:
            url = resolve_database_url(settings.database_url, settings.pgdata_dir)
            app.state.db = Database.from_url(
                url, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow,
                pool_timeout=settings.db_pool_timeout_seconds,
            )
        app.state.rate_limiter = RateLimiter(app.state.db)
        dispatcher = None
        if run_background_tasks and settings.smtp_host:
            dispatcher = OutboxDispatcher(app.state.db, settings, app.state.clock)
            dispatcher.start()
        try:
            yield
        finally:
            if dispatcher is not None:
                await dispatcher.stop()
            if owned:
                await app.state.db.dispose()

    app = FastAPI(
        title="Tenet",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # tenet.web.docs serves /docs and /redoc from its own assets (no CDN)
        redoc_url=None,
        openapi_tags=[
            {"name": "auth", "description": "Registration, tokens, who am I"},
            {"name": "iam", "description": "Users, roles and API clients (administrators)"},
            {"name": workspaces_api.TAG, "description": workspaces_api.TAG_DESCRIPTION},
            {"name": "operations", "description": "Health, readiness, metrics"},
        ],
    )
    app.state.settings = settings
    app.state.clock = clock or SystemClock()
    app.state.passwords = Passwords(time_cost=settings.password_hash_time_cost,
                                    memory_kib=settings.password_hash_memory_kib)
    app.state.access_tokens = AccessTokens(settings.signing_key(),
                                           timedelta(seconds=settings.access_token_ttl_seconds))
    app.state.idempotency_principal = idempotency_principal
    if database is not None:
        app.state.db = database
        app.state.rate_limiter = RateLimiter(database)

    install_error_handlers(app)
    install_openapi(app, idempotency_exempt=IDEMPOTENCY_EXEMPT)
    app.include_router(pages.router)
    app.mount(pages.STATIC_PATH, pages.static_files(), name="static")
    app.include_router(docs.router)
    docs.mount_assets(app)
    app.include_router(ops.router)
    for router in iam_api.routers:
        app.include_router(router)
    app.include_router(workspaces_api.router)

    # Added innermost first: the request passes Observability -> BodySizeLimit -> Idempotency -> routes.
    app.add_middleware(IdempotencyMiddleware, exempt_paths=IDEMPOTENCY_EXEMPT)
    app.add_middleware(BodySizeLimitMiddleware, limit_for=lambda path: settings.max_json_body_bytes)
    app.add_middleware(ObservabilityMiddleware)
    return app
