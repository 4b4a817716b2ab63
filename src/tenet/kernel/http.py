"""The HTTP edge every domain shares: problem+json handlers, the route class (media types, Idempotency-Key),
body size limits per route, pre-serialised JSON answers and If-Match.

Bad input of any kind becomes a 4xx problem document with a stable code; nothing here ever lets a
database message or a stack trace reach a client. Every problem is written by tenet.kernel.problems.

Body limits are Starlette's own: `BodyLimitMiddleware` applies the default limit
(TENET_MAX_JSON_BODY_BYTES) to every request, and a route that takes more (an upload) says so with
FastAPI's `max_body_size=`, which raises the limit for that route only. Both count streamed (chunked)
bodies as well as declared lengths.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.params import File, Form
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY, RequestBodyLimitMiddleware
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.kernel import errors, idempotency, problems
from tenet.kernel.availability import unreachable_reason
from tenet.kernel.errors import PROBLEM_JSON, DomainError

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


class ValidationIssue(BaseModel):
    loc: list[str | int] = Field(description="Where the problem is: body/query/path/header, then the field path")
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document. `code` is stable; branch on it, not on `title` or `detail`."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"examples": [{
            "type": "urn:tenet:problem:NOT_FOUND", "title": "Not found", "status": 404,
            "detail": "No workspace with this id", "code": "NOT_FOUND",
        }]},
    )

    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
    errors: list[ValidationIssue] | None = None


_STATUS_DESCRIPTIONS = {
    400: "Bad request (malformed body, invalid cursor or header)",
    401: "Missing, invalid or expired access token",
    403: "The caller lacks the permission",
    404: "No such resource, or one the caller may not see",
    409: "State conflict; the problem's `code` says which",
    413: "Request body too large",
    415: "Unsupported Content-Type",
    422: "Request does not match the schema, a value is out of range, or an Idempotency-Key was reused "
         "with another body",
    412: "The resource changed since the version named by If-Match",
    428: "The route needs If-Match (or expected_version) naming the version read",
    429: "Rate limited; retry after `Retry-After` seconds",
}


_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def _problem_response(status: int) -> dict[str, Any]:
    return {"description": _STATUS_DESCRIPTIONS.get(status, "Problem"),
            "content": {PROBLEM_JSON: {"schema": _PROBLEM_REF}}}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries documenting the problem+json answers a route gives on purpose (409 with
    its domain codes, 404, ...). The answers every route of a kind can give are added by
    `install_openapi`."""
    return {status: _problem_response(status) for status in statuses}


