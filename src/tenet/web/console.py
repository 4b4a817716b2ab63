"""The web layer every console uses (issue 18; the reservation desk reuses it): who is looking (a server-side
session), CSRF on every form, the language and zone they see, Jinja2 templates in a base layout, and errors in words.

- **Sessions.** Signing in sets `tenet_session`, a random secret (HttpOnly, SameSite=Lax, Secure when the request
  came over HTTPS, directly or as the proxy's `X-Forwarded-Proto`); `iam.web_sessions` keeps its digest. Each page
  resolves it with one statement (`tenet.iam.queries.web_principal`): a signed-out, expired or revoked session (the
  account's roles changed, it was disabled or deleted) signs nobody in, and the page answers with the sign-in form
  and then returns to where the person was (`?next=`, a local path only: `safe_next`).
- **CSRF.** Every form carries `csrf_token`, an HMAC of the browser's session secret (or, before sign-in, of its
  `tenet_anon` cookie) under the service's signing key; htmx requests send it as `X-CSRF-Token` (the layout's
  `hx-headers`). A POST without the right token answers the 403 page and changes nothing (`posted`).
- **Pages call the services and queries the API calls**: a page module holds no SQL and no rule; what it offers
  comes from the permission points the API checks (`Viewer.can`), and the service refuses a forged request anyway.
- **Policy.** The pages' Content-Security-Policy is tenet.web.pages' (own scripts, styles and images only, no inline
  script or style); htmx is served from this package and configured by a `<meta>` (no eval, no inline styles).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from markupsafe import Markup
from starlette.datastructures import FormData

from tenet.iam import queries as iam_queries
from tenet.iam.principal import Principal
from tenet.iam.tokens import digest
from tenet.kernel.errors import DomainError, PermissionDenied, ValidationFailed
from tenet.kernel.settings import KernelSettings
from tenet.social import queries as social_queries
from tenet.web import i18n, words
from tenet.web.pages import _SECURITY_HEADERS

PREFIX = "/console"
SESSION_COOKIE, ANON_COOKIE, LANGUAGE_COOKIE = "tenet_session", "tenet_anon", "tenet_lang"
CSRF_FIELD, CSRF_HEADER = "csrf_token", "X-CSRF-Token"
_TEMPLATE_PACKAGES: list[str] = ["tenet.web"]


# --- templates ------------------------------------------------------------------------------------------

def register_templates(package: str) -> None:
    """A console's package whose `templates/` directory joins the layout's (call at import of its pages module)."""
    if package not in _TEMPLATE_PACKAGES:
        _TEMPLATE_PACKAGES.append(package)
        environment.cache_clear()


@cache
def environment(language: str) -> jinja2.Environment:
    """One environment per language, with its catalog installed (gettext, ngettext; `{% trans %}`)."""
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PackageLoader(p, "templates") for p in _TEMPLATE_PACKAGES]),
        autoescape=True, extensions=["jinja2.ext.i18n"], undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
        auto_reload=False)  # the templates ship in the package: no stat of each one on every render
    catalog = i18n.translations(language)
    env.install_gettext_translations(catalog, newstyle=True)  # type: ignore[attr-defined]
    # `_` and `gettext` as one plain function with the newstyle semantics (the message is markup, the variables
    # are escaped into it, `%` always applies): Jinja's own pair goes through three context calls per message,
    # which on a queue page of ~30 labels redrawn every few seconds cost more than its statements.
    gettext = _fast_gettext(catalog)
    env.globals.update(_=gettext, gettext=gettext)
    return env


def _fast_gettext(catalog: Any) -> Callable[..., Markup]:
    messages: dict[str, Markup] = {}

    def gettext(string: str, /, **variables: Any) -> Markup:
        message = messages.get(string)
        if message is None:
            message = messages[string] = Markup(catalog.gettext(string))  # noqa: S704 (the catalog's own text)
        return message % variables

    return gettext


# --- who is looking -----------------------------------------------------------------------------------------

@dataclass
class Viewer:
    """The person looking at a page (or nobody yet), in their language and zone, with the page's CSRF token."""

    principal: Principal | None
    session_id: uuid.UUID | None
    language: str
    chosen_language: bool
    zone: str | None
    csrf: str
    new_anon: str | None = None  # a `tenet_anon` cookie to set with this answer

    @property
    def signed_in(self) -> bool:
        return self.principal is not None

    def can(self, permission: str) -> bool:
        return self.principal is not None and self.principal.can(permission)

    def require(self, permission: str) -> Principal:
        """The viewer's principal when it holds `permission` (the point the API checks); PermissionDenied, the
        console's 403 page, otherwise."""
        if self.principal is None or not self.principal.can(permission):
            raise PermissionDenied(f"Requires the permission {permission}", permission=str(permission))
        return self.principal

    @property
    def formats(self) -> i18n.Formats:
        return i18n.Formats(self.language)

    def gettext(self, message: str) -> str:
        return i18n.translations(self.language).gettext(message)


class SignInRequired(Exception):
    """No live session: the page answers with the sign-in form, and comes back to `next` after."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfRefused(DomainError):
    status, code, title = 403, "CSRF_REFUSED", "The form's CSRF token is missing or wrong"


def _key(request: Request) -> bytes:
    settings: KernelSettings = request.app.state.settings
    return settings.signing_key().encode()


def csrf_token(request: Request, binding: str) -> str:
    return hmac.new(_key(request), b"csrf\x00" + binding.encode(), hashlib.sha256).hexdigest()


def https(request: Request) -> bool:
    """Whether the browser talks to us over HTTPS: directly, or as the proxy in front says."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def safe_next(value: str | None, default: str = PREFIX) -> str:
    """`next` when it is a path of this site (`/console/...`, no scheme, host, `//` or backslash), else `default`."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return default
    if any(ord(c) < 0x20 or ord(c) == 0x7f for c in value):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    return value


def here(request: Request) -> str:
    """The path (and query) of this request, as a `next` for the sign-in form."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


