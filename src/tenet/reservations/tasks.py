"""Jobs of the reservation workflow. There is no periodic job: nothing in the domain expires, and an emptied
temporary order is closed by the move that empties it."""

from __future__ import annotations

import logging

import procrastinate

from tenet.kernel.jobs import JobScope, job
from tenet.reservations import contracts

log = logging.getLogger(__name__)

blueprint = procrastinate.Blueprint()


@job(blueprint, name="reservation_migrate_card_contracts", unit_of_work=False, history=True,
     lock="reservation.card_contracts")
async def migrate_card_contracts(scope: JobScope) -> int:
    """Deferred when a new field contract ships: batch by batch (one transaction each), every card without a
    draft or confirmed payload moves to its type's current contract version (spec §9)."""
    total = 0
    while True:
        async with scope.db.unit_of_work() as session:
            moved = await contracts.migrate_batch(session, now=scope.now)
        total += moved
        if moved == 0:
            break
    if total:
        log.info("task card contracts migrated", extra={"count": total})
    return total
