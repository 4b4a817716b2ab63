"""The HTTP edge every domain shares: problem+json handlers, media-type checks, body size limits.

Bad input of any kind becomes a 4xx problem document with a stable code; nothing here ever lets a
database message or a stack trace reach a client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.params import File, Form
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.kernel import errors
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
    422: "Request does not match the schema, or an Idempotency-Key reused with another body",
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


def install_openapi(app: FastAPI, *, idempotency_exempt: frozenset[str] = frozenset()) -> None:
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _document_problems(get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes,
                tags=app.openapi_tags,
            ), idempotency_exempt)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def problem_response(error: DomainError, request_id: str | None = None) -> JSONResponse:
    body = error.to_problem()
    if request_id:
        body.setdefault("request_id", request_id)
    return JSONResponse(body, status_code=error.status, headers=error.headers, media_type=PROBLEM_JSON)


def _request_id(request: Request) -> str | None:
    return request.scope.get("state", {}).get("request_id")


def _validation_issues(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Never echo `input` back: it can hold a password or a token.
    return [
        {"loc": [str(p) if not isinstance(p, int) else p for p in issue.get("loc", ())],
         "msg": issue.get("msg", ""), "type": issue.get("type", "")}
        for issue in raw
    ]


async def _on_domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    if exc.status >= 500:
        log.error("domain error %s answered with %s", exc.code, exc.status)
    return problem_response(exc, _request_id(request))


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    raw = list(exc.errors())
    if any(issue.get("type") == "json_invalid" for issue in raw):
        return problem_response(errors.MalformedRequestBody("The body could not be parsed as JSON"),
                                _request_id(request))
    issues = _validation_issues(raw)
    detail = "; ".join(f"{'.'.join(map(str, i['loc']))}: {i['msg']}" for i in issues[:5])
    return problem_response(errors.ValidationFailed(detail, errors=issues), _request_id(request))


async def _on_http_exception(request: Request, exc: Exception) -> JSONResponse:
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


async def _on_database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    # The database is down or the pool is exhausted: not a bug, and the client may retry.
    log.warning("database unavailable: %s", type(exc).__name__)
    error = errors.ServiceUnavailable("The database is not reachable right now", headers={"Retry-After": "2"})
    return problem_response(error, _request_id(request))


async def _on_data_error(request: Request, exc: Exception) -> JSONResponse:
    # A value PostgreSQL cannot store (a NUL character in text, an out-of-range number) that a schema
    # did not catch: the request's fault, so a 422, but logged because a schema should have caught it.
    log.warning("database refused a value on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    error = errors.ValidationFailed("A value cannot be stored (for example a NUL character in a text field)")
    return problem_response(error, _request_id(request))


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return await _on_database_unavailable(request, exc)
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    error = errors.InternalError("An unexpected error occurred; quote the request id when reporting it")
    return problem_response(error, _request_id(request))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _on_domain_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(DataError, _on_data_error)
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
    """An APIRoute that answers 415 when the body's Content-Type is not what the route reads.

    FastAPI would otherwise try to validate a text body as JSON and answer a confusing 422.
    """

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        body_params = self.dependant.body_params
        if not body_params:
            return handler
        expects_form = any(isinstance(p.field_info, Form | File) for p in body_params)
        accepts = _is_form if expects_form else _is_json
        wanted = "application/x-www-form-urlencoded or multipart/form-data" if expects_form else "application/json"

        async def checked_handler(request: Request) -> Any:
            if _has_body(request) and not accepts(request.headers.get("content-type", "")):
                raise errors.UnsupportedMediaType(f"This route reads {wanted}")
            return await handler(request)

        return checked_handler


# --- body size ---------------------------------------------------------------------------------------


class BodySizeLimitMiddleware:
    """Refuses bodies above a per-route limit with 413, whether or not Content-Length is sent."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await self._refuse(scope, send, limit)
                    return
        received = 0
        started = False
        exceeded = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise errors.PayloadTooLarge(f"The body is larger than {limit} bytes")
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if exceeded:
                # Whatever the app answers to a body it could not finish reading (FastAPI turns the
                # exception into a generic 400), the client gets the 413 that explains it.
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._refuse(scope, send, limit)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except errors.PayloadTooLarge:
            if started:
                return
            await self._refuse(scope, send, limit)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, limit: int) -> None:
        error = errors.PayloadTooLarge(f"The body is larger than {limit} bytes")
        body = json.dumps(error.to_problem()).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]})
        await send({"type": "http.response.body", "body": body})
