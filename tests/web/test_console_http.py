"""The console's web layer over plain HTTP (issue 18): sign-in makes a server-side session (HttpOnly, SameSite=Lax,
Secure behind HTTPS) that survives requests and dies on sign-out, a role change, a disable and its expiry; every
form needs its CSRF token; `next` is a local path only; sign-in counts against the API's own login limiter; the
language follows the person's choice, else Accept-Language; pages offer only what the permission table allows and
refuse a forged form; a stale form says someone else changed the meeting."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tenet.app import create_app
from tenet.iam import service as iam_service
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tests.conftest import test_settings
from tests.support.users import PASSWORD, UserFactory

BASE = "/api/v1/meeting-attendance"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, email: str, password: str = PASSWORD, *, next_path: str = "/console",
                  headers: dict[str, str] | None = None) -> httpx.Response:
    form_page = await client.get("/console/sign-in", params={"next": next_path}, headers=headers)
    assert form_page.status_code == 200
    return await client.post("/console/sign-in", headers=headers, data={
        "csrf_token": csrf_of(form_page.text), "email": email, "password": password, "next": next_path})


async def page_csrf(client: httpx.AsyncClient, path: str = "/console") -> str:
    response = await client.get(path)
    assert response.status_code == 200, response.text
    return csrf_of(response.text)


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


@pytest.fixture
async def employee(users):
    return await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")


async def _meeting(client, manager, clock, **body) -> dict:
    start = clock.now() + timedelta(hours=1)
    response = await client.post(f"{BASE}/meetings", headers=manager.headers, json={
        "title": "Weekly sync", "timezone": "Asia/Shanghai", "location": "Room 4",
        "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat(), **body})
    assert response.status_code == 201, response.text
    return response.json()


async def _required(client, manager, meeting_id: str) -> list[str]:
    response = await client.get(f"{BASE}/meetings/{meeting_id}/required-attendees", headers=manager.headers)
    return [r["user_id"] for r in response.json()["items"]]


# --- sessions ---------------------------------------------------------------------------------------------

async def test_sign_in_sets_an_httponly_lax_session_that_survives_requests(client, manager):
    response = await sign_in(client, manager.email)
    assert response.status_code == 303 and response.headers["location"] == "/console"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("tenet_session=") and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert "Secure" not in cookie  # plain HTTP here
    for _ in range(2):
        home = await client.get("/console")
        assert home.status_code == 200 and "Mona Manager" in home.text
    assert "default-src 'none'" in home.headers["content-security-policy"]
    assert home.headers["cache-control"] == "no-store"


async def test_the_cookies_are_secure_over_https_and_behind_an_https_proxy(app, client, manager):
    forwarded = await client.get("/console/sign-in", headers={"X-Forwarded-Proto": "https"})
    assert forwarded.headers["set-cookie"].startswith("tenet_anon=") and "Secure" in forwarded.headers["set-cookie"]
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as secure:
        response = await sign_in(secure, manager.email)
    assert response.status_code == 303 and "Secure" in response.headers["set-cookie"]


async def test_a_wrong_password_is_said_in_words_next_to_the_field(client, manager):
    response = await sign_in(client, manager.email, "not the password")
    assert response.status_code == 401
    assert 'id="sign-in-error"' in response.text and "The email or the password is not right." in response.text
    assert "tenet_session" not in response.headers.get("set-cookie", "")


async def test_without_a_session_a_page_sends_to_sign_in_and_back(client, manager):
    response = await client.get("/console/meetings", params={"status": "SCHEDULED"})
    assert response.status_code == 303
    assert response.headers["location"] == "/console/sign-in?next=/console/meetings%3Fstatus%3DSCHEDULED"
    back = await sign_in(client, manager.email, next_path="/console/meetings?status=SCHEDULED")
    assert back.status_code == 303 and back.headers["location"] == "/console/meetings?status=SCHEDULED"


async def test_htmx_requests_without_a_session_are_redirected_by_header(client):
    response = await client.get("/console/meetings/" + "a" * 32 + "/board", headers={"HX-Request": "true"})
    assert response.status_code == 204 and response.headers["hx-redirect"].startswith("/console/sign-in?next=")


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:x",
                                    "/console\r\nSet-Cookie: x=1", "evil", ""])
async def test_next_is_a_local_path_only(client, manager, target):
    response = await sign_in(client, manager.email, next_path=target)
    assert response.status_code == 303 and response.headers["location"] == "/console"


async def test_sign_out_ends_the_session(client, manager):
    await sign_in(client, manager.email)
    secret = client.cookies["tenet_session"]
    out = await client.post("/console/sign-out", data={"csrf_token": await page_csrf(client)})
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    client.cookies.set("tenet_session", secret)  # a copy of the cookie kept elsewhere is dead too
    assert (await client.get("/console")).status_code == 303


async def test_the_session_dies_with_a_role_change_and_stays_dead(client, manager, db, clock):
    await sign_in(client, manager.email)
    assert (await client.get("/console")).status_code == 200
    for roles in ([Role.EMPLOYEE], [Role.MEETING_MANAGER]):
        async with db.unit_of_work() as session:
            await iam_service.set_user_roles(session, user_id=manager.id, roles=roles, now=clock.now(),
                                             actor=Actor.system())
        assert (await client.get("/console")).status_code == 303  # back to the old roles: still dead


async def test_setting_the_same_roles_keeps_the_session(client, manager, db, clock):
    await sign_in(client, manager.email)
    async with db.unit_of_work() as session:
        await iam_service.set_user_roles(session, user_id=manager.id, roles=[Role.MEETING_MANAGER], now=clock.now(),
                                         actor=Actor.system())
    assert (await client.get("/console")).status_code == 200


async def test_the_session_dies_with_a_disable_and_stays_dead_after_enable(client, users, manager, db, clock):
    await users.admin()  # not the last administrator question: the manager is not one
    await sign_in(client, manager.email)
    async with db.unit_of_work() as session:
        await iam_service.disable_user(session, user_id=manager.id, now=clock.now(), actor=Actor.system())
    assert (await client.get("/console")).status_code == 303
    async with db.unit_of_work() as session:
        await iam_service.enable_user(session, user_id=manager.id, now=clock.now(), actor=Actor.system())
    assert (await client.get("/console")).status_code == 303


async def test_the_session_dies_with_the_accounts_deletion(client, manager, db, clock):
    await sign_in(client, manager.email)
    async with db.unit_of_work() as session:
        await iam_service.delete_user(session, user_id=manager.id, now=clock.now(), actor=Actor.system())
    assert (await client.get("/console")).status_code == 303


async def test_the_session_expires(client, manager, clock):
    await sign_in(client, manager.email)
    clock.advance(timedelta(hours=12, seconds=1))
    response = await client.get("/console/meetings")
    assert response.status_code == 303 and response.headers["location"].endswith("next=/console/meetings")


# --- CSRF -------------------------------------------------------------------------------------------------

async def test_a_post_without_the_csrf_token_is_refused(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    for data in ({}, {"csrf_token": "0" * 64}):
        forged = await client.post(f"/console/meetings/{meeting['id']}/attendees",
                                   data={**data, "user_id": str(employee.id), "version": str(meeting["version"])})
        assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
        out = await client.post("/console/sign-out", data=data)
        assert out.status_code == 403
    assert await _required(client, manager, meeting["id"]) == []
    assert (await client.get("/console")).status_code == 200  # still signed in


async def test_sign_in_needs_the_forms_token(client, manager):
    await client.get("/console/sign-in")
    response = await client.post("/console/sign-in", data={"email": manager.email, "password": PASSWORD})
    assert response.status_code == 403 and "tenet_session" not in response.headers.get("set-cookie", "")


async def test_another_browsers_token_is_refused(app, client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.8", 50001))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other:
        await sign_in(other, employee.email)
        foreign = await page_csrf(other)
    await sign_in(client, manager.email)
    forged = await client.post(f"/console/meetings/{meeting['id']}/attendees", data={
        "csrf_token": foreign, "user_id": str(employee.id), "version": str(meeting["version"])})
    assert forged.status_code == 403


# --- the login limiter is the API's ---------------------------------------------------------------------------

@pytest.fixture
def limited_app(tmp_path, db, clock):
    return create_app(test_settings(data_dir=tmp_path, login_failure_limit="2/15min"), database=db, clock=clock,
                      run_background_tasks=False)


async def test_console_sign_ins_count_against_the_apis_login_limiter(limited_app, db, clock):
    users = UserFactory(limited_app, db, clock)
    person = await users.make()
    transport = httpx.ASGITransport(app=limited_app, client=("203.0.113.9", 50002))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        for _ in range(2):
            assert (await sign_in(client, person.email, "wrong password")).status_code == 401
        api = await client.post("/api/v1/auth/token", data={"grant_type": "password", "username": person.email,
                                                             "password": PASSWORD})
        assert api.status_code == 429
        page = await sign_in(client, person.email)
        assert page.status_code == 429 and "Too many attempts" in page.text and "retry-after" in page.headers


# --- languages --------------------------------------------------------------------------------------------

async def test_someone_signed_out_follows_accept_language(client):
    chinese = await client.get("/console/sign-in", headers={"Accept-Language": "fr;q=1, zh-CN;q=0.9, en;q=0.5"})
    assert '<html lang="zh-CN">' in chinese.text and "登录" in chinese.text
    english = await client.get("/console/sign-in", headers={"Accept-Language": "en-GB"})
    assert '<html lang="en">' in english.text and "Sign in" in english.text


async def test_a_person_who_never_chose_follows_accept_language_and_a_choice_is_kept(client, manager, db):
    await sign_in(client, manager.email)
    home = await client.get("/console", headers={"Accept-Language": "zh-CN"})
    assert "欢迎" in home.text
    switched = await client.post("/console/language", data={"csrf_token": csrf_of(home.text), "language": "zh-CN",
                                                             "next": "/console/meetings"})
    assert switched.status_code == 303 and switched.headers["location"] == "/console/meetings"
    page = await client.get("/console/meetings", headers={"Accept-Language": "en"})
    assert '<html lang="zh-CN">' in page.text and "会议" in page.text
    settings = await client.get("/api/v1/social/me/settings", headers=manager.headers)
    assert settings.json()["settings"]["preferences"]["language"] == "zh-CN"


async def test_the_error_pages_language_switcher_works(client, manager, clock):
    """A refusal that comes before the page knows its viewer (a query parameter out of bounds) is the error page
    in words, whose switcher carries the viewer's CSRF token: switching language from it works."""
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    refused = await client.get(f"/console/meetings/{meeting['id']}", params={"q": "x" * 101})
    assert refused.status_code == 422 and refused.headers["content-type"].startswith("text/html")
    assert 'data-code="VALIDATION_FAILED"' in refused.text
    token = csrf_of(refused.text)
    assert token == await page_csrf(client)
    switched = await client.post("/console/language", data={"csrf_token": token, "language": "zh-CN",
                                                             "next": "/console"})
    assert switched.status_code == 303
    settings = await client.get("/api/v1/social/me/settings", headers=manager.headers)
    assert settings.json()["settings"]["preferences"]["language"] == "zh-CN"


