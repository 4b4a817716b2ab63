"""Administration in the console (issue 18), for administrators only (`iam:role:assign`, a point only the
Administrator role holds; the nav link shows for it alone):

- `/console/admin/people`: accounts (`iam.queries.users`, the query of `GET /iam/users`, searched by name or email,
  with its cursor) and their meeting-attendance roles; granting or revoking one goes through
  `iam.service.set_user_roles`, the command of `PUT /iam/users/{id}/roles`, with its rules (the last active
  administrator keeps the role: LAST_ADMINISTRATOR) and its effects (the person's console sessions die; their tokens
  carry the new roles at the next request, as every principal is read per request).
- `/console/admin/audit`: the meeting-attendance audit log (`queries.audit_logs`, the query of `GET /audit-logs`)
  filtered by actor, action, meeting and a date range (days in the viewer's zone), 50 a page with its cursor.

The series list and the template edit/delete pages are in `series_list.py` (they are not administration).
"""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime, time, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.iam import queries as iam_queries
from tenet.iam import service as iam_service
from tenet.iam.permissions import Permission as IamPermission
from tenet.iam.permissions import Role
from tenet.kernel.errors import DomainError, PermissionDenied, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.kernel.settings import KernelSettings
from tenet.meetings import queries
from tenet.meetings.audit import Action as AuditAction
from tenet.meetings.pages.audit_trail import ACTION_WORDS
from tenet.meetings.permissions import ADMINISTRATOR, EMPLOYEE, LEADER, MEETING_MANAGER
from tenet.meetings.permissions import Permission as MeetingPermission
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
PEOPLE_PAGE, AUDIT_PAGE = 25, 50
# The meeting-attendance roles, as the people page offers them (others, e.g. ReservationAgent, are kept as they are).
MEETING_ROLES = (ADMINISTRATOR, MEETING_MANAGER, LEADER, EMPLOYEE)
# An account's status (iam.lifecycles.USER's states) as the people page says it.
ACCOUNT_STATUS_WORDS = {"active": N_("Active"), "disabled": N_("Disabled"), "deleted": N_("Deleted")}
_MEETING_ID = re.compile(r"[0-9A-Za-z]{1,32}\Z")
_ACTOR_ID = re.compile(r"[0-9A-Za-z_.:-]{1,64}\Z")


def _require_admin(viewer: Viewer) -> Any:
    if not viewer.can(IamPermission.IAM_ROLE_ASSIGN):
        raise PermissionDenied(f"Requires the permission {IamPermission.IAM_ROLE_ASSIGN}",
                               permission=IamPermission.IAM_ROLE_ASSIGN.value)
    return viewer.principal


# --- people and their roles ----------------------------------------------------------------------------

async def _people_page(request: Request, viewer: Viewer, *, text: str, cursor: str | None,
                       problem: dict[str, str] | None = None, status_code: int = 200) -> Response:
    rows, next_cursor = await iam_queries.users(reads(request), page=PageParams(limit=PEOPLE_PAGE, cursor=cursor),
                                                text=text)
    return console.render(request, viewer, "meetings/admin_people.html", status_code=status_code, active="admin",
                          rows=rows, next_cursor=next_cursor, q=text, cursor=cursor or "", roles=MEETING_ROLES,
                          problem=problem, statuses=ACCOUNT_STATUS_WORDS)


