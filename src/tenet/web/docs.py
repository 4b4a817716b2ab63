"""The documentation a newcomer meets first, served by Tenet itself so it works without internet:
`/` (what runs here and where to look), Swagger UI at `/docs` and ReDoc at `/redoc`.

The Swagger UI and ReDoc bundles come from the `fastapi-offline` distribution (we use only its static
files); the pages are our own templates, so they keep a strict Content-Security-Policy: every script is a
file from this origin, including the few lines that start Swagger UI and ReDoc (static/*-init.js).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from html import escape
from importlib.resources import files

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/assets"
_TEMPLATES = files("tenet.web") / "templates"

# The pages' policy (see pages.py): scripts, styles and images only from this origin. The home page lives
# with it as it is; Swagger UI adds data: images, ReDoc three things (see redoc()).
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'{style}; img-src 'self'{img}; "
        "connect-src 'self'{worker}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_HEADERS = {"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class System:
    name: str
    package: str
    status: str


# The README's table of systems, status for status (tests/e2e/test_docs_pages.py compares the page with it).
SYSTEMS = (
    System("Identity: users, roles, permission points, API clients, tokens", "tenet.iam", "available"),
    System("Workspaces, members and email invitations", "tenet.workspaces", "available"),
    System("Social collaboration: profiles, friends, groups, shared schedule items, inbox, todos, automations",
           "tenet.social", "available"),
    System("Meeting attendance: meetings, series, QR check-in, reports, agenda and files", "tenet.meetings",
           "available"),
    System("Hotel reservation workflow: AI ingest, orders, task queues, task cards, simulated OPERA",
           "tenet.reservations", "available"),
)

router = APIRouter(include_in_schema=False)


def _render(name: str, request: Request, *, csp: dict[str, str] | None = None, **values: str) -> HTMLResponse:
    """The template with `{{root}}` (the app's root path, for a service mounted under a prefix) and the
    given already-escaped `{{values}}` filled in."""
    html = (_TEMPLATES / name).read_text(encoding="utf-8")
    for key, value in {"root": escape(request.scope.get("root_path", "")), **values}.items():
        html = html.replace("{{" + key + "}}", value)
    policy = _CSP.format(**{"style": "", "img": "", "worker": ""} | (csp or {}))
    return HTMLResponse(html, headers={"Content-Security-Policy": policy, **_HEADERS})


@router.get("/")
async def home(request: Request) -> HTMLResponse:
    """What runs here and where to look next."""
    rows = "\n".join(
        f'        <tr><td>{escape(s.name)}</td><td><code>{escape(s.package)}</code></td>'
        f'<td class="status-{escape(s.status)}">{escape(s.status)}</td></tr>'
        for s in SYSTEMS
    )
    return _render("home.html", request, systems=rows)


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI on /openapi.json; *Authorize* uses the OAuth2 password flow against /api/v1/auth/token."""
    return _render("swagger_ui.html", request, csp={"img": " data:"})  # its icons are data: SVGs


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    # ReDoc (styled-components) writes its styles into <style> elements at run time: they carry this
    # response's nonce, which our init script hands to ReDoc (no 'unsafe-inline'). Its icons are data:
    # images, and its search index runs in a worker made from a blob. Two things stay refused, both
    # cosmetic: the scrollbar stylesheet it injects before it can take the nonce (native scrollbars
    # instead) and the Redocly logo it links from its own CDN (the link's text remains).
    nonce = secrets.token_urlsafe(18)
    return _render("redoc.html", request, nonce=nonce,
                   csp={"style": f" 'nonce-{nonce}'", "img": " data:", "worker": "; worker-src blob:"})


def mount_assets(app: FastAPI) -> None:
    """Serve the Swagger UI and ReDoc bundles of the fastapi-offline distribution under ASSETS_PATH."""
    app.mount(ASSETS_PATH, StaticFiles(packages=[("fastapi_offline", "static")]), name="docs-assets")
