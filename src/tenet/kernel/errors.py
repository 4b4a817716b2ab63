"""Stable error codes and problem+json (RFC 9457).

Every error a client can see is a `DomainError` subclass with a stable `code` (UPPER_SNAKE), an HTTP
status and optional data fields. Codes are collected in a registry as classes are defined, and
`tests/kernel/test_error_codes.py` fails when a code that once existed disappears.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

PROBLEM_JSON = "application/problem+json"

# code -> the error class that owns it; filled by DomainError.__init_subclass__.
ERROR_REGISTRY: dict[str, type[DomainError]] = {}


class KernelErrorCode(StrEnum):
    """Codes of the HTTP layer itself: shared by every domain. Values never change."""

    BAD_REQUEST = "BAD_REQUEST"
    MALFORMED_REQUEST_BODY = "MALFORMED_REQUEST_BODY"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    VALUE_OUT_OF_RANGE = "VALUE_OUT_OF_RANGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    ROUTE_NOT_FOUND = "ROUTE_NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    NOT_AUTHENTICATED = "NOT_AUTHENTICATED"
    INVALID_TOKEN = "INVALID_TOKEN"
    TOKEN_EXPIRED = "TOKEN_EXPIRED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    NOT_FOUND = "NOT_FOUND"
    RATE_LIMITED = "RATE_LIMITED"
    INVALID_CURSOR = "INVALID_CURSOR"
    IDEMPOTENCY_KEY_INVALID = "IDEMPOTENCY_KEY_INVALID"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    IDEMPOTENCY_REQUEST_IN_PROGRESS = "IDEMPOTENCY_REQUEST_IN_PROGRESS"
    CONFLICT = "CONFLICT"
    STATE_CONFLICT = "STATE_CONFLICT"
    VERSION_CONFLICT = "VERSION_CONFLICT"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    PRECONDITION_REQUIRED = "PRECONDITION_REQUIRED"
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class DomainError(Exception):
    """Base of every error a client may see. Subclasses set `status`, `code` and `title`."""

    status: ClassVar[int] = 400
    code: ClassVar[StrEnum | str]
    title: ClassVar[str] = "Bad request"
    # Set when detecting the error is itself a state change that must persist (see Database.unit_of_work): on a
    # class, or on one error by `kernel.refusals.refuse`.
    commits_transaction: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return  # an abstract intermediate class
        existing = ERROR_REGISTRY.get(str(code))
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise TypeError(f"error code {code} is already owned by {existing.__qualname__}")
        ERROR_REGISTRY[str(code)] = cls

    def __init__(self, detail: str | None = None, *, headers: dict[str, str] | None = None, **data: Any) -> None:
        self.detail = detail or self.title
        self.headers = headers or {}
        # Extra members of the problem document (ids, current state, ...): stable, machine-readable.
        self.data = data
        super().__init__(self.detail)

    def to_problem(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"urn:tenet:problem:{self.code}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": str(self.code),
        }
        if instance:
            body["instance"] = instance
        body.update(self.data)
        return body


# --- errors of the HTTP layer ------------------------------------------------------------------------


class BadRequest(DomainError):
    status: ClassVar[int] = 400
    code: ClassVar[StrEnum | str] = KernelErrorCode.BAD_REQUEST
    title: ClassVar[str] = "Bad request"


class MalformedRequestBody(DomainError):
    status: ClassVar[int] = 400
    code: ClassVar[StrEnum | str] = KernelErrorCode.MALFORMED_REQUEST_BODY
    title: ClassVar[str] = "The request body is not valid JSON"


class ValidationFailed(DomainError):
    status: ClassVar[int] = 422
    code: ClassVar[StrEnum | str] = KernelErrorCode.VALIDATION_FAILED
    title: ClassVar[str] = "The request does not match the schema"


class ValueOutOfRange(DomainError):
    """A value the schema accepted is too far out for what the route computes with it (a date near year 1 or
    9999 moved by a duration, a time zone conversion at the calendar's edge)."""

    status: ClassVar[int] = 422
    code: ClassVar[StrEnum | str] = KernelErrorCode.VALUE_OUT_OF_RANGE
    title: ClassVar[str] = "A value is out of the range this operation can compute with"


class UnsupportedMediaType(DomainError):
    status: ClassVar[int] = 415
    code: ClassVar[StrEnum | str] = KernelErrorCode.UNSUPPORTED_MEDIA_TYPE
    title: ClassVar[str] = "Unsupported media type"


class PayloadTooLarge(DomainError):
    status: ClassVar[int] = 413
    code: ClassVar[StrEnum | str] = KernelErrorCode.PAYLOAD_TOO_LARGE
    title: ClassVar[str] = "The request body is too large"


class RouteNotFound(DomainError):
    status: ClassVar[int] = 404
    code: ClassVar[StrEnum | str] = KernelErrorCode.ROUTE_NOT_FOUND
    title: ClassVar[str] = "No such route"


class MethodNotAllowed(DomainError):
    status: ClassVar[int] = 405
    code: ClassVar[StrEnum | str] = KernelErrorCode.METHOD_NOT_ALLOWED
    title: ClassVar[str] = "Method not allowed on this route"


class NotAuthenticated(DomainError):
    status: ClassVar[int] = 401
    code: ClassVar[StrEnum | str] = KernelErrorCode.NOT_AUTHENTICATED
    title: ClassVar[str] = "Authentication required"

    def __init__(self, detail: str | None = None, **data: Any) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"}, **data)


class InvalidToken(NotAuthenticated):
    code: ClassVar[StrEnum | str] = KernelErrorCode.INVALID_TOKEN
    title: ClassVar[str] = "The access token is not valid"


class TokenExpired(NotAuthenticated):
    code: ClassVar[StrEnum | str] = KernelErrorCode.TOKEN_EXPIRED
    title: ClassVar[str] = "The access token has expired"


class PermissionDenied(DomainError):
    status: ClassVar[int] = 403
    code: ClassVar[StrEnum | str] = KernelErrorCode.PERMISSION_DENIED
    title: ClassVar[str] = "Permission denied"


class NotFound(DomainError):
    """404 for rows that do not exist *or* that the caller may not see (API.md)."""

    status: ClassVar[int] = 404
    code: ClassVar[StrEnum | str] = KernelErrorCode.NOT_FOUND
    title: ClassVar[str] = "Not found"


class RateLimited(DomainError):
    status: ClassVar[int] = 429
    code: ClassVar[StrEnum | str] = KernelErrorCode.RATE_LIMITED
    title: ClassVar[str] = "Too many requests"

    def __init__(self, detail: str | None = None, *, retry_after_seconds: int, **data: Any) -> None:
        retry_after_seconds = max(1, int(retry_after_seconds))
        super().__init__(detail, headers={"Retry-After": str(retry_after_seconds)},
                         retry_after_seconds=retry_after_seconds, **data)


class InvalidCursor(DomainError):
    status: ClassVar[int] = 400
    code: ClassVar[StrEnum | str] = KernelErrorCode.INVALID_CURSOR
    title: ClassVar[str] = "The cursor is not valid for this list"


class IdempotencyKeyInvalid(DomainError):
    status: ClassVar[int] = 400
    code: ClassVar[StrEnum | str] = KernelErrorCode.IDEMPOTENCY_KEY_INVALID
    title: ClassVar[str] = "The Idempotency-Key header is not valid"


class IdempotencyKeyReused(DomainError):
    status: ClassVar[int] = 422
    code: ClassVar[StrEnum | str] = KernelErrorCode.IDEMPOTENCY_KEY_REUSED
    title: ClassVar[str] = "This Idempotency-Key was used with a different request"


class IdempotencyRequestInProgress(DomainError):
    status: ClassVar[int] = 409
    code: ClassVar[StrEnum | str] = KernelErrorCode.IDEMPOTENCY_REQUEST_IN_PROGRESS
    title: ClassVar[str] = "A request with this Idempotency-Key is still being processed"


class Conflict(DomainError):
    status: ClassVar[int] = 409
    code: ClassVar[StrEnum | str] = KernelErrorCode.CONFLICT
    title: ClassVar[str] = "The resource changed; read it again"


class StateConflict(DomainError):
    """A transition asked of a row that is not in one of its source states (`current_status` says where it is)."""

    status: ClassVar[int] = 409
    code: ClassVar[StrEnum | str] = KernelErrorCode.STATE_CONFLICT
    title: ClassVar[str] = "The resource is not in a state that allows this"


class VersionConflict(DomainError):
    """The body's `expected_version` is not the row's version any more: someone changed it meanwhile."""

    status: ClassVar[int] = 409
    code: ClassVar[StrEnum | str] = KernelErrorCode.VERSION_CONFLICT
    title: ClassVar[str] = "The resource was changed by someone else; read it again"


class PreconditionFailed(DomainError):
    """`If-Match` names a version the resource is not at any more (RFC 9110 §13.1.1)."""

    status: ClassVar[int] = 412
    code: ClassVar[StrEnum | str] = KernelErrorCode.PRECONDITION_FAILED
    title: ClassVar[str] = "The resource was changed by someone else"


class PreconditionRequired(DomainError):
    """The route changes a resource only at a version the caller names (`If-Match`, or the body's
    `expected_version`), and the request named none (RFC 6585 §3)."""

    status, code, title = (428, KernelErrorCode.PRECONDITION_REQUIRED,
                           "Name the version you read: send If-Match (or expected_version)")


class ServiceUnavailable(DomainError):
    status: ClassVar[int] = 503
    code: ClassVar[StrEnum | str] = KernelErrorCode.SERVICE_UNAVAILABLE
    title: ClassVar[str] = "Service unavailable"


class InternalError(DomainError):
    status: ClassVar[int] = 500
    code: ClassVar[StrEnum | str] = KernelErrorCode.INTERNAL_ERROR
    title: ClassVar[str] = "Internal error"
