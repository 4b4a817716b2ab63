"""A meeting's audit trail in the console (issue 18): who did what to the meeting and when, newest first, 20 a page
with the API's cursor (`queries.audit_logs`, the query of `GET /audit-logs?meeting_id=`), for holders of
`meeting:audit:read`, the point that route checks. The meeting page loads the first page into its section (htmx);
without script the section links this page. Actions are said in words; people by their current name."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.pagination import PageParams
from tenet.meetings import codes, queries
from tenet.meetings.permissions import Permission
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
PAGE_SIZE = 20
# The audit log's actions (tenet.meetings.audit.Action, every one: tests/web/test_console_i18n.py) as the meeting's
# trail and the administrators' audit log say them, the one mapping of both.
ACTION_WORDS = {
    "MEETING_CREATED": N_("Created the meeting"),
    "MEETING_UPDATED": N_("Changed the meeting"),
    "MEETING_CANCELLED": N_("Cancelled the meeting"),
    "MEETING_DELETED": N_("Deleted the meeting"),
    "REQUIRED_ATTENDEES_UPDATED": N_("Changed the required attendees"),
    "QR_CODES_REGENERATED": N_("Made new QR codes"),
    "SERIES_CREATED": N_("Created the series"),
    "SERIES_UPDATED": N_("Changed the series"),
    "SERIES_RESCHEDULED": N_("Rescheduled the series"),
    "SERIES_DELETED": N_("Deleted the series"),
    "TEMPLATE_CREATED": N_("Created a meeting template"),
    "TEMPLATE_UPDATED": N_("Changed a meeting template"),
    "TEMPLATE_DELETED": N_("Deleted a meeting template"),
    "CHECK_IN": N_("Checked in with the code"),
    "GUEST_CHECK_IN": N_("A guest checked in"),
    "ATTENDANCE_CREATED": N_("Recorded an attendance"),
    "ATTENDANCE_CORRECTED": N_("Corrected an attendance"),
    "GUEST_DATA_ERASED": N_("Erased the guests' personal data"),
    "USER_ROLES_CHANGED": N_("Changed a person's roles"),
    "AGENDA_SECTION_CREATED": N_("Added an agenda section"),
    "AGENDA_SECTION_UPDATED": N_("Changed an agenda section"),
    "AGENDA_SECTION_DELETED": N_("Deleted an agenda section"),
    "AGENDA_ITEM_CREATED": N_("Added an agenda item"),
    "AGENDA_ITEM_UPDATED": N_("Changed an agenda item"),
    "AGENDA_ITEM_DELETED": N_("Deleted an agenda item"),
    "UPLOAD_TASK_ASSIGNED": N_("Asked for material"),
    "UPLOAD_TASK_CANCELLED": N_("Withdrew an upload task"),
    "ATTACHMENT_UPLOADED": N_("Uploaded a file"),
    "ATTACHMENT_DELETED": N_("Deleted a file"),
    "ATTACHMENT_RESTORED": N_("Restored a file"),
    "OUTLOOK_BINDING_CREATED": N_("Bound an Outlook event"),
    "OUTLOOK_BINDING_TAKEN_OVER": N_("Took over an Outlook event"),
    "OUTLOOK_BINDING_RELEASED": N_("Released an Outlook event"),
    "OUTLOOK_POLICY_UPDATED": N_("Changed the Outlook sync settings"),
    "OUTLOOK_MAILBOX_ADDED": N_("Added an Outlook mailbox"),
    "OUTLOOK_MAILBOX_RESYNC_REQUESTED": N_("Asked for a full resync of an Outlook mailbox"),
    "OUTLOOK_MAILBOX_REPLAY_REQUESTED": N_("Replayed an Outlook mailbox's notifications"),
    "OUTLOOK_MAILBOX_DISABLED": N_("Disabled an Outlook mailbox"),
    "OUTLOOK_EXCLUSION_ADDED": N_("Excluded an occurrence from an Outlook series"),
    "OUTLOOK_EXCLUSION_REMOVED": N_("Included an occurrence of an Outlook series again"),
    "OUTLOOK_SERIES_TRUNCATED": N_("Truncated a local series for the Outlook launch"),
}


def _user_id(actor_id: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(actor_id) if actor_id else None
    except ValueError:
        return None


@router.get("/meetings/{meeting_id}/audit")
async def audit_trail(request: Request, meeting_id: str,
                      cursor: Annotated[str | None, Query(max_length=512)] = None) -> Response:
    """The trail's page (`HX-Request`: the section alone, what the meeting page swaps in)."""
    viewer = await console.signed_in(request)
    principal = viewer.require(Permission.AUDIT_READ)
    meeting = await queries.meeting(reads(request), meeting_id=meeting_id, principal=principal,
                                    now=console.now(request), base_url="", signer=codes.signer(request.app.state))
    rows, next_cursor = await queries.audit_logs(reads(request), filters={"meeting_id": meeting["id"]},
                                                 page=PageParams(limit=PAGE_SIZE, cursor=cursor or None))
    actors = {r["id"]: _user_id(r["actor_id"]) if r["actor_type"] == "user" else None for r in rows}
    people = await queries.display_names(reads(request),
                                         user_ids=sorted({u for u in actors.values() if u is not None}))
    entries = [{**r, "actor_name": people.get(actor) if (actor := actors[r["id"]]) else None,
                "words": ACTION_WORDS.get(r["action"])} for r in rows]
    template = "meetings/audit_section.html" if request.headers.get("hx-request") else "meetings/audit.html"
    return console.render(request, viewer, template, active="meetings", meeting=meeting, entries=entries,
                          next_cursor=next_cursor, first_page=cursor is None)