@router.get("/admin/people")
async def people(request: Request, q: Annotated[str, Query(max_length=200)] = "",
                 cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    viewer = await console.signed_in(request)
    _require_admin(viewer)
    return await _people_page(request, viewer, text=q, cursor=cursor or None)


@router.post("/admin/people/{user_id}/roles")
async def change_role(request: Request, user_id: str) -> Response:
    """Grant (`change=grant`) or revoke (`change=revoke`) one meeting-attendance role; the person's other roles stay."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = _require_admin(viewer)
    text, cursor = str(form.get("q", ""))[:200], str(form.get("cursor", ""))[:512] or None
    role, change = str(form.get("role", "")), str(form.get("change", ""))
    try:
        account_id = uuid.UUID(user_id)
    except ValueError:
        raise ValidationFailed("This is not an account id", field="user_id") from None
    if role not in MEETING_ROLES or change not in ("grant", "revoke"):
        raise ValidationFailed("Choose a meeting-attendance role to grant or revoke", field="role")
    try:
        async with request.app.state.db.unit_of_work() as session:
            await iam_service.lock_account(session, account_id)  # the roles read below are the ones replaced
            current = set((await iam_service.roles_of(session, [account_id]))[account_id])
            wanted = current | {role} if change == "grant" else current - {role}
            await iam_service.set_user_roles(session, user_id=account_id, roles=[Role(r) for r in sorted(wanted)],
                                             now=console.now(request), actor=principal.actor)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403):
            raise
        return await _people_page(request, viewer, text=text, cursor=cursor, status_code=exc.status,
                                  problem={"user_id": str(account_id), "code": str(exc.code)})
    query = urlencode({k: v for k, v in (("q", text), ("cursor", cursor or "")) if v})
    return console.see_other(f"{PREFIX}/admin/people" + (f"?{query}" if query else ""))


# --- the audit log -------------------------------------------------------------------------------------------

def _day(value: str, zone: ZoneInfo) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.combine(date.fromisoformat(value), time(), tzinfo=zone)
    except ValueError:
        return None


@router.get("/admin/audit")
async def audit(request: Request,
                actor: Annotated[str, Query(max_length=320)] = "",
                action: Annotated[str, Query(max_length=64)] = "",
                meeting: Annotated[str, Query(max_length=32)] = "",
                start: Annotated[str, Query(alias="from", max_length=10)] = "",
                end: Annotated[str, Query(alias="to", max_length=10)] = "",
                cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    """`actor`: an account's email (or the actor id the log keeps); `from`/`to`: days in the viewer's zone, `to`
    included. A filter the log cannot use is said next to its field and the log is not filtered by a guess."""
    viewer = await console.signed_in(request)
    _require_admin(viewer)
    if not viewer.can(MeetingPermission.AUDIT_READ):
        raise PermissionDenied(f"Requires the permission {MeetingPermission.AUDIT_READ}",
                               permission=MeetingPermission.AUDIT_READ.value)
    settings: KernelSettings = request.app.state.settings
    try:
        zone = ZoneInfo(viewer.zone or settings.default_timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    values = {"actor": actor.strip(), "action": action.strip(), "meeting": meeting.strip(), "from": start.strip(),
              "to": end.strip()}
    problems: dict[str, str] = {}
    filters: dict[str, Any] = {}
    if values["actor"]:
        if "@" in values["actor"]:
            found = [p for p in await queries.people(reads(request), text=values["actor"], limit=5)
                     if p["email"].lower() == values["actor"].lower()]
            if found:
                filters["actor_id"] = str(found[0]["user_id"])
            else:
                problems["actor"] = "USER_NOT_FOUND"
        elif _ACTOR_ID.match(values["actor"]):
            filters["actor_id"] = values["actor"]
        else:
            problems["actor"] = "VALIDATION_FAILED"
    if values["action"]:
        if values["action"] in {a.value for a in AuditAction}:
            filters["action"] = values["action"]
        else:
            problems["action"] = "VALIDATION_FAILED"
    if values["meeting"]:
        if _MEETING_ID.match(values["meeting"]):
            filters["meeting_id"] = values["meeting"]
        else:
            problems["meeting"] = "VALIDATION_FAILED"
    first, last = _day(values["from"], zone), _day(values["to"], zone)
    if values["from"] and first is None:
        problems["from"] = "VALIDATION_FAILED"
    if values["to"] and last is None:
        problems["to"] = "VALIDATION_FAILED"
    if last is not None:
        last = last + timedelta(days=1)
    if first is not None and last is not None and last <= first:
        problems["to"] = "REPORT_RANGE_INVALID"
    filters["from"], filters["to"] = first, last
    rows: list[dict[str, Any]] = []
    next_cursor = None
    if not problems:
        rows, next_cursor = await queries.audit_logs(reads(request), filters=filters,
                                                     page=PageParams(limit=AUDIT_PAGE, cursor=cursor or None))
    user_ids = {uuid.UUID(r["actor_id"]) for r in rows
                if r["actor_type"] == "user" and r["actor_id"] and _is_uuid(r["actor_id"])}
    names = await queries.display_names(reads(request), user_ids=sorted(user_ids))
    entries = [{**r, "actor_name": names.get(uuid.UUID(r["actor_id"])) if r["actor_type"] == "user"
                and r["actor_id"] and _is_uuid(r["actor_id"]) else None,
                "words": ACTION_WORDS.get(r["action"])} for r in rows]
    query = urlencode({k: v for k, v in values.items() if v})
    return console.render(request, viewer, "meetings/admin_audit.html", status_code=422 if problems else 200,
                          active="admin", entries=entries, next_cursor=next_cursor, values=values,
                          problems=problems, actions=[(a.value, ACTION_WORDS.get(a.value)) for a in AuditAction],
                          zone=zone.key, query=query, first_page=cursor is None)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
