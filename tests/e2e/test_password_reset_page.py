"""The password reset in Chromium (issue 20): from the sign-in page's link, ask for the mail, follow the link the
test SMTP server received, set the password (a mismatch first), sign in with it. No page may trip the CSP."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest

from tests.support.live import LiveServer, service_env

pytestmark = pytest.mark.live_server
PASSWORD = "a long password 1"
NEW_PASSWORD = "my new console password 2"


@pytest.fixture
def mail_server(live_database_url, smtp_server, tmp_path):
    """A service process that sends its mail to the test SMTP server, with links to itself."""
    server = LiveServer(env=service_env(DATABASE_URL=live_database_url, TENET_DATA_DIR=str(tmp_path)),
                        log_path=tmp_path / "server.log")
    server.env.update(TENET_SMTP_HOST="127.0.0.1", TENET_SMTP_PORT=str(smtp_server.port),
                      TENET_PUBLIC_BASE_URL=server.url)
    server.start().wait_ready()
    yield server
    server.stop()


def _link_from_mail(smtp_server, to: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in smtp_server.messages:
            if message["To"] == to:
                text = message.get_payload(decode=True).decode()
                match = re.search(r"(http://\S+/console/password-reset/new\?token=\S+)", text)
                assert match, text
                return match.group(1)
        time.sleep(0.1)
    pytest.fail(f"no password-reset mail to {to}")


async def test_a_person_sets_a_password_from_the_mail_and_signs_in(mail_server, smtp_server, watched):
    open_page, violations = watched
    email = f"reset-{uuid.uuid4().hex[:8]}@example.com"
    async with httpx.AsyncClient() as http:
        registered = await http.post(f"{mail_server.url}/api/v1/auth/register",
                                     json={"email": email, "password": PASSWORD, "display_name": "Rita Reset"})
    registered.raise_for_status()
    page = await open_page()

    await page.goto(f"{mail_server.url}/console/sign-in")
    await page.click("#forgot-password")
    await page.fill("#email", email)
    await page.click("#password-reset button[type=submit]")
    await page.wait_for_selector("#reset-sent")

    await page.goto(_link_from_mail(smtp_server, email))
    assert email in await page.inner_text("#new-password")
    await page.fill("#password", NEW_PASSWORD)
    await page.fill("#confirm", "not the same password 3")
    await page.click("#new-password button[type=submit]")
    assert await page.get_attribute("#reset-error", "data-code") == "PASSWORDS_DIFFER"

    await page.fill("#password", NEW_PASSWORD)
    await page.fill("#confirm", NEW_PASSWORD)
    await page.click("#new-password button[type=submit]")
    await page.wait_for_selector("#password-set")
    await page.fill("#email", email)
    await page.fill("#password", NEW_PASSWORD)
    await page.click("#sign-in button[type=submit]")
    await page.wait_for_url(re.compile(r".*/console$"))
    assert violations == []
