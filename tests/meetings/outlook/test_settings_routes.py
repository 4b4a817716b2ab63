"""GET|PUT /outlook/settings (spec layer 6): the business policy with If-Match, 422 OUTLOOK_POLICY_INVALID for values
out of range (MA-INV-39), never a secret, whether credentials are set; 409 OUTLOOK_SYNC_OFF elsewhere when unset."""

from __future__ import annotations

import httpx
import pytest

from tenet.app import create_app
from tenet.iam.permissions import Role
from tests.conftest import test_settings
from tests.meetings.conftest import MeetingApi
from tests.meetings.outlook.conftest import CLIENT_STATE
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

DEFAULTS = {"subscription_lifetime_minutes": 4200, "renewal_margin_minutes": 720, "window_days_back": 30,
            "window_days_ahead": 365, "reconcile_cron": "17 * * * *", "batch_size": 100,
            "max_concurrent_requests": 4, "retry_max_attempts": 5, "retry_base_seconds": 2}


async def test_the_policy_has_its_defaults_and_says_credentials_are_set(ma, manager, graph):
    response = await ma.call("GET", "/outlook/settings", manager)
    assert response.status_code == 200, response.text
    body = response.json()
    assert {k: body[k] for k in DEFAULTS} == DEFAULTS
    assert body["credentials_configured"] is True and body["client_state_configured"] is True
    assert body["graph_base_url"] == graph.base_url and response.headers["ETag"] == f'"{body["version"]}"'
    # No secret in the answer, in any form.
    assert graph.client_secret not in response.text and CLIENT_STATE not in response.text


@pytest.mark.invariant("MA-INV-40")
async def test_put_replaces_the_policy_under_if_match_and_is_audited(ma, manager, db):
    first = await ma.call("GET", "/outlook/settings", manager)
    changed = {**DEFAULTS, "batch_size": 250, "window_days_ahead": 90, "reconcile_cron": "*/30 * * * *"}
    response = await ma.call("PUT", "/outlook/settings", manager, json=changed,
                             headers={"If-Match": first.headers["ETag"]})
    assert response.status_code == 200, response.text
    assert response.json()["batch_size"] == 250 and response.json()["version"] == first.json()["version"] + 1
    assert (await ma.call("GET", "/outlook/settings", manager)).json()["window_days_ahead"] == 90
    stale = await ma.call("PUT", "/outlook/settings", manager, json=DEFAULTS,
                          headers={"If-Match": first.headers["ETag"]})
    assert stale.status_code == 412 and code(stale) == "PRECONDITION_FAILED"
    audit = await ma.call("GET", "/audit-logs", manager, params={"resource": "OUTLOOK_POLICY"})
    assert audit.status_code == 200, audit.text
    assert [row["action"] for row in audit.json()["items"]] == ["OUTLOOK_POLICY_UPDATED"]
    await rules_hold(db, "MA-")


@pytest.mark.invariant("MA-INV-39")
@pytest.mark.parametrize("change", [
    {"subscription_lifetime_minutes": 4230}, {"subscription_lifetime_minutes": 44, "renewal_margin_minutes": 10},
    {"renewal_margin_minutes": 4200}, {"window_days_back": -1}, {"window_days_ahead": 731},
    {"batch_size": 1001}, {"max_concurrent_requests": 5}, {"retry_max_attempts": 0},
    {"reconcile_cron": "every hour"}, {"reconcile_cron": "* * * * * *"},
    # Well-formed, but never fires (or not every year): reconciliation would silently never run.
    {"reconcile_cron": "0 0 31 2 *"}, {"reconcile_cron": "0 0 30 2 *"}, {"reconcile_cron": "0 0 31 4,6,9,11 *"},
    {"reconcile_cron": "0 0 29 2 *"},
])
async def test_values_out_of_range_answer_outlook_policy_invalid(ma, manager, change):
    response = await ma.call("PUT", "/outlook/settings", manager, json={**DEFAULTS, **change})
    assert response.status_code == 422 and code(response) == "OUTLOOK_POLICY_INVALID", response.text
    assert [e["loc"][-1] for e in response.json()["errors"]] == list(change)[:1]
    assert (await ma.call("GET", "/outlook/settings", manager)).json()["version"] == 1


@pytest.mark.parametrize("cron", ["0 0 31 * *", "0 3 1 1 *", "0 0 29 2 1", "59 23 31 12 *", "*/5 * * * *"])
async def test_a_cron_that_fires_every_year_is_accepted(ma, manager, cron):
    response = await ma.call("PUT", "/outlook/settings", manager, json={**DEFAULTS, "reconcile_cron": cron})
    assert response.status_code == 200 and response.json()["reconcile_cron"] == cron, response.text


async def test_only_outlook_managers_see_the_policy(ma, users):
    employee = await users.make(roles=[Role.EMPLOYEE])
    assert (await ma.call("GET", "/outlook/settings", employee)).status_code == 403
    assert (await ma.call("PUT", "/outlook/settings", employee, json=DEFAULTS)).status_code == 403
    assert (await ma.call("GET", "/outlook/settings", None)).status_code == 401


OFF_ROUTES: list[tuple[str, str, dict | None]] = [
    ("GET", "/outlook/mailboxes", None), ("GET", "/outlook/sync-status", None),
    ("POST", "/outlook/mailboxes", {"address": "room@contoso.com"}),
    ("GET", "/outlook/mailboxes/00000000-0000-0000-0000-000000000000", None),
    ("POST", "/outlook/mailboxes/00000000-0000-0000-0000-000000000000/resync", None),
    ("POST", "/outlook/mailboxes/00000000-0000-0000-0000-000000000000/disable", None),
    ("GET", "/outlook/cleanup", None),
    ("POST", "/outlook/cleanup/series/00000000-0000-0000-0000-000000000000/truncate", None),
]


async def test_unset_credentials_turn_the_sync_off(db, clock, tmp_path, users):
    app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
        off = MeetingApi(client, app, clock)
        manager = await users.make(roles=[Role.MEETING_MANAGER])
        settings = await off.call("GET", "/outlook/settings", manager)
        assert settings.status_code == 200 and settings.json()["credentials_configured"] is False
        for method, path, body in OFF_ROUTES:
            response = await off.call(method, path, manager, json=body)
            assert response.status_code == 409 and code(response) == "OUTLOOK_SYNC_OFF", (path, response.text)