def _document_problems(document: dict[str, Any], idempotency_exempt: frozenset[str]) -> dict[str, Any]:
    """Make the document say what the HTTP edge really answers: problem+json for every error status the
    kernel can produce for an operation of that shape, and the `Idempotency-Key` header on POST."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components.update(Problem.model_json_schema(ref_template="#/components/schemas/{model}")["$defs"])
    components["Problem"] = {k: v for k, v in Problem.model_json_schema(
        ref_template="#/components/schemas/{model}").items() if k != "$defs"}
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            parameters = operation.get("parameters", [])
            statuses: set[int] = set()
            if parameters or "requestBody" in operation:
                statuses.add(422)
            if "requestBody" in operation:
                statuses |= {400, 413, 415}
            if any(p.get("in") == "path" for p in parameters):
                statuses.add(404)
            if any(p.get("in") == "query" and p.get("name") == "cursor" for p in parameters):
                statuses.add(400)
            if operation.get("security"):
                statuses |= {401, 403}
            if method == "post" and path.startswith(API_PREFIX) and path not in idempotency_exempt:
                statuses |= {400, 409, 422}
                parameters.append({
                    "name": "Idempotency-Key", "in": "header", "required": False,
                    "description": "Replays the first answer for 24 h (1-255 printable ASCII characters)",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
                })
                operation["parameters"] = parameters
            for status in statuses:
                # FastAPI documents its 422 as application/json HTTPValidationError; ours is a problem.
                responses[str(status)] = _problem_response(status)
    return document


def install_openapi(app: FastAPI) -> None:
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            exempt = frozenset(
                context.path for context in iter_route_contexts(app.routes)
                if isinstance(context.original_route, APIRoute) and context.path
                and not idempotency.honours_idempotency_key(context.original_route.endpoint)
            )
            app.openapi_schema = _document_problems(get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes,
                tags=app.openapi_tags,
            ), exempt)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def problem_response(error: DomainError, request_id: str | None = None) -> Response:
    return problems.problem_response(error, request_id)


def _request_id(request: Request) -> str | None:
    return problems.request_id_of(request.scope)


def _validation_issues(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Never echo `input` back: it can hold a password or a token.
    return [
        {"loc": [str(p) if not isinstance(p, int) else p for p in issue.get("loc", ())],
         "msg": issue.get("msg", ""), "type": issue.get("type", "")}
        for issue in raw
    ]


async def _on_domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    if exc.status >= 500 and not getattr(exc, "quiet", False):
        log.error("domain error %s answered with %s", exc.code, exc.status)
    return problem_response(exc, _request_id(request))


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    raw = list(exc.errors())
    if any(issue.get("type") == "json_invalid" for issue in raw):
        return problem_response(errors.MalformedRequestBody("The body could not be parsed as JSON"),
                                _request_id(request))
    issues = _validation_issues(raw)
    detail = "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in issues[:5])
    return problem_response(errors.ValidationFailed(detail, errors=issues), _request_id(request))


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    error: DomainError
    if exc.status_code == 404:
        error = errors.RouteNotFound(f"No route for {request.method} {request.url.path}")
    elif exc.status_code == 405:
        error = errors.MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}")
        error.headers.update(exc.headers or {})
    elif exc.status_code == 413:
        error = errors.PayloadTooLarge()
    elif exc.status_code == 415:
        error = errors.UnsupportedMediaType()
    elif exc.status_code == 401:
        error = errors.NotAuthenticated()
    elif exc.status_code == 403:
        error = errors.PermissionDenied()
    else:
        error = errors.BadRequest(str(exc.detail))
        error.status = exc.status_code  # type: ignore[misc]  # an unusual status from a library
    return problem_response(error, _request_id(request))


def _database_unavailable(exc: Exception) -> DomainError:
    # The database is down or the pool is exhausted: not a bug, and the client may retry. The driver's error
    # class and SQLSTATE tell an operator which (connection refused, too many connections, pool timeout).
    original = getattr(exc, "orig", None)
    log.warning("database unavailable: %s (%s, SQLSTATE %s): %s", type(exc).__name__,
                type(original).__name__ if original is not None else "-", getattr(original, "sqlstate", None),
                str(original or exc).strip().splitlines()[0][:200] if str(original or exc).strip() else "")
    return errors.ServiceUnavailable("The database is not reachable right now", headers={"Retry-After": "2"})


async def _on_database_unavailable(request: Request, exc: Exception) -> Response:
    # Statements run on the driver's connection directly (kernel.statements) pass no SQLAlchemy event: a lost
    # connection asks the process's probe whether the database is gone.
    # (A deadlock or serialization failure is an OperationalError too, and no reason to probe.)
    availability = getattr(getattr(request.app.state, "db", None), "availability", None)
    if availability is not None and (isinstance(exc, PoolTimeoutError) or unreachable_reason(exc) is not None):
        availability.suspect()
    return problem_response(_database_unavailable(exc), _request_id(request))


async def _on_data_error(request: Request, exc: Exception) -> Response:
    # A value PostgreSQL cannot store (a NUL character in text, an out-of-range number) that a schema
    # did not catch: the request's fault, so a 422, but logged because a schema should have caught it.
    log.warning("database refused a value on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    error = errors.ValidationFailed("A value cannot be stored (for example a NUL character in a text field)")
    return problem_response(error, _request_id(request))


async def _on_overflow(request: Request, exc: Exception) -> Response:
    # Date arithmetic on a value at the calendar's edge (9999-12-31 plus a day, year 1 minus a time zone
    # offset) that a schema let through: the request's fault, so a 422, but logged with the place it
    # overflowed, because the route's schema should bound the value.
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    log.warning("value out of range on %s %s: %s (at %s)", request.method, request.url.path, exc, where)
    error = errors.ValueOutOfRange("A date, time or number in the request is too far out of range "
                                   "for this operation")
    return problem_response(error, _request_id(request))


async def _on_client_disconnect(request: Request, exc: Exception) -> Response:
    # The client went away before its body was complete (a route or the idempotency layer reading it): the
    # request's fault, answered like any malformed body (uploads say so in their own words); nobody reads it.
    return problem_response(errors.MalformedRequestBody("The body ended before it was complete"),
                            _request_id(request))


def unexpected_error(method: str, path: str, exc: Exception) -> DomainError:
    """The answer to an exception no handler claimed, logged once with its traceback: a 500 (a bug), or a
    503 when SQLAlchemy says the connection died under it."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return _database_unavailable(exc)
    log.error("unhandled error on %s %s", method, path, exc_info=exc)
    return errors.InternalError("An unexpected error occurred; quote the request id when reporting it")


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # The last resort only: Starlette runs the handler of `Exception` in its outermost layer, outside the
    # request id and the request log. UnhandledErrorMiddleware answers every exception of the app first.
    return problem_response(unexpected_error(request.method, request.url.path, exc), _request_id(request))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _on_domain_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(DataError, _on_data_error)
    # The transaction-free read path runs psycopg directly: its refusals of a value arrive unwrapped.
    app.add_exception_handler(psycopg.DataError, _on_data_error)
    app.add_exception_handler(OverflowError, _on_overflow)
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    # Likewise the statements a unit of work runs directly (kernel.statements): a lost connection, a deadlock
    # or serialization failure the client may retry.
    app.add_exception_handler(psycopg.OperationalError, _on_database_unavailable)
    app.add_exception_handler(psycopg.InterfaceError, _on_database_unavailable)
    app.add_exception_handler(OperationalError, _on_database_unavailable)
    app.add_exception_handler(InterfaceError, _on_database_unavailable)
    app.add_exception_handler(PoolTimeoutError, _on_database_unavailable)
    app.add_exception_handler(Exception, _on_unexpected)