async def test_the_error_pages_switcher_works_before_sign_in(client):
    refused = await client.get("/console/meetings/x/people", params={"q": "x" * 101})
    assert refused.status_code == 422 and 'data-code="VALIDATION_FAILED"' in refused.text
    switched = await client.post("/console/language", data={"csrf_token": csrf_of(refused.text),
                                                             "language": "zh-CN", "next": "/console/sign-in"})
    assert switched.status_code == 303
    assert '<html lang="zh-CN">' in (await client.get("/console/sign-in")).text


async def test_a_malicious_next_of_the_language_switcher_stays_here(client):
    form = await client.get("/console/sign-in")
    response = await client.post("/console/language", data={"csrf_token": csrf_of(form.text), "language": "zh-CN",
                                                             "next": "//evil.example"})
    assert response.headers["location"] == "/console"
    again = await client.get("/console/sign-in")
    assert '<html lang="zh-CN">' in again.text


# --- pages offer what the permission table allows ------------------------------------------------------------

async def test_the_manager_adds_and_removes_an_attendee(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    page = await client.get(f"/console/meetings/{meeting['id']}", params={"q": "emil"})
    assert page.status_code == 200 and 'id="people-found"' in page.text and "Emil Employee" in page.text
    added = await client.post(f"/console/meetings/{meeting['id']}/attendees", data={
        "csrf_token": csrf_of(page.text), "user_id": str(employee.id), "version": str(meeting["version"])})
    assert added.status_code == 303, added.text
    assert await _required(client, manager, meeting["id"]) == [str(employee.id)]
    page = await client.get(f"/console/meetings/{meeting['id']}")
    version = re.search(r'name="version" value="(\d+)"', page.text).group(1)
    removed = await client.post(f"/console/meetings/{meeting['id']}/attendees/remove", data={
        "csrf_token": csrf_of(page.text), "user_id": str(employee.id), "version": version})
    assert removed.status_code == 303
    assert await _required(client, manager, meeting["id"]) == []


async def test_the_people_search_fragment(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    found = await client.get(f"/console/meetings/{meeting['id']}/people", params={"q": "emil"})
    assert found.status_code == 200 and found.text.startswith('<ul id="people-found"') and "Emil Employee" in found.text
    assert "<html" not in found.text
    client.cookies.clear()
    await sign_in(client, employee.email)
    refused = await client.get(f"/console/meetings/{meeting['id']}/people", params={"q": "mona"})
    assert refused.status_code == 404  # the employee is not on this meeting: it is not there for them


async def test_a_stale_form_says_someone_else_changed_the_meeting(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, f"/console/meetings/{meeting['id']}")
    changed = await client.patch(f"{BASE}/meetings/{meeting['id']}", headers=manager.headers,
                                 json={"location": "Room 5"})
    assert changed.status_code == 200
    stale = await client.post(f"/console/meetings/{meeting['id']}/attendees", data={
        "csrf_token": csrf, "user_id": str(employee.id), "version": str(meeting["version"])})
    assert stale.status_code == 412
    assert 'data-code="PRECONDITION_FAILED"' in stale.text and "Someone else changed this" in stale.text
    assert "Room 5" in stale.text  # the page shows the new state
    assert await _required(client, manager, meeting["id"]) == []


async def test_an_employee_is_offered_no_change_and_a_forged_one_is_refused(client, manager, employee, users, clock):
    other = await users.make(display_name="Olga Other")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(employee.id)])
    await sign_in(client, employee.email)
    page = await client.get(f"/console/meetings/{meeting['id']}", params={"q": "olga"})
    assert page.status_code == 200 and "Weekly sync" in page.text
    assert "/attendees" not in page.text and 'id="people-search"' not in page.text and 'id="board"' not in page.text
    forged = await client.post(f"/console/meetings/{meeting['id']}/attendees", data={
        "csrf_token": csrf_of(page.text), "user_id": str(other.id), "version": str(meeting["version"])})
    assert forged.status_code == 403 and 'data-code="PERMISSION_DENIED"' in forged.text
    assert await _required(client, manager, meeting["id"]) == [str(employee.id)]
    board = await client.get(f"/console/meetings/{meeting['id']}/board")
    assert board.status_code == 403


