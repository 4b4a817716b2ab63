"""Password reset (issue 20: the accounts the legacy import creates have no usable password): ask by email, the
mail really travels through a test SMTP server, its link sets the password once and only until it expires; the
answer is the same for an unknown address (and no mail leaves); the requests are rate limited; setting the
password ends every sign-in of the account (access and refresh tokens, console sessions); the console's pages do
the same with CSRF; `tenet users set-password` reads the password from stdin, never argv; an imported person's
first sign-in goes through the reset."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import text

from tenet.iam.passwords import Passwords
from tenet.kernel.outbox import SmtpSender, deliver_due
from tenet.meetings.legacy.sample import generate
from tests.conftest import test_settings
from tests.meetings.legacy.test_import import run
from tests.support.users import PASSWORD

AUTH = "/api/v1/auth"
LINK = re.compile(r"https://tenet\.example\.org/console/password-reset/new\?token=(prr_[A-Za-z0-9_\-]+)")
NEW_PASSWORD = "a brand new password 7"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def settings(tmp_path, smtp_server):
    return test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port,
                         public_base_url="https://tenet.example.org/")


async def _ask(client, email: str):
    return await client.post(f"{AUTH}/password-reset", json={"email": email})


def _from(app, address: str) -> httpx.AsyncClient:
    """A client calling from `address` (the limiter counts per client address)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 50000)),
                             base_url="http://testserver")


async def _mailed_token(db, settings, clock, smtp_server, to: str) -> str:
    assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 1
    (message,) = [m for m in smtp_server.wait_for(1) if m["To"] == to]
    body = message.get_payload(decode=True).decode()
    (token,) = set(LINK.findall(body))
    return token


async def _sign_in(client, email: str, password: str):
    return await client.post(f"{AUTH}/token", data={"grant_type": "password", "username": email, "password": password})


async def _complete(client, token: str, password: str = NEW_PASSWORD):
    return await client.post(f"{AUTH}/password-reset/complete", json={"token": token, "password": password})


async def test_the_mailed_link_sets_the_password_once_and_ends_every_sign_in(client, users, db, settings, clock,
                                                                            smtp_server):
    person = await users.make(email="Ada.Lovelace@Example.com")
    before = await _sign_in(client, person.email, PASSWORD)
    assert before.status_code == 200
    access, refresh = before.json()["access_token"], before.json()["refresh_token"]

    asked = await _ask(client, "  ada.lovelace@EXAMPLE.com")
    assert asked.status_code == 202, asked.text
    token = await _mailed_token(db, settings, clock, smtp_server, "Ada.Lovelace@Example.com")

    done = await _complete(client, token)
    assert done.status_code == 204, done.text
    assert (await _sign_in(client, person.email, NEW_PASSWORD)).status_code == 200
    assert (await _sign_in(client, person.email, PASSWORD)).status_code == 401
    # Every sign-in from before the reset is dead: the access token (epoch) and the refresh token.
    assert (await client.get(f"{AUTH}/me", headers={"Authorization": f"Bearer {access}"})).status_code == 401
    assert (await client.post(f"{AUTH}/refresh", json={"refresh_token": refresh})).status_code == 401

    reused = await _complete(client, token, "yet another password 8")
    assert reused.status_code == 400 and reused.json()["code"] == "RESET_TOKEN_INVALID"
    assert (await _sign_in(client, person.email, NEW_PASSWORD)).status_code == 200


async def test_an_unknown_address_gets_the_same_answer_and_no_mail(client, users, db, settings, clock, smtp_server):
    person = await users.make()
    known, unknown = await _ask(client, person.email), await _ask(client, "nobody-here@example.com")
    malformed = await _ask(client, "not an address")
    assert known.status_code == unknown.status_code == malformed.status_code == 202
    assert known.json() == unknown.json() == malformed.json()
    assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 1  # the known address's, only
    assert [m["To"] for m in smtp_server.wait_for(1)] == [person.email]


async def test_a_disabled_account_gets_no_mail(client, users, db, settings, clock, smtp_server):
    admin, person = await users.admin(), await users.make()
    assert (await client.post(f"/api/v1/iam/users/{person.id}/disable", headers=admin.headers)).status_code == 200
    assert (await _ask(client, person.email)).status_code == 202
    assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 0


