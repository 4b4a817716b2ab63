"""Handlers of other domains' events (the reservation workflow publishes none yet: nobody subscribes).

Handlers run in the publisher's unit of work, after identity's locks (identity comes first in the lock
order), and lock only this domain's rows.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.events import AccountDeleted
from tenet.reservations.audit import AuditActor


async def _account_deleted(session: AsyncSession, event: AccountDeleted) -> None:
    from tenet.reservations import service

    actor = (AuditActor.user(uuid.UUID(event.actor.id)) if event.actor.type == "user" and event.actor.id
             else AuditActor.system())
    await service.remove_deleted_account(session, user_id=event.user_id, actor=actor, now=event.now)


HANDLERS = {AccountDeleted: _account_deleted}
