"""create_app(): the one FastAPI application serving every domain of the composition root."""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from starlette.types import Scope

from tenet import __version__, ops
from tenet.db.database import Database
from tenet.db.embedded import resolve_database_url
from tenet.domains import load_all
from tenet.iam.auth import idempotency_principal
from tenet.iam.passwords import Passwords
from tenet.iam.settings import IamSettings
from tenet.iam.tokens import AccessTokens
from tenet.kernel.clock import Clock, SystemClock
from tenet.kernel.http import (
    BodyLimitMiddleware,
    UnhandledErrorMiddleware,
    install_error_handlers,
    install_openapi,
)
from tenet.kernel.outbox import OutboxDispatcher, install_delivery
from tenet.kernel.ratelimit import RateLimiter
from tenet.kernel.replica import ReadYourWritesMiddleware
from tenet.kernel.route_index import install_route_index
from tenet.kernel.settings import KernelSettings, section
from tenet.observability import ObservabilityMiddleware, configure_logging
from tenet.settings import Settings
from tenet.web import account, docs, pages

log = logging.getLogger(__name__)

DESCRIPTION = """
Tenet runs four invariant-first business systems on one PostgreSQL database: workspaces and
invitations, social collaboration, meeting attendance, and the hotel reservation workflow.

**Authentication.** `POST /api/v1/auth/token` (OAuth2 password or client_credentials grant), then
`Authorization: Bearer <access_token>`. Use the *Authorize* button with an email and password.

**Errors** are `application/problem+json` with a stable `code`. **Lists** take `limit` and `cursor`
and answer `{items, next_cursor}`. **POST** accepts `Idempotency-Key` (replays within 24 h carry
`Idempotent-Replayed: true`).
"""


def _lifespan(settings: KernelSettings, database: Database | None, *, run_background_tasks: bool
              ) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What the process holds while it serves: its database (unless a test passed one), the rate limiter, the
    mail dispatcher; released in reverse on the way out."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = database is None
        if owned:
            url = resolve_database_url(settings.configured_database_url, settings.pgdata_dir)
            app.state.db = Database.from_settings(
                settings, url, standby=True, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow,
                pool_timeout=settings.db_pool_timeout_seconds, read_pool_size=settings.db_read_pool_size,
            )
        app.state.rate_limiter = RateLimiter(app.state.db)
        mail = settings.mail()
        dispatcher = None
        if run_background_tasks and mail.smtp_configured:
            dispatcher = OutboxDispatcher(app.state.db, mail, app.state.clock)
            dispatcher.start()
        # Everything allocated so far lives as long as the process: keep it out of the collector's
        # generations so each collection scans only what requests allocate.
        gc.collect()
        gc.freeze()
        try:
            with install_delivery(mail, dispatcher=dispatcher):
                yield
        finally:
            if dispatcher is not None:
                await dispatcher.stop()
            if owned:
                await app.state.db.dispose()

    return lifespan


async def _commit_position(scope: Scope) -> str | None:
    database: Database = scope["app"].state.db
    return await database.commit_position()


def create_app(
    settings: KernelSettings | None = None,
    *,
    database: Database | None = None,
    clock: Clock | None = None,
    run_background_tasks: bool = True,
) -> FastAPI:
    """Build the application. Tests pass their own `database` (bound to a rolled-back transaction) and
    a frozen `clock`; production passes nothing and gets the settings' database and the system clock."""
    settings = settings or Settings()
    iam_settings = section(settings, IamSettings)
    configure_logging(settings.log_level, settings.log_format)
    domains = load_all()

    app = FastAPI(
        title="Tenet",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan(settings, database, run_background_tasks=run_background_tasks),
        docs_url=None,  # tenet.web.docs serves /docs and /redoc from its own assets (no CDN)
        redoc_url=None,
        openapi_tags=[
            *(dict(tag) for domain in domains for tag in domain.openapi_tags),
            {"name": "operations", "description": "Health, readiness, metrics"},
        ],
    )
    app.state.settings = settings
    app.state.clock = clock or SystemClock()
    app.state.passwords = Passwords(time_cost=iam_settings.password_hash_time_cost,
                                    memory_kib=iam_settings.password_hash_memory_kib)
    app.state.access_tokens = AccessTokens(settings.signing_key(),
                                           timedelta(seconds=iam_settings.access_token_ttl_seconds))
    app.state.idempotency_principal = idempotency_principal
    if database is not None:
        app.state.db = database
        app.state.rate_limiter = RateLimiter(database)

    install_error_handlers(app)
    install_openapi(app)
    app.include_router(pages.router)
    app.include_router(account.router)
    app.mount(pages.STATIC_PATH, pages.static_files(), name="static")
    app.include_router(docs.router)
    docs.mount_assets(app)
    app.include_router(ops.router)
    for domain in domains:
        for router in domain.routers:
            app.include_router(router)
    app.include_router(account.fallback)  # last: a console address no page answers
    install_route_index(app)  # after every route: matching by literal prefix, the same routes found

    # Added innermost first: a request passes Observability -> UnhandledError -> BodyLimit -> the routes.
    if settings.database_read_url:
        # Read-your-writes on the standby's read path (tenet.kernel.replica): the position in, the position out.
        app.add_middleware(ReadYourWritesMiddleware, commit_position=_commit_position,
                           cookie_max_age=math.ceil(settings.database_read_max_lag_seconds) + 5)
    app.add_middleware(BodyLimitMiddleware, max_body_size=settings.max_json_body_bytes)
    app.add_middleware(UnhandledErrorMiddleware)
    app.add_middleware(ObservabilityMiddleware)
    return app
