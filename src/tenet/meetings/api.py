"""Routes of meeting attendance: /api/v1/meeting-attendance (API.md "Meeting attendance")."""

from __future__ import annotations

from tenet.meetings import (  # noqa: F401  (they add their routes to the router)
    routes_attendances,
    routes_checkin,
    routes_meetings,
    routes_reports,
    routes_series,
)
from tenet.meetings.agenda import http as agenda_http
from tenet.meetings.agenda import routes as agenda_routes  # noqa: F401  (adds the agenda's routes)
from tenet.meetings.http import TAG, TAG_DESCRIPTION, router
from tenet.meetings.pages import router as pages_router

ROUTERS = (router, agenda_http.router, pages_router)
OPENAPI_TAGS = ({"name": TAG, "description": TAG_DESCRIPTION},
                {"name": agenda_http.TAG, "description": agenda_http.TAG_DESCRIPTION})
