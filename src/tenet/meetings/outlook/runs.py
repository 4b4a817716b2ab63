"""The record of a binding sync or a reconciliation (`outlook_sync_runs`, RUNNING -> DONE | FAILED through
kernel.transitions): what it found and fixed by kind (docs/design/outlook.md §3), shown by GET /sync-status."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from tenet.db.database import Database
from tenet.kernel.transitions import transition
from tenet.meetings.outlook import lifecycles, mailboxes
from tenet.meetings.outlook.graph import GraphClient, GraphError
from tenet.meetings.outlook.models import OutlookMailbox, OutlookSyncRun


async def recorded(db: Database, client: GraphClient, *, mailbox_id: uuid.UUID, kind: str, now: datetime,
                   counts: dict[str, int], body: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    """Run `body` as one recorded run of the mailbox: its counts and Graph requests kept whether it succeeds or
    fails; a refused mailbox (403 ErrorAccessDenied) is stored as such and not retried (the error is answered)."""
    run_id = uuid.uuid4()
    async with db.unit_of_work() as session:
        session.add(OutlookSyncRun(id=run_id, mailbox_id=mailbox_id, kind=kind, started_at=now, status="RUNNING",
                                   counts={}, graph_requests=0))
    try:
        await body()
    except GraphError as exc:
        async with db.unit_of_work() as session:
            await transition(session, lifecycles.SYNC_RUN, "fail", model=OutlookSyncRun, id=run_id,
                             values={"finished_at": now, "counts": dict(counts), "error_code": exc.code,
                                     "error_request_id": exc.request_id, "graph_requests": client.requests})
            if exc.access_denied:
                await transition(session, lifecycles.MAILBOX, "denied", model=OutlookMailbox, status_attr="state",
                                 where=(OutlookMailbox.id == mailbox_id,
                                        OutlookMailbox.state.in_(("OK", "DEGRADED"))),
                                 values={"updated_at": now, "last_error_code": exc.code, "last_error_at": now,
                                         "last_error_request_id": exc.request_id,
                                         "last_error_hint": mailboxes.HINT_DENIED_IN_ROUND})
        if exc.access_denied:
            return {"kind": kind, **counts, "failed": exc.code}
        raise
    async with db.unit_of_work() as session:
        await transition(session, lifecycles.SYNC_RUN, "finish", model=OutlookSyncRun, id=run_id,
                         values={"finished_at": now, "counts": dict(counts), "graph_requests": client.requests})
    return {"kind": kind, **counts, "graph_requests": client.requests}