async def test_the_link_expires(client, users, db, settings, clock, smtp_server):
    person = await users.make()
    await _ask(client, person.email)
    token = await _mailed_token(db, settings, clock, smtp_server, person.email)
    clock.advance(timedelta(minutes=61))  # TENET_PASSWORD_RESET_TTL_MINUTES defaults to 60
    expired = await _complete(client, token)
    assert expired.status_code == 400 and expired.json()["code"] == "RESET_TOKEN_INVALID"
    assert (await _sign_in(client, person.email, PASSWORD)).status_code == 200


async def test_a_weak_password_is_refused_and_leaves_the_link_usable(client, users, db, settings, clock, smtp_server):
    person = await users.make()
    await _ask(client, person.email)
    token = await _mailed_token(db, settings, clock, smtp_server, person.email)
    weak = await _complete(client, token, "short")
    assert weak.status_code == 422 and weak.json()["code"] == "PASSWORD_TOO_WEAK"
    assert (await _complete(client, token)).status_code == 204


async def test_an_unknown_secret_is_refused(client):
    refused = await _complete(client, "prr_" + "x" * 43)
    assert refused.status_code == 400 and refused.json()["code"] == "RESET_TOKEN_INVALID"


async def test_a_newer_reset_kills_the_older_links_too(client, users, db, settings, clock, smtp_server):
    person = await users.make()
    await _ask(client, person.email)
    await _ask(client, person.email)
    assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 2
    first, second = (LINK.search(m.get_payload(decode=True).decode()).group(1) for m in smtp_server.wait_for(2))
    assert (await _complete(client, second)).status_code == 204
    assert (await _complete(client, first, "one more password 9")).status_code == 400


async def test_requests_are_rate_limited_per_address_asked_for_known_or_not(app, client, users):
    person = await users.make()
    for email in (person.email, "nobody-at-all@example.com"):
        answers = []
        for n in range(6):
            async with _from(app, f"198.51.100.{n}") as other:
                answers.append((await _ask(other, email)).status_code)
        assert answers == [202] * 5 + [429], email  # TENET_PASSWORD_RESET_LIMIT defaults to 5/hour
    # ... and per client address, whatever addresses it asks for.
    answers = [(await _ask(client, f"someone-{n}@example.com")).status_code for n in range(6)]
    assert answers == [202] * 5 + [429]


# --- the console's pages --------------------------------------------------------------------------------------

def _csrf(html: str) -> str:
    found = _CSRF.search(html)
    assert found, html
    return found.group(1)


async def test_the_pages_ask_set_and_end_the_console_session(client, users, db, settings, clock, smtp_server):
    person = await users.make(display_name="Pat Person")
    # A console session of the person, from before the reset.
    form = await client.get("/console/sign-in")
    signed = await client.post("/console/sign-in", data={"csrf_token": _csrf(form.text), "email": person.email,
                                                         "password": PASSWORD, "next": "/console"})
    assert signed.status_code == 303
    old_cookie = client.cookies.get("tenet_session")
    client.cookies.delete("tenet_session")

    sign_in_page = await client.get("/console/sign-in")
    assert 'href="/console/password-reset"' in sign_in_page.text
    page = await client.get("/console/password-reset")
    assert page.status_code == 200
    forged = await client.post("/console/password-reset", data={"email": person.email})
    assert forged.status_code == 403
    answers = []
    for email in (person.email, "stranger@example.com"):
        posted = await client.post("/console/password-reset", data={"csrf_token": _csrf(page.text), "email": email})
        assert posted.status_code == 200
        answers.append(re.search(r'<p id="reset-sent"[^>]*>(.*?)</p>', posted.text).group(1))
    assert answers[0] == answers[1]
    token = await _mailed_token(db, settings, clock, smtp_server, person.email)

    form = await client.get("/console/password-reset/new", params={"token": token})
    assert form.status_code == 200 and person.email in form.text
    assert form.headers["referrer-policy"] == "no-referrer"  # the secret is in the page's address
    fields = {"csrf_token": _csrf(form.text), "token": token, "password": NEW_PASSWORD}
    differ = await client.post("/console/password-reset/new", data={**fields, "confirm": "something else 1"})
    assert differ.status_code == 422 and 'data-code="PASSWORDS_DIFFER"' in differ.text
    done = await client.post("/console/password-reset/new", data={**fields, "confirm": NEW_PASSWORD})
    assert done.status_code == 303 and done.headers["location"] == "/console/sign-in?password-set=true"

    # The console session from before the reset is dead; the link is too; the new password signs in.
    client.cookies.set("tenet_session", old_cookie)
    assert (await client.get("/console")).status_code == 303
    client.cookies.delete("tenet_session")
    dead = await client.get("/console/password-reset/new", params={"token": token})
    assert dead.status_code == 400 and 'data-code="RESET_TOKEN_INVALID"' in dead.text
    assert 'id="new-password"' not in dead.text
    assert (await _sign_in(client, person.email, NEW_PASSWORD)).status_code == 200


