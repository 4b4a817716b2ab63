"""Routes of meeting attendance: /api/v1/meeting-attendance (API.md "Meeting attendance"), one module per aggregate
(meetings, series, templates, check-in, attendances, reports, the audit log), the agenda's
(tenet.meetings.agenda.api) and the public pages (tenet.meetings.pages). Each module carries its own router with the
whole path on it, so metrics and logs see complete route templates."""

from __future__ import annotations

from tenet.meetings.agenda import api as agenda
from tenet.meetings.agenda import permissions as agenda_permissions
from tenet.meetings.api import attendances, audit, checkin, meetings, reports, series, templates
from tenet.meetings.outlook import api as outlook
from tenet.meetings.outlook import permissions as outlook_permissions
from tenet.meetings.pages import (
    administration,
    agenda_editor,
    audit_trail,
    cancel,
    corrections,
    meeting_files,
    meeting_form,
    meeting_templates,
    outlook_bindings,
    outlook_settings,
    series_form,
    series_list,
    series_page,
    upload_tasks,
)
from tenet.meetings.pages import console as console_pages
from tenet.meetings.pages import outlook as outlook_pages
from tenet.meetings.pages import reports as report_pages
from tenet.meetings.pages import router as pages_router
from tenet.meetings.permissions import TAG, TAG_DESCRIPTION

# The console's pages last, `/console/meetings/new` (meeting_form) before `/console/meetings/{id}` (console_pages).
# In the order the routes were declared on the domain's one router before it was split (the OpenAPI document's).
ROUTERS = (attendances.router, checkin.router, meetings.router, reports.router, audit.router, series.router,
           templates.router, agenda.router, pages_router, outlook.router,
           meeting_form.router, corrections.router, series_form.router, series_page.router,
           upload_tasks.router, cancel.router, audit_trail.router, meeting_templates.router, outlook_pages.router,
           outlook_bindings.router, outlook_settings.router, meeting_files.router, agenda_editor.router,
           report_pages.router, administration.router, series_list.router, console_pages.router)
OPENAPI_TAGS = ({"name": TAG, "description": TAG_DESCRIPTION},
                {"name": agenda_permissions.TAG, "description": agenda_permissions.TAG_DESCRIPTION},
                {"name": outlook_permissions.TAG, "description": outlook_permissions.TAG_DESCRIPTION})
