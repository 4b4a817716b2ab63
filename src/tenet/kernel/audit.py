"""The append-only audit writer. It writes in the caller's transaction, so an audit row exists exactly
when the change it describes was committed."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from psycopg.types.json import Jsonb

from tenet.kernel.context import current_request_id
from tenet.kernel.statements import Unit, statements

_INSERT = """
    INSERT INTO kernel.audit_log (occurred_at, action, actor_type, actor_id, subject_type, subject_id, scope_type,
                                  scope_id, request_id, data)
    VALUES (%(occurred_at)s, %(action)s, %(actor_type)s, %(actor_id)s, %(subject_type)s, %(subject_id)s,
            %(scope_type)s, %(scope_id)s, %(request_id)s, %(data)s)
"""

ActorType = Literal["user", "client", "system", "anonymous"]

# Keys that would smuggle a secret or personal data into the log; refusing them is cheaper than finding
# them later. Audit rows name stable ids; a name or an email can be looked up from the id while it exists.
_FORBIDDEN_KEYS = ("password", "secret", "token", "display_name", "name", "email", "phone")


@dataclass(frozen=True)
class Actor:
    """Who did it, by stable id only."""

    type: ActorType
    id: str | None = None

    @classmethod
    def user(cls, user_id: uuid.UUID | str) -> Actor:
        return cls("user", str(user_id))

    @classmethod
    def client(cls, client_id: uuid.UUID | str) -> Actor:
        return cls("client", str(client_id))

    @classmethod
    def system(cls) -> Actor:
        return cls("system")


def _jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


def _check_keys(data: dict[str, Any]) -> None:
    for key, value in data.items():
        lowered = key.lower()
        if any(lowered == f or lowered.endswith("_" + f) for f in _FORBIDDEN_KEYS):
            raise ValueError(f"audit data may not carry {key!r}: audit rows name ids, never secrets or names")
        if isinstance(value, dict):
            _check_keys(value)


async def record(
    session: Unit,
    *,
    action: str,
    actor: Actor,
    subject: tuple[str, Any],
    now: datetime,
    scope: tuple[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Append one audit row. `action` is dotted (`workspace.invitation.accepted`)."""
    payload = _jsonable(data or {})
    _check_keys(payload)
    # Every write records one: a plain statement on the unit of work's connection (kernel.statements).
    await (await statements(session)).execute(_INSERT, {
        "occurred_at": now, "action": action, "actor_type": actor.type, "actor_id": actor.id,
        "subject_type": subject[0], "subject_id": str(subject[1]),
        "scope_type": scope[0] if scope else None, "scope_id": str(scope[1]) if scope else None,
        "request_id": current_request_id(), "data": Jsonb(payload),
    })
