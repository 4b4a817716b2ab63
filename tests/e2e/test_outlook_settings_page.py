"""The Outlook sync's settings page in real Chromium against a real `tenet serve` (issues 17, 18): a manager opens it
from the Outlook pages' navigation, changes the batch size with the keyboard and saves; the page says it was saved,
shows the new value after a reload, and the API answers it. A value out of range is refused by the browser before it
is sent (the field's own range), and by the server next to the field if sent anyway. No page trips the CSP."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in, _token

pytestmark = pytest.mark.live_server


def _policy(server, email: str) -> dict:
    response = httpx.get(f"{server.url}{BASE}/outlook/settings",
                         headers={"Authorization": f"Bearer {_token(server, email)}"})
    response.raise_for_status()
    return response.json()


async def test_a_manager_changes_the_batch_size(live_server, live_admin_token, watched):
    open_page, violations = watched
    manager = _person(live_server, live_admin_token, "Mona Manager", ["MeetingManager"])
    before = _policy(live_server, manager["email"])
    wanted = 250 if before["batch_size"] != 250 else 300

    page = await open_page(viewport={"width": 1280, "height": 900})
    await _sign_in(page, live_server, manager["email"], "/console/outlook")
    await page.click("#outlook-settings-link")
    await page.wait_for_selector("#outlook-settings")
    assert await page.get_attribute("#outlook-settings-link", "aria-current") == "page"
    assert await page.get_attribute("#credentials", "data-configured") == "no"  # this server has no Graph secret
    label = await page.text_content("label[for=f-batch_size]")
    assert label == "Batch size (events per Graph page, 10 to 1,000)"

    # Out of its range: the browser keeps the form (the field says why), nothing is sent.
    await page.fill("#f-batch_size", "5000")
    await page.click("#outlook-settings button[type=submit]")
    assert not await page.eval_on_selector("#f-batch_size", "input => input.validity.valid")
    assert await page.query_selector("#saved") is None

    await page.focus("#f-batch_size")
    await page.keyboard.press("Control+A")
    await page.keyboard.type(str(wanted))
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#saved")
    await _shoot(page, "outlook-settings")
    await page.reload()
    assert await page.input_value("#f-batch_size") == str(wanted)
    assert "Mona Manager" in await page.text_content("#last-change")
    after = _policy(live_server, manager["email"])
    assert after["batch_size"] == wanted and after["version"] == before["version"] + 1

    # Sent past the browser's check (a script, an old browser): the server says it next to the field.
    await page.eval_on_selector("#f-batch_size", "input => { input.removeAttribute('max'); input.value = '5000'; }")
    await page.click("#outlook-settings button[type=submit]")
    await page.wait_for_selector("#e-batch_size")
    assert await page.text_content("#e-batch_size") == "Give a whole number from 10 to 1,000."
    assert await page.get_attribute("#f-batch_size", "aria-describedby") == "e-batch_size"
    assert violations == []
