"""The public pages of meeting attendance (server-rendered, no build step): the check-in page the QR codes encode
(`/meetingattendance/check-in/{meeting_id}?mode=online|offline`, a stable address: printed codes must keep
working; the offline one carries the meeting's offline code as `&code=`) and the code display for managers.
Thin, like every page of tenet.web: static HTML and one script calling the JSON API, under the same strict
Content-Security-Policy (own scripts and styles only, no inline)."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from tenet.kernel.errors import NotFound
from tenet.web.pages import _SECURITY_HEADERS

_WEB = files("tenet.meetings") / "web"
_ASSETS = {"checkin.js": "text/javascript", "display.js": "text/javascript", "meetings.css": "text/css"}

router = APIRouter(include_in_schema=False)


def _page(name: str) -> HTMLResponse:
    return HTMLResponse((_WEB / name).read_text(encoding="utf-8"), headers=_SECURITY_HEADERS)


@router.get("/meetingattendance/check-in/{meeting_id}")
async def check_in_page(meeting_id: str) -> HTMLResponse:
    """Guests check in without an account; users sign in. The meeting id is read by the script from the path."""
    return _page("checkin.html")


@router.get("/meetingattendance/display/{meeting_id}")
async def display_page(meeting_id: str) -> HTMLResponse:
    return _page("display.html")


@router.get("/meetingattendance/static/{name}")
async def asset(name: str) -> Response:
    media = _ASSETS.get(name)
    if media is None:
        raise NotFound("No such file")
    return Response((_WEB / name).read_bytes(), media_type=media,
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})
