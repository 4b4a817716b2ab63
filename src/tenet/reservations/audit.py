"""The reservation audit writer (spec §10, RSV-INV-20): rows in `workflow_reservation_audit_log`, written in
the changing transaction, naming the actor by type (SYSTEM / USER / SUPERAGENT) and id.

Snapshots are summaries built from an allow-list of keys whose values are ids, states, counts, field
*names*, business keys and hashes. Payload values (guest names, emails, phone numbers, message text,
attachment URLs) never enter a row: a changed card is described by the names of its changed fields and the
SHA-256 of the payload. A key outside the list is a bug and raises before anything is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.principal import Principal
from tenet.kernel.context import current_request_id
from tenet.reservations.models import AuditLog

ActorType = Literal["SYSTEM", "USER", "SUPERAGENT"]

AUDIT_SNAPSHOT_KEYS: frozenset[str] = frozenset({
    "order_id", "task_id", "operation_id", "batch_id", "transition_id", "user_id", "hotel_id",
    "order_status", "order_key_type", "order_business_key", "temporary_order_code", "business_key_source",
    "merged_into_order_id", "task_status", "system_task_type", "task_card_type", "queue_participation",
    "execution_order", "version", "field_contract_version", "changed_fields", "payload_sha256",
    "operation_code", "operation_status", "attempt_number", "attempt_status", "error_code", "via_lookup",
    "item_count", "counts", "blocked_reason", "reason_code", "request_payload_sha256", "moved_task_ids",
})


@dataclass(frozen=True)
class AuditActor:
    type: ActorType
    id: str | None = None

    @classmethod
    def of(cls, principal: Principal) -> AuditActor:
        return cls("USER" if principal.is_user else "SUPERAGENT", str(principal.id))

    @classmethod
    def user(cls, user_id: uuid.UUID) -> AuditActor:
        return cls("USER", str(user_id))

    @classmethod
    def system(cls) -> AuditActor:
        return cls("SYSTEM")


def _checked(snapshot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    unknown = set(snapshot) - AUDIT_SNAPSHOT_KEYS
    if unknown:
        raise ValueError(f"audit snapshot keys outside the allow-list: {sorted(unknown)}")
    return {k: (str(v) if isinstance(v, uuid.UUID) else v) for k, v in snapshot.items()}


@dataclass(frozen=True)
class Entry:
    hotel_id: str
    action: str
    order_id: int | None = None
    task_id: int | None = None
    operation_id: int | None = None
    batch_id: int | None = None
    reason: str | None = None
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None


def rows(entries: Iterable[Entry], *, actor: AuditActor, now: datetime) -> list[dict[str, Any]]:
    request_id = current_request_id()
    return [{
        "hotel_id": e.hotel_id, "order_id": e.order_id, "task_id": e.task_id, "operation_id": e.operation_id,
        "batch_id": e.batch_id, "actor_type": actor.type, "actor_id": actor.id, "action": e.action,
        "reason": e.reason, "before_snapshot_json": _checked(e.before), "after_snapshot_json": _checked(e.after),
        "request_id": request_id, "occurred_at": now, "created_at": now,
    } for e in entries]


async def record(session: AsyncSession, *entries: Entry, actor: AuditActor, now: datetime) -> None:
    """Append audit rows (one multi-row INSERT) in the caller's transaction."""
    values = rows(entries, actor=actor, now=now)
    if values:
        await session.execute(insert(AuditLog), values)
