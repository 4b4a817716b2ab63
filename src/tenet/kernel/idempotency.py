"""`Idempotency-Key` on POST, as API.md says.

The same key from the same principal within 24 h replays the first response (status, body and the
headers that matter) with `Idempotent-Replayed: true`. The same key with a different request is 422
`IDEMPOTENCY_KEY_REUSED`. A duplicate that arrives while the first is still running gets 409
`IDEMPOTENCY_REQUEST_IN_PROGRESS` with `Retry-After`. Answers 409, 429 and 503 (and any 5xx) are not
stored: they describe a moment, not the request, so a retry must run again. Nor is an answer marked
`Cache-Control: no-store` (it carries a secret shown once, such as a new API client's secret): keeping
it for replay would keep the secret in plain text for a day.

It runs at the route (`run_idempotent`, called by `tenet.kernel.http.TenetRoute`), so it knows what the
route is: routes marked `@not_idempotent` (OAuth token answers) ignore the header; routes that stream their
body (`@streams_body`: uploads of hundreds of MiB) honour it without reading the body first, so their
fingerprint is the method, path, query and media type only (a retried upload is recognised by its key, and
its body is never buffered nor compared; the multipart boundary, new on every attempt, is left out); every
other POST reads its body within the route's own size limit and fingerprints it. The caller is *authenticated*
before anything is replayed: a token of a disabled account, or one revoked since, replays nothing (the route
answers 401).

Serialisation: the primary key (principal, key) of `kernel.idempotency_key`. The first request claims
the key with INSERT .. ON CONFLICT in its own short transaction; every duplicate finds the row. A claim
carries a short lease that is renewed while the request runs, so a long request keeps its claim and a
process that died mid-request blocks the key for at most one lease (duplicates meanwhile get 409 with
`Retry-After`). When the database is unreachable the client gets 503 with `Retry-After`, never a 500.

Known window (docs/decisions.md): the handler's transaction and the stored response commit separately,
the handler's first (its function-scoped dependencies are closed before the answer is kept, so a refusal
rolls back what the handler wrote). If the process dies between the two, the lease expires and a retry
runs the handler again; domain rules (unique keys, conditional transitions) then answer it like any second
attempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import Table, delete, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from tenet.db.database import Database
from tenet.kernel import errors
from tenet.kernel.clock import Clock
from tenet.kernel.models import IdempotencyKey

log = logging.getLogger(__name__)

HEADER = "idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_TTL = timedelta(hours=24)
LEASE = timedelta(seconds=15)
# While a request runs, its claim is extended every RENEW_EVERY seconds (a third of the lease).
RENEW_EVERY = LEASE.total_seconds() / 3
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}\Z")  # printable ASCII, no spaces
_NOT_STORED = {409, 429, 503}
# Where FastAPI keeps the exit stack of a request's function-scoped dependencies (fastapi.routing).
_FUNCTION_STACK = "fastapi_function_astack"
# Response headers that belong to one exchange, not to the stored answer.
_TRANSIENT_HEADERS = {b"date", b"server", b"x-request-id", b"content-length", b"connection",
                      b"transfer-encoding", b"set-cookie"}


@dataclass(frozen=True)
class Claimed:
    lock_token: uuid.UUID


@dataclass(frozen=True)
class Replay:
    status: int
    headers: list[list[str]]
    body: bytes


@dataclass(frozen=True)
class Mismatch:
    pass


@dataclass(frozen=True)
class InFlight:
    retry_after: int


class IdempotencyStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(
        self, principal: str, key: str, fingerprint: str, now: datetime
    ) -> Claimed | Replay | Mismatch | InFlight:
        lock_token = uuid.uuid4()
        table = cast(Table, IdempotencyKey.__table__)
        fresh = {
            "fingerprint": fingerprint, "state": "in_flight", "lock_token": lock_token,
            "locked_until": now + LEASE, "created_at": now, "expires_at": now + KEY_TTL,
            "response_status": None, "response_headers": None, "response_body": None,
        }
        statement = (
            insert(table).values(principal=principal, key=key, **fresh)
            # Take the row over only when it is dead: expired, or a claim whose lease ran out.
            .on_conflict_do_update(
                index_elements=[table.c.principal, table.c.key],
                set_=fresh,
                where=(table.c.expires_at <= now) | ((table.c.state == "in_flight") & (table.c.locked_until <= now)),
            )
            .returning(table.c.lock_token)
        )
        for _ in range(3):
            async with self.db.unit_of_work() as session:
                won = (await session.execute(statement)).scalar_one_or_none()
                if won == lock_token:
                    return Claimed(lock_token)
                row = (await session.execute(
                    select(IdempotencyKey).where(IdempotencyKey.principal == principal, IdempotencyKey.key == key)
                )).scalar_one_or_none()
            if row is None:
                continue  # released between our two statements; claim again
            if row.fingerprint != fingerprint:
                return Mismatch()
            if row.state == "in_flight":
                return InFlight(retry_after=max(1, min(5, int((row.locked_until - now).total_seconds()))))
            return Replay(row.response_status or 200, row.response_headers or [], row.response_body or b"")
        return InFlight(retry_after=1)

    async def complete(self, principal: str, key: str, token: uuid.UUID, status: int,
                       headers: list[list[str]], body: bytes) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(
                update(IdempotencyKey)
                .where(IdempotencyKey.principal == principal, IdempotencyKey.key == key,
                       IdempotencyKey.lock_token == token)
                .values(state="completed", response_status=status, response_headers=headers, response_body=body)
            )

    async def renew(self, principal: str, key: str, token: uuid.UUID, now: datetime) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(
                update(IdempotencyKey)
                .where(IdempotencyKey.principal == principal, IdempotencyKey.key == key,
                       IdempotencyKey.lock_token == token, IdempotencyKey.state == "in_flight")
                .values(locked_until=now + LEASE)
            )

    async def release(self, principal: str, key: str, token: uuid.UUID) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(
                delete(IdempotencyKey).where(IdempotencyKey.principal == principal, IdempotencyKey.key == key,
                                             IdempotencyKey.lock_token == token)
            )


async def purge_expired(db: Database, now: datetime) -> int:
    async with db.unit_of_work() as session:
        result = await session.execute(text("DELETE FROM kernel.idempotency_key WHERE expires_at <= :now"),
                                       {"now": now})
        return int(getattr(result, "rowcount", 0) or 0)




# --- at the route ------------------------------------------------------------------------------------

NOT_IDEMPOTENT_ATTR = "__tenet_not_idempotent__"
STREAMS_BODY_ATTR = "__tenet_streams_body__"

F = TypeVar("F", bound=Callable[..., Any])


def not_idempotent(endpoint: F) -> F:
    """Mark a POST route whose answers must never be stored for replay (they are secrets, like tokens)."""
    setattr(endpoint, NOT_IDEMPOTENT_ATTR, True)
    return endpoint


def streams_body(endpoint: F) -> F:
    """Mark a route that streams its request body (uploads): never buffered, so its Idempotency-Key's
    fingerprint leaves the body out."""
    setattr(endpoint, STREAMS_BODY_ATTR, True)
    return endpoint


def honours_idempotency_key(endpoint: Callable[..., Any]) -> bool:
    return not getattr(endpoint, NOT_IDEMPOTENT_ATTR, False)


def streams_its_body(endpoint: Callable[..., Any]) -> bool:
    return bool(getattr(endpoint, STREAMS_BODY_ATTR, False))


PrincipalResolver = Callable[[Scope], Awaitable[str | None]]
Handler = Callable[[Request], Awaitable[Response]]


def _fingerprint(request: Request, body: bytes | None) -> str:
    """What makes two requests under one key the same request. `body` None: a streamed body, not read; its
    media type counts without parameters (a multipart boundary is new on every attempt)."""
    content_type = request.headers.get("content-type", "")
    if body is None:
        content_type = content_type.split(";", 1)[0].strip().lower()
    return hashlib.sha256(b"\n".join([
        request.method.encode(), request.url.path.encode(), request.scope.get("query_string", b""),
        content_type.encode(), b"" if body is None else body, b"streamed" if body is None else b"",
    ])).hexdigest()


def _storable_headers(response: Response) -> list[list[str]]:
    return [[k.decode("latin-1"), v.decode("latin-1")] for k, v in response.raw_headers
            if k.lower() not in _TRANSIENT_HEADERS]


def _replay(outcome: Replay) -> Response:
    response = Response(content=outcome.body, status_code=outcome.status)
    response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers
                            if k.lower().encode("latin-1") != b"content-length"]
    response.headers["content-length"] = str(len(outcome.body))
    response.headers[REPLAYED_HEADER] = "true"
    return response


async def _keep_claim(store: IdempotencyStore, principal: str, key: str, token: uuid.UUID, clock: Clock) -> None:
    while True:
        await asyncio.sleep(RENEW_EVERY)
        try:
            await store.renew(principal, key, token, clock.now())
        except Exception:  # the database is away: the lease simply runs out
            log.warning("could not renew an idempotency claim", exc_info=True)


async def run_idempotent(request: Request, handler: Handler, raw_key: str, *, streamed: bool = False) -> Response:
    """Run `handler` once per (principal, Idempotency-Key): claim, run and remember, or replay. `streamed`: the
    route reads its body as a stream (an upload), so the body is neither read here nor fingerprinted."""
    if not _KEY_PATTERN.match(raw_key):
        raise errors.IdempotencyKeyInvalid("Idempotency-Key must be 1 to 255 printable ASCII characters without spaces")
    state = request.app.state
    resolve: PrincipalResolver = state.idempotency_principal
    principal = await resolve(request.scope)
    if principal is None:
        # The token does not authenticate: the route answers 401, and nothing is replayed or remembered.
        return await handler(request)
    # Within the route's own body limit; cached for the handler. A streamed body is left to the handler.
    body = None if streamed else await request.body()
    store = IdempotencyStore(state.db)
    clock: Clock = state.clock
    try:
        outcome = await store.claim(principal, raw_key, _fingerprint(request, body), clock.now())
    except (OperationalError, InterfaceError, PoolTimeoutError) as exc:
        log.warning("idempotency claim failed: database unavailable (%s)", type(exc).__name__)
        raise errors.ServiceUnavailable("The database is not reachable right now",
                                        headers={"Retry-After": "2"}) from None
    if isinstance(outcome, Mismatch):
        raise errors.IdempotencyKeyReused()
    if isinstance(outcome, InFlight):
        raise errors.IdempotencyRequestInProgress(headers={"Retry-After": str(outcome.retry_after)})
    if isinstance(outcome, Replay):
        return _replay(outcome)
    renewal = asyncio.create_task(_keep_claim(store, principal, raw_key, outcome.lock_token, clock))
    try:
        try:
            response = await _within_own_dependencies(request, handler)
        except Exception as exc:
            # A refusal (a DomainError, bad input) is an answer like any other: render it with the app's own
            # handler so it can be stored and replayed. Anything unexpected goes on to the 500 handler.
            render = _handler_for(request, exc)
            if render is None:
                raise
            response = await render(request, exc)
    except BaseException:
        renewal.cancel()
        await _release_quietly(store, principal, raw_key, outcome.lock_token)
        raise
    renewal.cancel()
    headers = _storable_headers(response)
    no_store = any(name.lower() == "cache-control" and "no-store" in value.lower() for name, value in headers)
    body_bytes = getattr(response, "body", None)
    # An answer to a client that went away (an upload cut short) reached nobody: its retry must run again.
    if response.status_code in _NOT_STORED or response.status_code >= 500 or no_store \
            or not isinstance(body_bytes, bytes | bytearray) or await request.is_disconnected():
        await _release_quietly(store, principal, raw_key, outcome.lock_token)
        return response
    try:
        await store.complete(principal, raw_key, outcome.lock_token, response.status_code, headers, bytes(body_bytes))
    except Exception:
        # The handler's work is committed; only its replay record is lost. The claim's lease runs out and a
        # retry runs the handler again (the known window above).
        log.warning("could not store an idempotent answer", exc_info=True)
    return response


async def _within_own_dependencies(request: Request, handler: Handler) -> Response:
    """Run the route with its function-scoped dependencies (the unit of work) closed before this returns.

    FastAPI closes them after the route class's handler, this layer included: a refusal rendered here would end
    a unit of work that never saw the exception (committing what the handler wrote, or failing at commit after
    a failed flush), and a success would be stored before its transaction committed. With its own exit stack
    the route's transaction commits, or rolls back and re-raises, first; then the answer is rendered and kept.
    """
    previous = request.scope.get(_FUNCTION_STACK)
    try:
        async with AsyncExitStack() as stack:
            request.scope[_FUNCTION_STACK] = stack
            return await handler(request)
    finally:
        request.scope[_FUNCTION_STACK] = previous


def _handler_for(request: Request, exc: Exception) -> Callable[[Request, Exception], Awaitable[Response]] | None:
    """The app's exception handler for `exc` (most specific class first), except the catch-all."""
    handlers = request.app.exception_handlers
    for kind in type(exc).__mro__:
        if kind is Exception or kind is BaseException:
            return None
        found = handlers.get(kind)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


async def _release_quietly(store: IdempotencyStore, principal: str, key: str, token: uuid.UUID) -> None:
    try:
        await store.release(principal, key, token)
    except Exception:
        # The database is away: the claim stays until its lease runs out (at most LEASE), and a retry
        # meanwhile gets 409 IDEMPOTENCY_REQUEST_IN_PROGRESS with Retry-After.
        log.warning("could not release an idempotency claim", exc_info=True)
