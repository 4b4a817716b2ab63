"""What every page of the reservation desk shares: the caller as the reservation queries see them, the permission
points the API routes check, the hotel kept per session, and the version a form read.

The desk offers an action only when the flags the API computes (`can_*`, views.task_summary) or the point its
route checks allow it, and re-checks the point before the service runs: a forged form is refused the same way."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pydantic
from fastapi import Request
from starlette.datastructures import FormData

from tenet.iam.principal import Principal
from tenet.kernel.errors import PermissionDenied, PreconditionRequired, ValidationFailed
from tenet.kernel.http import ExpectedVersion
from tenet.reservations.keys import UnusableKey, normalize_key
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.permissions import Viewer as Caller
from tenet.reservations.permissions import require_read
from tenet.web.console import Viewer

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)
DESK = "/console/desk"
HOTEL_COOKIE = "tenet_desk_hotel"  # the hotel the switcher chose (checked against the viewer's hotels on each read)
QUEUE_SECONDS = 3  # the queue asks again this often (new tasks from AI batches appear without a reload)


def principal(viewer: Viewer) -> Principal:
    assert viewer.principal is not None
    return viewer.principal


def reader(viewer: Viewer) -> Caller:
    """The caller as the reservation reads see them; PermissionDenied without `reservation:order:read`."""
    return require_read(principal(viewer))


def require(viewer: Viewer, permission: P) -> Caller:
    """The point the API route of this action checks (its `require(...)` dependency)."""
    caller = reader(viewer)
    if not caller.can(permission):
        raise PermissionDenied(f"Requires the permission {permission}", permission=str(permission))
    return caller


def version_read(form: FormData, name: str = "version") -> ExpectedVersion:
    """The version the form was rendered with, as an If-Match: a stale one is 412 PRECONDITION_FAILED."""
    value = str(form.get(name, ""))
    if not value.isdigit() or len(value) > 9:
        raise PreconditionRequired()
    return ExpectedVersion(int(value), True)


def text(form: FormData, name: str, limit: int = 500) -> str:
    value = form.get(name, "")
    return value.strip()[:limit] if isinstance(value, str) else ""


def chosen_hotel(request: Request) -> str | None:
    value = request.cookies.get(HOTEL_COOKIE)
    return value if value and len(value) <= 64 and value.isprintable() else None


def refusal(exc: Any) -> dict[str, Any]:
    """A refusal as a form shows it: its code (words.sentence turns it into the sentence)."""
    return {"code": str(exc.code), "data": exc.data}


def parsed(schema: type[ModelT], data: dict[str, Any]) -> ModelT:
    """The form's values checked by the API route's own body schema (the same limits), or ValidationFailed naming
    the first bad field."""
    try:
        return schema.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "form"
        raise ValidationFailed(f"{field}: {first['msg']}", field=field) from None


def search_key(value: str) -> str | None:
    """The business key GET /orders would search for (normalised like a stored key; else as typed)."""
    typed = value.strip()
    if not typed or not typed.isprintable():
        return None
    try:
        return normalize_key(typed)
    except UnusableKey:
        return typed


def short_time(zone: str) -> Callable[[datetime], str]:
    """Times of a long list as `2026-12-02 14:05` in the viewer's zone: read alike in both languages, and cheap
    enough for a page of rows redrawn every few seconds (Babel's formats cost more than the page's queries)."""
    tz = ZoneInfo(zone)

    def short(value: datetime) -> str:
        local = value.astimezone(tz)  # an f-string, as strftime parses its format on every call
        return f"{local.year:04d}-{local.month:02d}-{local.day:02d} {local.hour:02d}:{local.minute:02d}"

    return short
