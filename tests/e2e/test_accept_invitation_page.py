"""The invitation mail's link, followed in Chromium: sign in (or create the account) and accept."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from tests.support.live import LiveServer, service_env

pytestmark = pytest.mark.live_server
PASSWORD = "a long password 1"


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


def register_and_sign_in(base: str, email: str, name: str) -> dict[str, str]:
    httpx.post(f"{base}/api/v1/auth/register",
               json={"email": email, "password": PASSWORD, "display_name": name}).raise_for_status()
    tokens = httpx.post(f"{base}/api/v1/auth/token",
                        data={"grant_type": "password", "username": email, "password": PASSWORD})
    tokens.raise_for_status()
    return {"Authorization": f"Bearer {tokens.json()['access_token']}"}


def invite(base: str, owner: dict[str, str], email: str, workspace: str = "Atlas") -> None:
    created = httpx.post(f"{base}/api/v1/workspaces", json={"name": workspace}, headers=owner)
    created.raise_for_status()
    invited = httpx.post(f"{base}/api/v1/workspaces/{created.json()['id']}/invitations",
                         json={"email": email, "role": "member"}, headers=owner)
    assert invited.status_code == 201, invited.text


def link_from_mail(smtp_server, to: str, timeout: float = 30.0) -> str:
    # The server is shared by the session and holds earlier tests' mail: wait for this recipient's, not for
    # "one more message" (`wait_for(1)` returned at once, and a slow delivery failed the test).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in smtp_server.messages:
            if message["To"] == to:
                text = message.get_payload(decode=True).decode()  # the body is quoted-printable on the wire
                match = re.search(r"(http://\S+/invitations/accept\?token=\S+)", text)
                assert match, text
                return match.group(1)
        time.sleep(0.1)
    pytest.fail(f"no invitation mail to {to}")


def unique(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:8]}@example.com"


async def test_an_existing_account_signs_in_and_joins(mail_server, smtp_server, page):
    owner = register_and_sign_in(mail_server.url, unique("owner"), "Olga Owner")
    invitee = unique("ines")
    register_and_sign_in(mail_server.url, invitee, "Ines")
    invite(mail_server.url, owner, invitee, workspace="Atlas")
    link = link_from_mail(smtp_server, invitee)

    await page.goto(link)
    await page.get_by_label("Email", exact=True).fill(invitee)
    await page.get_by_label("Password", exact=True).fill(PASSWORD)
    await page.get_by_role("button", name="Sign in and accept").click()
    await page.get_by_text("You joined Atlas as member.").wait_for()
    # The invitation code field is only for people without the link.
    assert await page.locator("#code-section").is_hidden()


async def test_a_new_person_creates_the_account_on_the_page(mail_server, smtp_server, page):
    owner = register_and_sign_in(mail_server.url, unique("owner"), "Olga Owner")
    newcomer = unique("nora")
    invite(mail_server.url, owner, newcomer, workspace="Borealis")
    link = link_from_mail(smtp_server, newcomer)

    await page.goto(link)
    await page.get_by_role("button", name="New to Tenet? Create your account").click()
    await page.get_by_label("Your name").fill("Nora Newcomer")
    await page.get_by_label("Email (the invited address)").fill(newcomer)
    await page.get_by_label("Password (at least 10 characters)").fill(PASSWORD)
    await page.get_by_role("button", name="Create account and accept").click()
    await page.get_by_text("You joined Borealis as member.").wait_for()


async def test_the_wrong_account_sees_why_and_can_retry(mail_server, smtp_server, page):
    owner = register_and_sign_in(mail_server.url, unique("owner"), "Olga Owner")
    invitee, bystander = unique("ivy"), unique("bob")
    register_and_sign_in(mail_server.url, invitee, "Ivy")
    register_and_sign_in(mail_server.url, bystander, "Bob")
    invite(mail_server.url, owner, invitee, workspace="Cygnus")
    link = link_from_mail(smtp_server, invitee)

    await page.goto(link)
    await page.get_by_label("Email", exact=True).fill(bystander)
    await page.get_by_label("Password", exact=True).fill(PASSWORD)
    await page.get_by_role("button", name="Sign in and accept").click()
    alert = page.get_by_role("alert")
    await alert.get_by_text("sent to another email address").wait_for()
    await page.get_by_label("Email", exact=True).fill(invitee)
    await page.get_by_role("button", name="Sign in and accept").click()
    await page.get_by_text("You joined Cygnus as member.").wait_for()


async def test_a_dead_link_says_so(mail_server, page):
    account = unique("dora")
    register_and_sign_in(mail_server.url, account, "Dora")
    await page.goto(f"{mail_server.url}/invitations/accept?token=wsi_not-a-real-token-000000000")
    await page.get_by_label("Email", exact=True).fill(account)
    await page.get_by_label("Password", exact=True).fill(PASSWORD)
    await page.get_by_role("button", name="Sign in and accept").click()
    await page.get_by_role("alert").get_by_text("no longer valid").wait_for()


def test_the_page_forbids_foreign_scripts_and_referrers(live_server):
    response = httpx.get(f"{live_server.url}/invitations/accept?token=x")
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["referrer-policy"] == "no-referrer"
    assert httpx.get(f"{live_server.url}/static/accept-invitation.js").status_code == 200