async def _stored_preferences(request: Request, principal: Principal) -> dict[str, Any]:
    """What the person chose in their settings (the stored, sparse document: a default is not a choice)."""
    try:
        row = await social_queries.settings(request.app.state.db.reads, principal_id=principal.id)
    except DomainError:
        return {}
    stored = row["settings"] or {}
    preferences = stored.get("preferences") if isinstance(stored, dict) else None
    return preferences if isinstance(preferences, dict) else {}


async def resolve(request: Request) -> Viewer:
    """Who is looking: the session's person (or nobody), their language and zone, and the CSRF token to use."""
    secret = request.cookies.get(SESSION_COOKIE)
    found = None
    if secret:
        found = await iam_queries.web_principal(request.app.state.db.reads, token_digest=digest(secret),
                                                now=request.app.state.clock.now())
    accept = request.headers.get("accept-language")
    if found is None:
        anon = request.cookies.get(ANON_COOKIE)
        new_anon = None
        if not anon or len(anon) > 64:
            anon = new_anon = secrets.token_urlsafe(24)
        chosen = i18n.supported(request.cookies.get(LANGUAGE_COOKIE))
        viewer = Viewer(principal=None, session_id=None, language=i18n.choose(chosen, accept),
                        chosen_language=chosen is not None, zone=None, csrf=csrf_token(request, "anon:" + anon),
                        new_anon=new_anon)
    else:
        principal, session_id = found
        preferences = await _stored_preferences(request, principal)
        stored_language = i18n.supported(preferences.get("language"))
        zone = preferences.get("timezone")
        viewer = Viewer(principal=principal, session_id=session_id, language=i18n.choose(stored_language, accept),
                        chosen_language=stored_language is not None, zone=zone if isinstance(zone, str) else None,
                        csrf=csrf_token(request, "session:" + str(secret)))
    request.state.viewer = viewer
    return viewer


async def signed_in(request: Request) -> Viewer:
    """The viewer of a page for signed-in people; SignInRequired (back here after) when there is no live session."""
    viewer = await resolve(request)
    if viewer.principal is None:
        referer_path = here(request) if request.method == "GET" else _referer_path(request)
        raise SignInRequired(referer_path)
    return viewer


def _referer_path(request: Request) -> str:
    referer = request.headers.get("referer")
    if not referer:
        return PREFIX
    parts = urlsplit(referer)
    if parts.netloc and parts.netloc != request.url.netloc:
        return PREFIX
    return safe_next(parts.path + (f"?{parts.query}" if parts.query else ""))


async def posted(request: Request, viewer: Viewer) -> FormData:
    """The form of a POST, after its CSRF token checked out (the field, or the htmx header); CsrfRefused else."""
    form = await request.form()
    given = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    if not isinstance(given, str) or not hmac.compare_digest(given, viewer.csrf):
        raise CsrfRefused()
    return form


# --- answers --------------------------------------------------------------------------------------------

def render(request: Request, viewer: Viewer, template: str, *, status_code: int = 200,
           headers: Mapping[str, str] | None = None, **context: Any) -> HTMLResponse:
    """A page (or an htmx fragment) in the viewer's language, under the pages' strict policy."""
    html = environment(viewer.language).get_template(template).render(
        viewer=viewer, fmt=viewer.formats, request_path=here(request), prefix=PREFIX, languages=i18n.NAMES,
        words=words.sentence, csrf_field=CSRF_FIELD, **{"active": None, **context})
    response = HTMLResponse(html, status_code=status_code, headers={**_SECURITY_HEADERS, **(headers or {})})
    if viewer.new_anon:
        set_cookie(request, response, ANON_COOKIE, viewer.new_anon)
    return response


def set_cookie(request: Request, response: Response, name: str, value: str, *, max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/", httponly=True, samesite="lax", secure=https(request))


def see_other(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=303, headers={"Cache-Control": "no-store"})


def to_sign_in(request: Request, next_path: str) -> Response:
    location = f"{PREFIX}/sign-in?next={quote(safe_next(next_path), safe='/')}"
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": location})  # htmx follows it as a page load
    return see_other(location)


async def error_page(request: Request, error: DomainError) -> HTMLResponse:
    """The refusal in words. When it came before the page knew its viewer (the request's own parameters were
    refused), the viewer is resolved here, so the page's forms (the language switcher) carry the right CSRF token."""
    viewer = getattr(request.state, "viewer", None)
    if viewer is None:
        viewer = await resolve(request)
    return render(request, viewer, "console/error.html", status_code=error.status, headers=error.headers,
                  code=str(error.code), sentence=words.sentence(str(error.code)))


class ConsoleRoute(APIRoute):
    """Routes of a console: no live session → the sign-in form (then back); a refusal → the error page in words
    (a form that can show the refusal next to its field catches it itself and renders the form)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired as exc:
                return to_sign_in(request, exc.next_path)
            except RequestValidationError:  # a page's query parameter out of bounds: the error page, in words
                return await error_page(request, ValidationFailed("A parameter of this page is not valid"))
            except DomainError as exc:
                return await error_page(request, exc)

        return console_handler


def now(request: Request) -> datetime:
    clock = request.app.state.clock
    value: datetime = clock.now()
    return value
