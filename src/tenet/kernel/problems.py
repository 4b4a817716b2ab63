"""The one writer of problem+json (RFC 9457) documents, for every error path.

Route errors (through the app's exception handlers), the HTTP edge (body limits), the idempotency layer
and the readiness probe all build their answer here, so every problem a client sees has the same members:
`type, title, status, detail, code`, the error's data members, and the `request_id` to quote.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response
from starlette.types import Scope, Send

from tenet.kernel.errors import PROBLEM_JSON, DomainError
from tenet.kernel.text import well_formed


def request_id_of(scope: Scope) -> str | None:
    state = scope.get("state") or {}
    request_id = state.get("request_id") if isinstance(state, dict) else getattr(state, "request_id", None)
    return request_id if isinstance(request_id, str) else None


def problem_document(error: DomainError, request_id: str | None = None) -> dict[str, Any]:
    body = error.to_problem()
    if request_id:
        body.setdefault("request_id", request_id)
    return body


def problem_bytes(error: DomainError, request_id: str | None = None) -> bytes:
    """The document as UTF-8 JSON. A client's text can reach it (a member name in `errors[].loc`, a field
    path): a lone surrogate there becomes U+FFFD, so no problem can ever fail to encode."""
    document = json.dumps(problem_document(error, request_id), ensure_ascii=False, separators=(",", ":"))
    return well_formed(document).encode()


def problem_response(error: DomainError, request_id: str | None = None) -> Response:
    return Response(problem_bytes(error, request_id), status_code=error.status, headers=error.headers,
                    media_type=PROBLEM_JSON)


async def send_problem(send: Send, scope: Scope, error: DomainError, *, close: bool = False) -> None:
    """Answer `error` on a raw ASGI `send` (for layers outside the app's exception handlers)."""
    body = problem_bytes(error, request_id_of(scope))
    headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
