"""The Outlook sync's settings page (`/console/outlook/settings`, issues 17 and 18) over HTTP: it shows the policy
`GET /outlook/settings` answers, each field with its unit and range, and whether the credentials and the client state
are set (never a secret); saving runs the API's command, so the API then answers the new values; the role table is
the API's (Administrator and MeetingManager; Leader and Employee refused on the page and on the route alike); a form
without its CSRF token changes nothing; a value out of range comes back next to its field, in words, in both
languages; a stale form (412) says someone else changed the policy and shows it as it is now."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tenet.app import create_app
from tenet.iam.permissions import Role
from tests.conftest import test_settings
from tests.web.test_console_http import BASE, csrf_of, sign_in

SECRET = "graph-client-secret-do-not-show-0123"
CLIENT_STATE = "client-state-do-not-show-4567"
PAGE = "/console/outlook/settings"


@pytest.fixture
def settings(tmp_path: Path):
    """Credentials that look set (no Graph call is made by these pages)."""
    return test_settings(data_dir=tmp_path, graph_tenant_id="tenant-1", graph_client_id="client-1",
                         graph_client_secret=SECRET, graph_notification_client_state=CLIENT_STATE)


def _values(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input id="f-(\w+)" name="\w+" [^>]*value="([^"]*)"', html))


def _form(html: str, **changes: str) -> dict[str, str]:
    return {"csrf_token": csrf_of(html), "version": re.search(r'name="version" value="(\d+)"', html).group(1),
            **_values(html), **changes}


async def _api_policy(client: httpx.AsyncClient, person) -> dict:
    response = await client.get(f"{BASE}/outlook/settings", headers=person.headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_page_shows_the_policy_with_units_and_ranges_and_never_a_secret(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    await sign_in(client, manager.email)
    overview = await client.get("/console/outlook")
    assert f'href="{PAGE}"' in overview.text  # linked from the Outlook pages' navigation
    page = await client.get(PAGE)
    assert page.status_code == 200, page.text
    policy = await _api_policy(client, manager)
    values = _values(page.text)
    assert values == {name: str(policy[name]) for name in values} and len(values) == 9
    assert "Subscription lifetime (minutes, 45 to 4,229)" in page.text
    assert "Batch size (events per Graph page, 10 to 1,000)" in page.text
    assert "Concurrent Graph requests per mailbox (requests, 1 to 4)" in page.text
    assert "five cron fields" in page.text and "in UTC" in page.text
    assert 'id="f-batch_size" name="batch_size" type="number" inputmode="numeric" step="1" min="10" max="1000"' \
        in page.text
    assert 'id="credentials" data-configured="yes"' in page.text
    assert 'id="client-state" data-configured="yes"' in page.text
    assert SECRET not in page.text and CLIENT_STATE not in page.text
    assert "Never changed: these are the defaults." in page.text


async def test_saving_runs_the_apis_command(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")
    await sign_in(client, manager.email)
    page = await client.get(PAGE)
    saved = await client.post(PAGE, data=_form(page.text, batch_size="250", reconcile_cron=" */30  * * * * "))
    assert saved.status_code == 303 and saved.headers["location"] == f"{PAGE}?saved=1"
    policy = await _api_policy(client, manager)
    assert policy["batch_size"] == 250 and policy["reconcile_cron"] == "*/30 * * * *" and policy["version"] == 2
    after = await client.get(saved.headers["location"])
    assert 'id="saved"' in after.text and _values(after.text)["batch_size"] == "250"
    assert "by Mona Manager." in after.text
    audit = await client.get(f"{BASE}/audit-logs", headers=manager.headers, params={"resource": "OUTLOOK_POLICY"})
    assert [row["action"] for row in audit.json()["items"]] == ["OUTLOOK_POLICY_UPDATED"]


@pytest.mark.parametrize(("role", "allowed"), [(Role.ADMINISTRATOR, True), (Role.MEETING_MANAGER, True),
                                               (Role.LEADER, False), (Role.EMPLOYEE, False)])
async def test_the_role_table_is_the_apis(client, users, role, allowed):
    person = await users.make(roles=[role])
    await sign_in(client, person.email)
    api_get = await client.get(f"{BASE}/outlook/settings", headers=person.headers)
    page = await client.get(PAGE)
    assert (api_get.status_code == 200) is allowed and (page.status_code == 200) is allowed
    home = await client.get("/console")
    assert ('href="/console/outlook"' in home.text) is allowed
    if not allowed:
        assert page.status_code == 403 and 'data-code="PERMISSION_DENIED"' in page.text
        forged = await client.post(PAGE, data={"csrf_token": csrf_of(home.text), "version": "1", "batch_size": "250"})
        assert forged.status_code == 403
        api_put = await client.put(f"{BASE}/outlook/settings", headers=person.headers, json={})
        assert api_put.status_code == 403
    admin = await users.admin()
    assert (await _api_policy(client, admin))["version"] == 1  # nothing was changed by a refused person


async def test_a_form_without_its_csrf_token_changes_nothing(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    await sign_in(client, manager.email)
    page = await client.get(PAGE)
    form = _form(page.text, batch_size="250")
    for token in (None, "0" * 64):
        forged = await client.post(PAGE, data={**form, "csrf_token": token} if token else
                                   {k: v for k, v in form.items() if k != "csrf_token"})
        assert forged.status_code == 403 and 'data-code="CSRF_REFUSED"' in forged.text
    assert (await _api_policy(client, manager))["batch_size"] == 100


@pytest.mark.parametrize(("change", "field", "said"), [
    ({"batch_size": "5000"}, "batch_size", "Give a whole number from 10 to 1,000."),
    ({"batch_size": "many"}, "batch_size", "Give a whole number from 10 to 1,000."),
    ({"max_concurrent_requests": "0"}, "max_concurrent_requests", "Give a whole number from 1 to 4."),
    ({"window_days_back": "-1"}, "window_days_back", "Give a whole number from 0 to 365."),
    ({"renewal_margin_minutes": "4200"}, "renewal_margin_minutes", "make this shorter than the lifetime"),
    ({"reconcile_cron": "every hour"}, "reconcile_cron", "Give five cron fields separated by spaces"),
])
async def test_a_refusal_lands_next_to_its_field_in_words(client, users, change, field, said):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    await sign_in(client, manager.email)
    page = await client.get(PAGE)
    refused = await client.post(PAGE, data=_form(page.text, **change))
    assert refused.status_code == 422, refused.text
    assert re.findall(r'aria-describedby="e-(\w+)"', refused.text) == [field]
    error = re.search(rf'<input id="f-{field}"[^>]*>\s*<p id="e-{field}" class="error field-error" '
                      rf'data-field="{field}">([^<]*)</p>', refused.text)
    assert error and said in error.group(1), refused.text
    assert _values(refused.text)[field] == next(iter(change.values()))  # what was typed stays
    assert "OUTLOOK_POLICY_INVALID" not in error.group(1)
    assert (await _api_policy(client, manager))["version"] == 1


async def test_the_refusal_is_said_in_chinese(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    zh = {"Accept-Language": "zh-CN,zh;q=0.9"}
    await sign_in(client, manager.email, headers=zh)
    page = await client.get(PAGE, headers=zh)
    label = re.search(r'<label for="f-batch_size">([^<]*)</label>', page.text).group(1)
    assert "Outlook 同步设置" in page.text and label.startswith("批大小") and "10 至 1,000" in label
    refused = await client.post(PAGE, headers=zh, data=_form(page.text, batch_size="5000"))
    assert refused.status_code == 422
    error = '<p id="e-batch_size" class="error field-error" data-field="batch_size">请填写 10 至 1,000 之间的整数。</p>'
    assert error in refused.text


async def test_a_stale_form_says_someone_else_changed_it_and_shows_the_new_values(client, users):
    manager = await users.make(roles=[Role.MEETING_MANAGER])
    await sign_in(client, manager.email)
    page = await client.get(PAGE)
    policy = await _api_policy(client, manager)
    other = {k: policy[k] for k in _values(page.text)} | {"window_days_ahead": 90}
    moved = await client.put(f"{BASE}/outlook/settings", headers=manager.headers, json=other)
    assert moved.status_code == 200, moved.text
    stale = await client.post(PAGE, data=_form(page.text, batch_size="250"))
    assert stale.status_code == 412
    assert 'id="form-notice"' in stale.text and "Someone else changed this in the meantime." in stale.text
    assert _values(stale.text)["window_days_ahead"] == "90" and _values(stale.text)["batch_size"] == "100"
    assert 'name="version" value="2"' in stale.text
    again = await client.post(PAGE, data=_form(stale.text, batch_size="250"))
    assert again.status_code == 303
    assert (await _api_policy(client, manager))["batch_size"] == 250


async def test_with_the_credentials_unset_the_page_says_so_and_still_saves(db, clock, tmp_path, users):
    app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
        manager = await users.make(roles=[Role.MEETING_MANAGER])
        await sign_in(client, manager.email)
        page = await client.get(PAGE)
        assert page.status_code == 200
        assert 'id="credentials" data-configured="no"' in page.text and 'id="sync-off"' in page.text
        assert 'id="client-state" data-configured="no"' in page.text
        saved = await client.post(PAGE, data=_form(page.text, retry_max_attempts="7"))
        assert saved.status_code == 303
        assert (await _api_policy(client, manager))["retry_max_attempts"] == 7
