"""The consoles' own pages: sign in (a form, then a server-side session), sign out, the password reset (ask for the
mail, then set the password with its link) and the language switcher of every page. Sign-in is
`tenet.iam.signin.with_password`, the API's token route's very steps and limiter buckets; the reset is
`tenet.iam.password_reset.ask`/`finish`, the API's `/auth/password-reset` routes' very steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import client_address
from tenet.iam import password_reset, signin, web_sessions
from tenet.iam.models import UserAccount
from tenet.iam.settings import IamSettings
from tenet.kernel.errors import DomainError, RouteNotFound
from tenet.kernel.settings import KernelSettings, section
from tenet.social import profiles
from tenet.web import console, i18n
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
_YEAR = 365 * 24 * 3600
PASSWORDS_DIFFER = "PASSWORDS_DIFFER"  # the page's own refusal (the two fields differ): a sentence in tenet.web.words


def _form_value(form: object, name: str, limit: int) -> str:
    value = form.get(name)  # type: ignore[attr-defined]
    return value[:limit] if isinstance(value, str) else ""


def _sign_in_page(request: Request, viewer: Viewer, next_path: str, *, email: str = "",
                  error: DomainError | None = None, password_set: bool = False) -> Response:
    return console.render(request, viewer, "console/sign_in.html", status_code=error.status if error else 200,
                          headers=error.headers if error else None, next_path=next_path, email=email,
                          error_code=str(error.code) if error else None, password_set=password_set)


@router.get("/sign-in")
async def sign_in_form(request: Request, next_path: Annotated[str | None, Query(alias="next")] = None,
                       password_set: Annotated[bool, Query(alias="password-set")] = False) -> Response:
    viewer = await console.resolve(request)
    target = console.safe_next(next_path)
    if viewer.signed_in:
        return console.see_other(target)
    return _sign_in_page(request, viewer, target, password_set=password_set)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    viewer = await console.resolve(request)
    form = await console.posted(request, viewer)
    email, password = _form_value(form, "email", 320), _form_value(form, "password", 1024)
    target = console.safe_next(_form_value(form, "next", 2000))
    state = request.app.state
    iam = section(state.settings, IamSettings)
    ttl = timedelta(hours=iam.web_session_ttl_hours)
    now = console.now(request)

    async def start(session: AsyncSession, user: UserAccount) -> str:
        return await web_sessions.start(session, user=user, now=now, ttl=ttl)

    try:
        secret = await signin.with_password(state, email=email, password=password, address=client_address(request),
                                            limit=iam.login_failure_limit, now=now, then=start)
    except DomainError as exc:
        if exc.status >= 500:
            raise
        return _sign_in_page(request, viewer, target, email=email, error=exc)
    response = console.see_other(target)
    console.set_cookie(request, response, console.SESSION_COOKIE, secret, max_age=int(ttl.total_seconds()))
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    viewer = await console.resolve(request)
    await console.posted(request, viewer)
    secret = request.cookies.get(console.SESSION_COOKIE)
    if secret:
        async with request.app.state.db.unit_of_work() as session:
            await web_sessions.end(session, secret=secret, now=console.now(request))
    response = console.see_other(f"{PREFIX}/sign-in")
    response.delete_cookie(console.SESSION_COOKIE, path="/", httponly=True, samesite="lax",
                           secure=console.https(request))
    return response


# --- password reset (issue 20) ---------------------------------------------------------------------------------

@router.get("/password-reset")
async def password_reset_form(request: Request) -> Response:
    viewer = await console.resolve(request)
    return console.render(request, viewer, "console/password_reset.html", sent=False, email="", error_code=None)


@router.post("/password-reset")
async def ask_password_reset(request: Request) -> Response:
    """The same page for every address (known or not): "if it has an account, the mail is on its way"."""
    viewer = await console.resolve(request)
    form = await console.posted(request, viewer)
    email = _form_value(form, "email", 320)
    try:
        await password_reset.ask(request.app.state, email=email, address=client_address(request),
                                 now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500:
            raise
        return console.render(request, viewer, "console/password_reset.html", status_code=exc.status,
                              headers=exc.headers, sent=False, email=email, error_code=str(exc.code))
    return console.render(request, viewer, "console/password_reset.html", sent=True, email="", error_code=None)


def _new_password_page(request: Request, viewer: Viewer, token: str, *, email: str | None,
                       error_code: str | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "console/password_reset_new.html", status_code=status_code, token=token,
                          email=email, error_code=error_code)


@router.get("/password-reset/new")
async def new_password_form(request: Request, token: Annotated[str, Query(max_length=200)] = "") -> Response:
    """Where the mail's link leads: the account's address and the form, or why the link is dead."""
    viewer = await console.resolve(request)
    try:
        email = await password_reset.reset_email(request.app.state.db.reads, token=token, now=console.now(request))
    except DomainError as exc:
        return _new_password_page(request, viewer, "", email=None, error_code=str(exc.code), status_code=exc.status)
    return _new_password_page(request, viewer, token, email=email)


@router.post("/password-reset/new")
async def set_new_password(request: Request) -> Response:
    viewer = await console.resolve(request)
    form = await console.posted(request, viewer)
    token, password = _form_value(form, "token", 200), _form_value(form, "password", 1024)
    now = console.now(request)
    try:
        email = await password_reset.reset_email(request.app.state.db.reads, token=token, now=now)
    except DomainError as exc:
        return _new_password_page(request, viewer, "", email=None, error_code=str(exc.code), status_code=exc.status)
    if password != _form_value(form, "confirm", 1024):
        return _new_password_page(request, viewer, token, email=email, error_code=PASSWORDS_DIFFER, status_code=422)
    try:
        await password_reset.finish(request.app.state, token=token, password=password, now=now)
    except DomainError as exc:
        if exc.status >= 500:
            raise
        dead = exc.status != 422
        return _new_password_page(request, viewer, "" if dead else token, email=None if dead else email,
                                  error_code=str(exc.code), status_code=exc.status)
    # Every session of the account ended with the reset, this browser's too: sign in with the new password.
    response = console.see_other(f"{PREFIX}/sign-in?password-set=true")
    if viewer.signed_in:
        response.delete_cookie(console.SESSION_COOKIE, path="/", httponly=True, samesite="lax",
                               secure=console.https(request))
    return response


@router.post("/language")
async def choose_language(request: Request) -> Response:
    """The switcher: a signed-in person's choice goes to their settings (`preferences.language`); before sign-in,
    to a cookie."""
    viewer = await console.resolve(request)
    form = await console.posted(request, viewer)
    language = i18n.supported(_form_value(form, "language", 35)) or i18n.DEFAULT
    if viewer.principal is not None:
        settings: KernelSettings = request.app.state.settings
        async with request.app.state.db.unit_of_work() as session:
            await profiles.patch_settings(session, principal_id=viewer.principal.id,
                                          patch={"preferences": {"language": language}},
                                          default_timezone=settings.default_timezone, now=console.now(request))
    response = console.see_other(console.safe_next(_form_value(form, "next", 2000)))
    console.set_cookie(request, response, console.LANGUAGE_COOKIE, language, max_age=_YEAR)
    return response


# Included after every domain's routers (tenet.app): a console address no page answers is the console's page in
# words (404 ROUTE_NOT_FOUND, with the navigation and the language switcher), not the API's problem document.
fallback = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)


@fallback.get("/{rest:path}")
async def no_such_page(request: Request, rest: str) -> Response:
    if rest == "":
        return console.see_other(PREFIX)  # `/console/` is the home page
    raise RouteNotFound(f"No console page at {PREFIX}/{rest[:200]}")
