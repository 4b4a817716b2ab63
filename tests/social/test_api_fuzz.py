"""Property-based fuzzing of the social routes from the service's own OpenAPI document, against the real server
process, as a user who owns real data (a friend, a group, items shared both ways, inbox messages, todos, an
automation): half of the generated cases have their path ids replaced by ids of those rows, so the fuzzer
reaches the commands' bodies rather than only their 404s. No 5xx, and every answer (status, content type,
body) is one the document describes."""

from __future__ import annotations

import hashlib
import random

import httpx
import pytest
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.support import widefuzz
from tests.support.fuzz import World, app_schema

pytestmark = pytest.mark.live_server

schema = app_schema(r"^/api/v1/social/")


def _json(response: httpx.Response) -> dict:
    assert response.status_code < 300, response.text
    return response.json()


@pytest.fixture(scope="module")
def owned(live_server, live_admin_token) -> dict[str, list[str]]:
    """Rows the fuzzing user owns or takes part in, by the path parameter names that address them."""
    base = f"{live_server.url}/api/v1"
    me = {"Authorization": f"Bearer {live_admin_token}"}
    email = f"fuzz-friend-{random.randrange(10**9)}@example.com"
    friend = _json(httpx.post(f"{base}/auth/register", json={"email": email, "password": "fuzz password 123",
                                                              "display_name": "Fuzz Friend"}))
    token = _json(httpx.post(f"{base}/auth/token", data={"grant_type": "password", "username": email,
                                                         "password": "fuzz password 123"}))["access_token"]
    them = {"Authorization": f"Bearer {token}"}
    social = f"{base}/social"
    friendship = _json(httpx.post(f"{social}/friendships", json={"user_id": friend["id"]}, headers=me))
    request = _json(httpx.get(f"{social}/inbox", params={"status": "pending"}, headers=them))["items"][0]
    _json(httpx.post(f"{social}/inbox/{request['id']}/accept", headers=them))
    group = _json(httpx.post(f"{social}/groups", json={"name": "Fuzz group"}, headers=me))
    invitation = _json(httpx.post(f"{social}/groups/{group['id']}/invitations", json={"user_id": friend["id"]},
                                  headers=me))
    item = _json(httpx.post(f"{social}/schedule-items", json={
        "title": "Fuzz weekly", "start_at": "2026-03-02T17:00:00Z", "end_at": "2026-03-02T18:00:00Z",
        "timezone": "America/Los_Angeles", "recurrence_rule": "FREQ=WEEKLY;BYDAY=MO"}, headers=me))
    theirs = _json(httpx.post(f"{social}/schedule-items", json={
        "title": "Theirs", "start_at": "2026-03-03T17:00:00Z", "end_at": "2026-03-03T18:00:00Z",
        "timezone": "UTC"}, headers=them))
    subscription = _json(httpx.post(f"{social}/schedule-items/{item['id']}/subscriptions", json={
        "subject_type": "user", "subject_id": friend["id"], "permission": ["view", "edit"]}, headers=me))
    _json(httpx.post(f"{social}/schedule-items/{theirs['id']}/subscriptions", json={
        "subject_type": "user", "subject_id": _me(social, me)}, headers=them))
    offer = _json(httpx.get(f"{social}/inbox", params={"status": "pending"}, headers=me))["items"][0]
    todo = _json(httpx.post(f"{social}/todos", json={"title": "Fuzz todo", "source_ids": [item["id"]]}, headers=me))
    job = _json(httpx.post(f"{social}/automations", json={"name": "Fuzz digest", "job_type": "todo_digest",
                                                          "schedule_type": "daily", "schedule_time": "09:00"},
                           headers=me))
    return {"friendship_id": [friendship["id"]], "group_id": [group["id"]], "item_id": [item["id"], theirs["id"]],
            "subscription_id": [subscription["id"]], "message_id": [offer["id"]], "todo_id": [todo["id"]],
            "job_id": [job["id"]], "user_id": [friend["id"]], "invitation_id": [invitation["id"]]}


def _me(social: str, headers: dict[str, str]) -> str:
    return _json(httpx.get(f"{social}/me/profile", headers=headers))["id"]


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_social_routes_never_answer_5xx(case, live_server, live_admin_token, owned):
    digest = hashlib.sha256(repr(sorted((case.path_parameters or {}).items())).encode()).digest()
    if case.path_parameters and digest[0] % 2 == 0:
        for name in case.path_parameters:
            if name in owned:
                case.path_parameters[name] = owned[name][digest[1] % len(owned[name])]
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {live_admin_token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


@pytest.mark.parametrize("operation", widefuzz.operations("social"), ids=lambda operation: operation.label)
def test_social_routes_with_widened_values_never_answer_5xx(operation, live_server, live_admin_token, owned):
    """Issue 24: huge exponents, long digit strings, lone surrogates (settings and agent config keys too) and
    forged cursors, on the rows the user owns."""
    world = World(headers={"Authorization": f"Bearer {live_admin_token}"}, path=owned)
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
