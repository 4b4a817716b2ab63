"""Request-scoped facts that logs and audit rows need without threading them through every call."""

from __future__ import annotations

from contextvars import ContextVar

request_id_var: ContextVar[str | None] = ContextVar("tenet_request_id", default=None)


def current_request_id() -> str | None:
    return request_id_var.get()
