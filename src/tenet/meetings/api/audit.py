"""The meeting-attendance audit log: /audit-logs (tenet.meetings.audit writes it; queries.audit_logs reads it)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from tenet.deps import reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.meetings import errors, queries, reports
from tenet.meetings.audit import Action as AuditAction
from tenet.meetings.audit import Resource
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import AuditLogRead

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
AuditReader = Annotated[Principal, Depends(require(Permission.AUDIT_READ))]


@router.get("/audit-logs", response_model=Page[AuditLogRead], summary="The meeting-attendance audit log",
            description="Newest first. `resource` and `action` are the constants of the log (an unknown one is "
                        "422, not an empty page).", responses=problem_responses(400, 422))
async def audit_logs(
    principal: AuditReader, request: Request, params: Annotated[PageParams, Depends(page_params)],
    resource: Resource | None = None, action: AuditAction | None = None,
    meeting_id: Annotated[str | None, Query(pattern="^[0-9A-Za-z]{1,32}$")] = None,
    series_id: uuid.UUID | None = None,
    actor_id: Annotated[str | None, Query(pattern="^[0-9A-Za-z_.:-]{1,64}$")] = None,
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
) -> Response:
    if any(v is not None and v.tzinfo is None for v in (start, end)):
        raise errors.ReportRangeInvalid("from and to must carry an offset")
    reports.check_window(start, end)
    if start is not None and end is not None and end <= start:
        raise errors.ReportRangeInvalid("to must be after from")
    items, cursor = await queries.audit_logs(reads(request), page=params, filters={
        "resource": resource.value if resource else None, "action": action.value if action else None,
        "meeting_id": meeting_id, "series_id": series_id, "actor_id": actor_id, "from": start, "to": end})
    return json_response(Page[AuditLogRead](items=[AuditLogRead.model_validate({**r, "id": str(r["id"])})
                                                   for r in items], next_cursor=cursor))
