"""Property-based fuzzing of the reservation routes from the service's own OpenAPI document, against the real
server process, as callers who own real data: an administrator (who sees every hotel) over a hotel with
ingested batches, orders and tasks in several states, and the hotel's ingest client on the ingest route.
No 5xx, and every answer (status, content type, body) is one the document describes."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tenet.app import create_app
from tests.conftest import test_settings
from tests.reservations.conftest import body, confirmable, item

pytestmark = pytest.mark.live_server

_document = create_app(test_settings()).openapi()
everything = schemathesis.openapi.from_dict(_document).include(path_regex=r"^/api/v1/reservations/")
agent_routes = everything.exclude(path_regex=r"/ai-batches$")
ingest_route = everything.include(path_regex=r"/ai-batches$")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def ingest_token(live_server, live_admin_token) -> str:
    """An ingest client of hotel FZ, and real data made through it and the administrator: orders with waiting,
    ready, completed and failing tasks."""
    admin = {"Authorization": f"Bearer {live_admin_token}"}
    made = httpx.post(f"{live_server.url}/api/v1/iam/api-clients", headers=admin, json={
        "name": "fuzz ingest", "scopes": ["reservations:ingest", "reservations:read"], "hotel_ids": ["FZ"]})
    made.raise_for_status()
    token = httpx.post(f"{live_server.url}/api/v1/auth/token", data={
        "grant_type": "client_credentials", "client_id": made.json()["client_id"],
        "client_secret": made.json()["client_secret"]}).json()["access_token"]
    client = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    base = f"{live_server.url}/api/v1/reservations"
    for n in range(3):
        raw = body("FZ", [item(cn=f"FZ{n}"), item("new"), item("note", cn=f"FZ{n}"), item("review"), '"junk"'])
        answer = httpx.post(f"{base}/ai-batches", content=raw, headers=client)
        answer.raise_for_status()
        first = answer.json()["items"][0]
        task = httpx.get(f"{base}/tasks/{first['task_id']}", headers=admin).json()
        outcome = ["SUCCEED", "FAIL_WRITE_ALWAYS", "SUCCEED"][n]
        httpx.post(f"{base}/tasks/{task['id']}/confirm", headers={**admin, "If-Match": f'"{task["version"]}"'},
                   json={"payload": confirmable(task, opera_simulation_outcome=outcome)}).raise_for_status()
        if n < 2:
            httpx.post(f"{base}/tasks/{task['id']}/execute", headers=admin).raise_for_status()
    return token


@agent_routes.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_reservation_routes_never_answer_5xx(case, live_server, live_admin_token, ingest_token):
    case.call_and_validate(base_url=live_server.url, headers={"Authorization": f"Bearer {live_admin_token}"},
                           checks=CHECKS)


@ingest_route.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_the_ingest_route_never_answers_5xx(case, live_server, ingest_token):
    case.call_and_validate(base_url=live_server.url, headers={"Authorization": f"Bearer {ingest_token}"},
                           checks=CHECKS)