async def test_home_lists_my_meetings_and_the_managers_counts(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(employee.id)])
    await sign_in(client, employee.email)
    home = await client.get("/console")
    assert 'id="today"' in home.text and meeting["id"] in home.text and 'id="managed"' not in home.text
    client.cookies.clear()
    await sign_in(client, manager.email)
    home = await client.get("/console")
    assert 'id="managed"' in home.text and "0 of 1" in home.text


async def test_the_meetings_list_filters_and_pages_with_the_apis_cursor(client, manager, clock):
    for _ in range(3):
        await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    day = clock.now().date().isoformat()
    listed = await client.get("/console/meetings", params={"from": day, "to": day, "status": "SCHEDULED"})
    assert listed.status_code == 200 and listed.text.count('data-meeting="') == 3
    bad = await client.get("/console/meetings", params={"from": "yesterday"})
    assert bad.status_code == 422 and 'data-code="VALIDATION_FAILED"' in bad.text
    bad_cursor = await client.get("/console/meetings", params={"cursor": "nonsense"})
    assert bad_cursor.status_code == 400 and 'data-code="INVALID_CURSOR"' in bad_cursor.text


async def test_the_board_counts_a_guest(client, manager, clock):
    meeting = await _meeting(client, manager, clock)
    await sign_in(client, manager.email)
    before = await client.get(f"/console/meetings/{meeting['id']}/board")
    assert re.search(r'id="count-guests"><strong>0<', before.text)
    clock.set(datetime.fromisoformat(meeting["start_time"]).astimezone(UTC))
    code = meeting["qr_code_offline"]["check_in_url"].split("code=")[1]
    guest = await client.post(f"{BASE}/public/meetings/{meeting['id']}/check-in", json={
        "name": "Gwen Guest", "mode": "offline", "code": code, "device_id": uuid.uuid4().hex})
    assert guest.status_code == 201, guest.text
    after = await client.get(f"/console/meetings/{meeting['id']}/board")
    assert re.search(r'id="count-guests"><strong>1<', after.text) and "Gwen Guest" in after.text


