"""Events the workspaces domain publishes, and its handlers of other domains' events.

`HANDLERS` is read by the composition root (tenet.domains) through the domain's declaration; handlers run
in the publisher's unit of work (tenet.kernel.events).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.events import AccountDeleted
from tenet.kernel.events import Event


@dataclass(frozen=True)
class WorkspaceDeleted(Event):
    """A workspace reached DELETED (its memberships are closed). Domains keeping data per workspace clean
    it up here, in the same transaction."""

    workspace_id: uuid.UUID
    now: datetime


async def _account_deleted(session: AsyncSession, event: AccountDeleted) -> None:
    from tenet.workspaces import members  # its commands module imports this one for WorkspaceDeleted

    await members.end_memberships_of_deleted_account(session, user_id=event.user_id, now=event.now,
                                                     actor=event.actor)


HANDLERS = {AccountDeleted: _account_deleted}
