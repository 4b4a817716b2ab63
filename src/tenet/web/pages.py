"""Public pages. They are thin: HTML plus a small script that calls the same JSON API as every client,
so the rules live in one place (the services) and the pages cannot bypass them."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_PATH = "/static"
_TEMPLATES = files("tenet.web") / "templates"

# The pages run only our own script and talk only to our own API.
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",  # the invitation token is in the page's URL
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)


def _page(name: str) -> HTMLResponse:
    return HTMLResponse((_TEMPLATES / name).read_text(encoding="utf-8"), headers=_SECURITY_HEADERS)


@router.get("/invitations/accept")
async def accept_invitation_page() -> HTMLResponse:
    """Where the invitation mail's link leads: sign in (or create the account) and accept."""
    return _page("accept_invitation.html")


def static_files() -> StaticFiles:
    return StaticFiles(packages=[("tenet.web", "static")])
