"""The field-contract migration rule of spec §9: when a new contract version ships, only cards with neither
a draft nor a confirmed payload move to it. A card holding a user's draft or a confirmed payload keeps the
version it was written under (shown with that version's definition) until it is saved again or confirmed,
which validates it against the current version and records that version.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements
from tenet.reservations import audit
from tenet.reservations.audit import AuditActor, Entry
from tenet.reservations.cards.provider import PROVIDER, TaskCardFieldDefinitionProvider

BATCH = 500

_MIGRATE_SQL = """
    WITH picked AS (
        SELECT c.hotel_id, c.id FROM reservation.workflow_reservation_task_card c
         WHERE c.task_card_type = %(card_type)s AND c.field_contract_version = ANY(CAST(%(older)s AS text[]))
           AND c.draft_payload_json IS NULL AND c.confirmed_payload_json IS NULL
         ORDER BY c.id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    UPDATE reservation.workflow_reservation_task_card c SET field_contract_version = %(current)s, updated_at = %(now)s
      FROM picked p
     WHERE c.hotel_id = p.hotel_id AND c.id = p.id
       AND c.draft_payload_json IS NULL AND c.confirmed_payload_json IS NULL
    RETURNING c.hotel_id"""


async def migrate_batch(session: AsyncSession, *, now: datetime, limit: int = BATCH,
                        provider: TaskCardFieldDefinitionProvider = PROVIDER) -> int:
    """Move up to `limit` cards of each type to its current version (skipping cards a request holds: they
    are taken on the next run); one audit row per hotel and card type. Answers how many moved."""
    moved = 0
    for card_type in provider.card_types():
        current = provider.current_version(card_type)
        older = [version for version in provider.versions(card_type) if version != current]
        if not older:
            continue
        hotels = Counter(row["hotel_id"] for row in await (await statements(session)).all(_MIGRATE_SQL, {
            "card_type": card_type, "older": older, "current": current, "limit": limit, "now": now}))
        moved += sum(hotels.values())
        await audit.record(session, *(
            Entry(hotel_id, "reservation.card.contract_migrated",
                  after={"task_card_type": card_type, "field_contract_version": current, "counts": {"cards": count}})
            for hotel_id, count in sorted(hotels.items())), actor=AuditActor.system(), now=now)
    return moved