# --- media types ------------------------------------------------------------------------------------


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _is_form(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ("application/x-www-form-urlencoded", "multipart/form-data")


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in request.headers


class TenetRoute(APIRoute):
    """The route class of every API router.

    - 415 when the body's Content-Type is not what the route reads (FastAPI would otherwise try to
      validate a text body as JSON and answer a confusing 422);
    - `Idempotency-Key` on POST (tenet.kernel.idempotency), unless the endpoint is marked
      `@not_idempotent`; an endpoint marked `@streams_body` has its key fingerprinted without its body.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        body_params = self.dependant.body_params
        checked = handler
        if body_params:
            expects_form = any(isinstance(p.field_info, Form | File) for p in body_params)
            accepts = _is_form if expects_form else _is_json
            wanted = "application/x-www-form-urlencoded or multipart/form-data" if expects_form else "application/json"

            async def checked_handler(request: Request) -> Response:
                if _has_body(request) and not accepts(request.headers.get("content-type", "")):
                    raise errors.UnsupportedMediaType(f"This route reads {wanted}")
                return await handler(request)

            checked = checked_handler
        if "POST" not in (self.methods or set()) or not idempotency.honours_idempotency_key(self.endpoint):
            return checked

        streamed = idempotency.streams_its_body(self.endpoint)

        async def idempotent_handler(request: Request) -> Response:
            raw_key = request.headers.get(idempotency.HEADER)
            if raw_key is None:
                return await checked(request)
            return await idempotency.run_idempotent(request, checked, raw_key, streamed=streamed)

        return idempotent_handler


# --- body size ---------------------------------------------------------------------------------------


class BodyLimitMiddleware:
    """Starlette's request body limit with our problem document.

    Starlette answers an over-limit body itself with a plain-text 413 when the body was declared too long
    (its responder replaces whatever the app answers). This layer passes the default limit to Starlette's
    middleware and rewrites that plain-text answer into the problem+json every other error is. Routes
    raise their own limit with `max_body_size=` (Starlette then enforces the route's limit, here)."""

    def __init__(self, app: ASGIApp, *, max_body_size: int) -> None:
        self.inner = RequestBodyLimitMiddleware(app, max_body_size=max_body_size)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        rewriting = False

        async def problem_send(message: Message) -> None:
            nonlocal rewriting
            if message["type"] == "http.response.start" and message["status"] == 413:
                content_type = dict(message.get("headers", ())).get(b"content-type", b"")
                if content_type.startswith(b"text/plain"):
                    rewriting = True
                    limit = scope.get(MAX_BODY_SIZE_SCOPE_KEY)
                    detail = f"The body is larger than {limit} bytes" if limit else None
                    await problems.send_problem(send, scope, errors.PayloadTooLarge(detail), close=True)
                    return
            if rewriting:
                return  # the plain-text body of the answer we replaced
            await send(message)

        await self.inner(scope, receive, problem_send)


class UnhandledErrorMiddleware:
    """Answers an exception no exception handler claimed with a problem+json 500 (`INTERNAL_ERROR`) that
    carries the request id, and logs it once with its traceback.

    Starlette runs the handler registered for `Exception` in ServerErrorMiddleware, its outermost layer:
    outside ObservabilityMiddleware, so that answer had no X-Request-ID header, its log line no request id,
    and Starlette then re-raised the exception for the server to log a second time. This layer sits just
    inside ObservabilityMiddleware (which adds the header, counts the 500 and logs the request) and lets
    nothing through. When the answer had already started (a streamed body failing midway) nothing can
    replace it: the error is logged and the server closes the connection, so the client sees a cut answer
    rather than a complete-looking one.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            error = unexpected_error(scope["method"], scope["path"], exc)
            if not started:
                await problems.send_problem(send, scope, error)


# --- answers -----------------------------------------------------------------------------------------


def json_response(value: BaseModel, *, status_code: int = 200, headers: Mapping[str, str] | None = None,
                  exclude_none: bool = False) -> Response:
    """A model answered as JSON bytes straight from Pydantic's serializer (the same bytes FastAPI would
    produce for it), skipping the response model's re-validation: the hot read routes return this and
    keep `response_model=` for the OpenAPI contract."""
    body = value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_none=exclude_none)
    return Response(content=body, status_code=status_code, headers=headers, media_type="application/json")


def etag(version: int) -> str:
    """The strong ETag of a versioned resource: its version, quoted."""
    return f'"{version}"'


_ETAG = re.compile(r'^\s*(?:W/)?"(\d{1,9})"\s*\Z')


def if_match_version(value: str | None) -> int | None:
    """The version an `If-Match` header names (`"3"` or `W/"3"`), None when absent; 400 when malformed.
    A route that takes it compares it in its conditional UPDATE and answers 412 PRECONDITION_FAILED with
    the current version when the resource moved on (tenet.kernel.transitions)."""
    if value is None or value.strip() == "*":
        return None
    match = _ETAG.match(value)
    if match is None:
        raise errors.BadRequest('If-Match must be an ETag of this resource, like "3"')
    return int(match.group(1))


@dataclass(frozen=True)
class ExpectedVersion:
    """The version a caller says it read, and where it said so: a stale `If-Match` is answered 412
    PRECONDITION_FAILED (RFC 9110), a stale body `expected_version` 409 VERSION_CONFLICT."""

    value: int
    from_header: bool

    def stale(self, current_version: int | None) -> DomainError:
        if self.from_header:
            return errors.PreconditionFailed(current_version=current_version)
        return errors.VersionConflict(current_version=current_version)


@overload
def expected_version(if_match: str | None, body_version: int | None, *,
                     required: Literal[True] = ...) -> ExpectedVersion: ...


@overload
def expected_version(if_match: str | None, body_version: int | None, *,
                     required: bool) -> ExpectedVersion | None: ...


def expected_version(if_match: str | None, body_version: int | None, *, required: bool = True
                     ) -> ExpectedVersion | None:
    """The version a write is conditioned on: `If-Match` first, else the body's `expected_version`; when
    neither is given, 428 PRECONDITION_REQUIRED if `required`, else None. Both given and different: 400."""
    header = if_match_version(if_match)
    if header is not None and body_version is not None and header != body_version:
        raise errors.BadRequest("If-Match and expected_version name different versions")
    if header is not None:
        return ExpectedVersion(header, True)
    if body_version is not None:
        return ExpectedVersion(body_version, False)
    if required:
        raise errors.PreconditionRequired()
    return None
