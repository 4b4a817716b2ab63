"""The domain's one router (the whole path on it, so metrics and logs see complete route templates); the
routes_* modules add their routes to it and api.py exposes it."""

from __future__ import annotations

from fastapi import APIRouter

from tenet.kernel.http import API_PREFIX, TenetRoute, problem_responses
from tenet.meetings.permissions import PERMISSION_TABLE

TAG = "meeting attendance"
TAG_DESCRIPTION = (
    "Meetings, series, templates, QR check-in for users and guests, attendance corrections, reports and the "
    "audit log (spec 001). Meeting ids are 32-character strings. Statuses SCHEDULED / IN_PROGRESS / COMPLETED "
    "are read from the clock; CANCELLED is stored. Check-in is accepted inside `[start - opens, closes)`; a "
    "check-in after start + grace is LATE. One live attendance per person and per device per meeting.\n\n"
    "Routes check the permission point first (403 `PERMISSION_DENIED`), then who you are for the meeting: a "
    "meeting you may not see answers 404, a visible one your role in it does not allow 403 "
    "`MEETING_ACTION_FORBIDDEN`. The `/public` routes need no token.\n\n"
    "**Who may do what**:\n\n" + PERMISSION_TABLE
)

router = APIRouter(prefix=API_PREFIX + "/meeting-attendance", tags=[TAG], route_class=TenetRoute,
                   responses=problem_responses(401, 403, 404))