async def test_the_pages_speak_chinese(client):
    page = await client.get("/console/password-reset", headers={"Accept-Language": "zh-CN"})
    assert "设置密码" in page.text and "给我发送链接" in page.text
    dead = await client.get("/console/password-reset/new", params={"token": "prr_nothing"},
                            headers={"Accept-Language": "zh-CN"})
    assert "此链接已失效" in dead.text


# --- imported people ------------------------------------------------------------------------------------------

async def test_an_imported_person_signs_in_first_through_the_reset(client, db, settings, clock, smtp_server, tmp_path):
    sample = generate(tmp_path / "dev.db", size=4, around=clock.now())
    await run(db, sample.path, settings, clock)
    async with db.read_only() as session:
        email = (await session.execute(text(
            "SELECT email FROM iam.user_account ORDER BY email LIMIT 1"))).scalar_one()
    assert (await _sign_in(client, email, PASSWORD)).status_code == 401  # no usable password after the import
    await _ask(client, email)
    token = await _mailed_token(db, settings, clock, smtp_server, email)
    assert (await _complete(client, token)).status_code == 204
    assert (await _sign_in(client, email, NEW_PASSWORD)).status_code == 200


# --- the operator's command -----------------------------------------------------------------------------------

@pytest.fixture
def cli_database(migrated_database) -> str:
    url = migrated_database("set_password_cli")
    return url


def _set_password(url: str, *args: str, stdin: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "tenet", "users", "set-password", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_operator_sets_a_password_from_stdin(cli_database: str, tmp_path: Path):
    env = {**os.environ, "DATABASE_URL": cli_database}
    made = subprocess.run([sys.executable, "-m", "tenet", "users", "create-admin", "--email", "op@example.com",
                           "--password", "the first password"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stdout + made.stderr

    done = _set_password(cli_database, "OP@example.com", stdin=NEW_PASSWORD + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "password set" in said and NEW_PASSWORD not in said
    with psycopg.connect(cli_database) as connection:
        stored, epoch = connection.execute("SELECT password_hash, token_epoch FROM iam.user_account "
                                           "WHERE email = 'op@example.com'").fetchone()
        audited = connection.execute("SELECT count(*) FROM kernel.audit_log "
                                     "WHERE action = 'iam.user.password_set'").fetchone()[0]
    assert epoch == 1 and audited == 1

    async def verifies(password: str) -> bool:
        return await Passwords().verify(stored, password)

    import asyncio

    assert asyncio.run(verifies(NEW_PASSWORD)) and not asyncio.run(verifies("the first password"))

    weak = _set_password(cli_database, "op@example.com", stdin="short\n")
    assert weak.returncode == 2 and "PASSWORD_TOO_WEAK" in weak.stdout + weak.stderr
    unknown = _set_password(cli_database, "nobody@example.com", stdin=NEW_PASSWORD + "\n")
    assert unknown.returncode == 2 and "USER_NOT_FOUND" in unknown.stdout + unknown.stderr
    # No option takes the password: it cannot end up in argv.
    argv = _set_password(cli_database, "op@example.com", "--password", NEW_PASSWORD, stdin="")
    assert argv.returncode != 0
