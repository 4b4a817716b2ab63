"""The first look, offline: `/`, Swagger UI at /docs and ReDoc at /redoc in Chromium, with every request
that does not go to the test server aborted and recorded. Everything they need comes from the service."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.live_server
PASSWORD = "a long password 1"


@pytest.fixture
async def offline_page(browser, live_server):
    """A page that can reach the test server and nothing else; `page.foreign` lists what it tried."""
    context = await browser.new_context()
    foreign: list[str] = []
    local = re.compile(rf"^{re.escape(live_server.url)}(/|$)")

    async def only_the_test_server(route):
        if local.match(route.request.url):
            await route.continue_()
        else:
            foreign.append(route.request.url)
            await route.abort("internetdisconnected")

    await context.route("**/*", only_the_test_server)
    page = await context.new_page()
    page.foreign = foreign
    page.csp_violations = []
    page.on("console", lambda message: "Content Security Policy" in message.text
            and page.csp_violations.append(message.text))
    yield page
    await context.close()


async def test_swagger_ui_renders_offline_and_authorize_signs_in(offline_page, live_server):
    page, base = offline_page, live_server.url
    email = f"docs-{uuid.uuid4().hex[:8]}@example.com"
    async with httpx.AsyncClient(base_url=base) as api:
        registered = await api.post("/api/v1/auth/register",
                                    json={"email": email, "password": PASSWORD, "display_name": "Dora Docs"})
        registered.raise_for_status()

    await page.goto(f"{base}/docs")
    me = page.locator(".opblock-summary-path", has_text=re.compile(r"^/api/v1/auth/me$"))
    await me.wait_for()
    assert await page.locator(".opblock").count() > 10

    # Authorize: the OAuth2 password flow against /api/v1/auth/token, as before.
    await page.get_by_role("button", name="Authorize").first.click()
    dialog = page.locator(".modal-ux")
    await dialog.get_by_label("username:").fill(email)
    await dialog.get_by_label("password:").fill(PASSWORD)
    await dialog.get_by_role("button", name="Apply given OAuth2 credentials").click()
    await dialog.get_by_role("button", name="Remove authorization").wait_for()  # "Logout": signed in
    await dialog.locator("button.close-modal").click()

    # ... and the token is used: GET /api/v1/auth/me from the page answers who signed in.
    await me.click()
    operation = page.locator(".opblock.is-open")
    await operation.get_by_role("button", name="Try it out").click()
    await operation.get_by_role("button", name="Execute").click()
    response = operation.locator(".live-responses-table .response")
    await response.locator(".response-col_status", has_text="200").wait_for()
    assert email in await response.locator(".microlight").first.inner_text()

    assert page.foreign == []
    assert page.csp_violations == []


async def test_redoc_renders_offline(offline_page, live_server):
    page = offline_page
    await page.goto(f"{live_server.url}/redoc")
    await page.get_by_role("heading", name="Who am I: user or API client, roles, permissions").first.wait_for()
    await page.get_by_text("/api/v1/auth/me").first.wait_for()
    assert page.foreign == []
    # The two refusals docs.py names (scrollbar styles injected before ReDoc takes its nonce; Redocly's
    # remote logo), and nothing else.
    unexpected = [v for v in page.csp_violations if "Applying inline style" not in v and "cdn.redoc.ly" not in v]
    assert unexpected == []


def _readme_systems() -> dict[str, str]:
    """The README's table of systems: package -> status."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    found = dict(re.findall(r"^\|[^|]+\| `(tenet\.\w+)` \| (\w+) \|$", readme, flags=re.M))
    assert len(found) >= 5, found
    return found


async def test_the_home_page_names_the_systems_and_links_the_docs(offline_page, live_server):
    page, base = offline_page, live_server.url
    await page.goto(f"{base}/")
    systems = page.locator("#systems")
    # The page says what the README says, package for package (it said "planned" for three live systems).
    for package, status in _readme_systems().items():
        await systems.get_by_role("row", name=re.compile(rf"{re.escape(package)}\s*{status}")).wait_for()
    assert await systems.locator("tbody tr").count() == len(_readme_systems())
    links = page.locator("#links a")
    hrefs = {await links.nth(i).get_attribute("href") for i in range(await links.count())}
    assert hrefs == {"/console", "/docs", "/redoc", "/openapi.json", "/healthz", "/readyz"}

    await page.get_by_role("link", name="Interactive API documentation").click()
    await page.locator(".opblock-summary-path", has_text="/api/v1/auth/me").first.wait_for()
    assert page.url == f"{base}/docs"
    assert page.foreign == [] and page.csp_violations == []
