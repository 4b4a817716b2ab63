"""Pages in real Chromium (the system's /usr/bin/chromium, driven by Playwright)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("TENET_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_PRESENT = CHROMIUM.exists()
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
async def browser():
    from playwright.async_api import async_playwright

    if not CHROMIUM_PRESENT:
        pytest.fail(f"Chromium is needed at {CHROMIUM} for the page tests (`make test` installs it)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
async def page(browser):
    context = await browser.new_context()
    page = await context.new_page()
    yield page
    await context.close()


@pytest.fixture
async def watched(browser):
    """Browser contexts whose pages record CSP violations (console messages naming the policy)."""
    contexts = []
    violations: list[str] = []

    async def open_page(**options):
        context = await browser.new_context(**options)
        contexts.append(context)
        page = await context.new_page()
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        return page

    yield open_page, violations
    for context in contexts:
        await context.close()