async def test_people_search_route(client, manager, employee):
    response = await client.get(f"{BASE}/people", params={"q": "EMIL"}, headers=manager.headers)
    assert response.status_code == 200
    assert [p["display_name"] for p in response.json()] == ["Emil Employee"]
    assert (await client.get(f"{BASE}/people", params={"q": "%"}, headers=manager.headers)).json() == []
    assert (await client.get(f"{BASE}/people", params={"q": "emil"}, headers=employee.headers)).status_code == 403


# --- the permission table drives the pages and the API alike ------------------------------------------------

def _outcome(status: int) -> str:
    return "ok" if status < 400 else str(status)


@pytest.mark.parametrize("role", [Role.ADMINISTRATOR, Role.MEETING_MANAGER, Role.LEADER, Role.EMPLOYEE, None])
async def test_pages_offer_and_refuse_what_the_api_does(client, users, manager, clock, role):
    """`role` is a required attendee of the meeting (None: an employee who is not on it). Each action's page answer
    matches the API route's; an action is offered on the page exactly when the API would do it."""
    person = await users.make(roles=[role] if role else [Role.EMPLOYEE], display_name="Pat Person")
    newcomer = await users.make(display_name="Nia Newcomer")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[] if role is None else [str(person.id)])
    mid = meeting["id"]
    await sign_in(client, person.email)
    page = await client.get(f"/console/meetings/{mid}", params={"q": "Nia"})
    api = {
        "view": await client.get(f"{BASE}/meetings/{mid}", headers=person.headers),
        "board": await client.get(f"{BASE}/meetings/{mid}/attendances", headers=person.headers),
        "codes": await client.get(f"{BASE}/meetings/{mid}/qrcode", headers=person.headers),
    }
    console_answers = {
        "view": page,
        "board": await client.get(f"/console/meetings/{mid}/board"),
        "codes": await client.get(f"/console/meetings/{mid}/qrcode"),
    }
    for action, answer in api.items():
        assert _outcome(console_answers[action].status_code) == _outcome(answer.status_code), action
    if page.status_code == 200:
        assert ('id="board"' in page.text) == (api["board"].status_code == 200)
        assert ('id="qr-online"' in page.text) == (api["codes"].status_code == 200)
    csrf = await page_csrf(client)
    # meeting:update, the point of the API's PUT of the list (and of its people search)
    may_edit = (await client.get(f"{BASE}/people", params={"q": "Nia"}, headers=person.headers)).status_code == 200
    assert ('id="people-search"' in page.text) == (may_edit and page.status_code == 200)
    fragment = await client.get(f"/console/meetings/{mid}/people", params={"q": "Nia"})
    assert _outcome(fragment.status_code) == ("ok" if may_edit else "403" if page.status_code == 200 else "404")
    forged = await client.post(f"/console/meetings/{mid}/attendees", data={
        "csrf_token": csrf, "user_id": str(newcomer.id), "version": str(meeting["version"])})
    assert _outcome(forged.status_code) == ("ok" if may_edit else "403")
    expected = [str(person.id)] if role else []
    if may_edit:
        expected.append(str(newcomer.id))
    assert sorted(await _required(client, manager, mid)) == sorted(expected)


