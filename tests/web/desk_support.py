"""What the desk's HTTP tests share: the reservation world (two hotels, an agent each, ingest clients), browsers
as separate cookie jars signed in through the console's sign-in form, and the card page's form as a dict."""

from __future__ import annotations

import re
from html import unescape

import httpx

from tests.reservations.conftest import ReservationApi, body, item  # noqa: F401 (re-exported for the tests)
from tests.web.test_console_http import csrf_of, sign_in

_INPUT = re.compile(r'<input([^>]*)>')
_ATTR = re.compile(r'(\w[\w:-]*)="([^"]*)"')


def agent_browser(app) -> httpx.AsyncClient:
    """Another browser (its own cookies) on the same app."""
    transport = httpx.ASGITransport(app=app, client=("203.0.113.8", 50001))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def signed_in(browser: httpx.AsyncClient, email: str) -> httpx.AsyncClient:
    response = await sign_in(browser, email, next_path="/console/desk")
    assert response.status_code == 303, response.text
    return browser


def form_of(html: str, form_id: str) -> dict[str, str]:
    """The named inputs of one form of a page (hidden and text inputs; enough for the desk's forms)."""
    start = html.index(f'id="{form_id}"')
    end = html.index("</form>", start)
    found: dict[str, str] = {}
    for match in _INPUT.finditer(html[start:end]):
        attrs = dict(_ATTR.findall(match.group(1)))
        if "name" in attrs and attrs.get("type") not in ("radio", "checkbox"):
            found[attrs["name"]] = unescape(attrs.get("value", ""))
    return found


def csrf(html: str) -> str:
    return csrf_of(html)
