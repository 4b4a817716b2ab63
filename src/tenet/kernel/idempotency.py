"""`Idempotency-Key` on POST, as API.md says.

The same key from the same principal within 24 h replays the first response (status, body and the
headers that matter) with `Idempotent-Replayed: true`. The same key with a different request is 422
`IDEMPOTENCY_KEY_REUSED`. A duplicate that arrives while the first is still running gets 409
`IDEMPOTENCY_REQUEST_IN_PROGRESS` with `Retry-After`. Answers 409, 429 and 503 (and any 5xx) are not
stored: they describe a moment, not the request, so a retry must run again. Nor is an answer marked
`Cache-Control: no-store` (it carries a secret shown once, such as a new API client's secret): keeping
it for replay would keep the secret in plain text for a day.

Serialisation: the primary key (principal, key) of `kernel.idempotency_key`. The first request claims
the key with INSERT .. ON CONFLICT in its own short transaction; every duplicate finds the row. A claim
carries a lease, so a process that died mid-request does not block the key for 24 hours.

Known window (docs/decisions.md): the handler's transaction and the stored response commit separately.
If the process dies between the two, the lease expires and a retry runs the handler again; domain rules
(unique keys, conditional transitions) then answer it like any second attempt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.postgresql import insert
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.db.database import Database
from tenet.kernel import errors
from tenet.kernel.clock import Clock
from tenet.kernel.errors import PROBLEM_JSON, DomainError
from tenet.kernel.models import IdempotencyKey

log = logging.getLogger(__name__)

HEADER = b"idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_TTL = timedelta(hours=24)
LEASE = timedelta(seconds=60)
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, no spaces
_NOT_STORED = {409, 429, 503}
# Response headers that belong to one exchange, not to the stored answer.
_TRANSIENT_HEADERS = {b"date", b"server", b"x-request-id", b"content-length", b"connection",
                      b"transfer-encoding", b"set-cookie"}

PrincipalResolver = Callable[[Scope], str | None]


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
        table = IdempotencyKey.__table__
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
        return result.rowcount or 0


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def _send_problem(send: Send, error: DomainError) -> None:
    body = json.dumps(error.to_problem()).encode()
    headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class IdempotencyMiddleware:
    """Pure ASGI middleware; reads `db`, `clock` and `idempotency_principal` from `app.state`."""

    def __init__(self, app: ASGIApp, *, exempt_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.exempt_paths = exempt_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_key = _header(scope, HEADER) if scope["type"] == "http" and scope["method"] == "POST" else None
        if raw_key is None or scope["path"] in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        if not _KEY_PATTERN.match(raw_key):
            await _send_problem(send, errors.IdempotencyKeyInvalid(
                "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces"))
            return
        state = scope["app"].state
        resolve: PrincipalResolver = state.idempotency_principal
        principal = resolve(scope)
        if principal is None:
            # No identifiable caller (an invalid token): the route answers 401; nothing to remember.
            await self.app(scope, receive, send)
            return

        body = await _read_body(receive)  # the size limit is enforced by the middleware outside this one
        fingerprint = hashlib.sha256(b"\n".join([
            scope["method"].encode(), scope["path"].encode(), scope.get("query_string", b""),
            (_header(scope, b"content-type") or "").encode(), body,
        ])).hexdigest()

        store = IdempotencyStore(state.db)
        clock: Clock = state.clock
        outcome = await store.claim(principal, raw_key, fingerprint, clock.now())
        if isinstance(outcome, Mismatch):
            await _send_problem(send, errors.IdempotencyKeyReused())
            return
        if isinstance(outcome, InFlight):
            await _send_problem(send, errors.IdempotencyRequestInProgress(
                headers={"Retry-After": str(outcome.retry_after)}))
            return
        if isinstance(outcome, Replay):
            headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers]
            headers += [(b"content-length", str(len(outcome.body)).encode()),
                        (REPLAYED_HEADER.lower().encode(), b"true")]
            await send({"type": "http.response.start", "status": outcome.status, "headers": headers})
            await send({"type": "http.response.body", "body": outcome.body})
            return

        await self._run_and_remember(scope, send, body, store, principal, raw_key, outcome.lock_token)

    async def _run_and_remember(self, scope: Scope, send: Send, body: bytes, store: IdempotencyStore,
                                principal: str, key: str, token: uuid.UUID) -> None:
        status = 500
        headers: list[list[str]] = []
        chunks: list[bytes] = []
        delivered = False

        async def replay_receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def capture_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers.extend(
                    [k.decode("latin-1"), v.decode("latin-1")]
                    for k, v in message.get("headers", ()) if k.lower() not in _TRANSIENT_HEADERS
                )
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay_receive, capture_send)
        except BaseException:
            await store.release(principal, key, token)
            raise
        no_store = any(name.lower() == "cache-control" and "no-store" in value.lower() for name, value in headers)
        if status in _NOT_STORED or status >= 500 or no_store:
            await store.release(principal, key, token)
        else:
            await store.complete(principal, key, token, status, headers, b"".join(chunks))


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)