class _CountingReads:
    """The read path, counting its statements."""

    def __init__(self, inner) -> None:
        self.inner, self.count = inner, 0

    async def all(self, sql, params=None):
        self.count += 1
        return await self.inner.all(sql, params)

    async def one(self, sql, params=None):
        self.count += 1
        return await self.inner.one(sql, params)

    async def value(self, sql, params=None):
        self.count += 1
        return await self.inner.value(sql, params)


async def test_the_meeting_page_reads_as_many_statements_for_300_attendees_as_for_one(client, users, manager, db,
                                                                                      clock, monkeypatch):
    """One round of queries whatever the meeting's size: session, settings, meeting, attendees, board rows."""
    people = [await users.make(display_name=f"Person {i:03d}") for i in range(300)]
    small = await _meeting(client, manager, clock, required_attendee_ids=[str(people[0].id)])
    large = await _meeting(client, manager, clock, required_attendee_ids=[str(p.id) for p in people])
    await sign_in(client, manager.email)
    counting = _CountingReads(db.reads)
    monkeypatch.setattr(db, "reads", counting)
    counts = {}
    for name, meeting in (("small", small), ("large", large)):
        counting.count = 0
        page = await client.get(f"/console/meetings/{meeting['id']}")
        assert page.status_code == 200
        counts[name] = counting.count
    assert counts["small"] == counts["large"] == 5
    assert page.text.count('<tr data-user="') == 200 and "The first 200 are shown." in page.text
    assert re.search(r'id="count-absent"><strong>300<', page.text)


async def test_a_console_address_no_page_answers_is_a_page_in_words(client, manager):
    response = await client.get("/console/no-such-page", headers={"Accept": "text/html"})
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert "This page does not exist, or you may not see it." in response.text and 'id="language"' in response.text
    await sign_in(client, manager.email)
    signed_in = await client.get("/console/meetings/x/y/z")
    assert signed_in.status_code == 404 and 'href="/console/meetings"' in signed_in.text  # the navigation is there
    slash = await client.get("/console/")
    assert slash.status_code == 303 and slash.headers["location"] == "/console"
    api = await client.get("/api/v1/no-such-route")
    assert api.status_code == 404 and api.headers["content-type"] == "application/problem+json"
