"""Property-based fuzzing of the reservation routes from the service's own OpenAPI document, against the real
server process, as callers who own real data: an administrator (who sees every hotel) over a hotel with
ingested batches, orders and tasks in several states, and the hotel's ingest client on the ingest route.
No 5xx, and every answer (status, content type, body) is one the document describes."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.reservations.conftest import body, confirmable, item
from tests.support import widefuzz
from tests.support.fuzz import World, app_schema

pytestmark = pytest.mark.live_server

everything = app_schema(r"^/api/v1/reservations/")
agent_routes = everything.exclude(path_regex=r"/ai-batches$")
ingest_route = everything.include(path_regex=r"/ai-batches$")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def pools() -> dict[str, list[str]]:
    """The ids of the rows the fixtures below make, by the path parameter names that address them."""
    return {"hotel_id": ["FZ"], "task_card_type": ["NEW_BOOKING", "VOUCHER_RECEIVED", "ROOMING_LIST"]}


@pytest.fixture(scope="module")
def ingest_token(live_server, live_admin_token, pools) -> str:
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
        _record(pools, answer.json())
        first = answer.json()["items"][0]
        task = httpx.get(f"{base}/tasks/{first['task_id']}", headers=admin).json()
        outcome = ["SUCCEED", "FAIL_WRITE_ALWAYS", "SUCCEED"][n]
        httpx.post(f"{base}/tasks/{task['id']}/confirm", headers={**admin, "If-Match": f'"{task["version"]}"'},
                   json={"payload": confirmable(task, opera_simulation_outcome=outcome)}).raise_for_status()
        if n < 2:
            executed = httpx.post(f"{base}/tasks/{task['id']}/execute", headers=admin)
            executed.raise_for_status()
            pools.setdefault("operation_id", []).extend(o["id"] for o in executed.json()["operations"])
    # Items whose numbers cost a conversion dearly, so the task, order and card routes meet them (issue 24).
    nasty = [("NEW_BOOKING", '"adults":1e999999999999999999,"number_of_rooms":1e400000'),
             ("VOUCHER_RECEIVED", '"voucher_amount":1e80000000,"currency":"EUR"'),
             ("TA_RECORDER", '"commission_percent":-1e400000'),
             ("ROOMING_LIST", '"rooming_list":' + "[" * 400 + "]" * 400)]
    items = [item(card, fields={}, cn=f"FZN{n}").replace('"extracted_fields":{}', f'"extracted_fields":{{{fields}}}')
             for n, (card, fields) in enumerate(nasty)]
    answer = httpx.post(f"{base}/ai-batches", content=body("FZ", items), headers=client)
    answer.raise_for_status()
    _record(pools, answer.json())
    # Half the tasks a widened call names hold such numbers.
    pools["task_id"] += [result["task_id"] for result in answer.json()["items"]] * 3
    return token


def _record(pools: dict[str, list[str]], answer: dict) -> None:
    pools.setdefault("batch_id", []).append(answer["batch_id"])
    for result in answer["items"]:
        pools.setdefault("task_id", []).append(result["task_id"])
        pools.setdefault("order_id", []).append(result["order_id"])


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


@pytest.mark.parametrize("operation", widefuzz.operations("reservations"), ids=lambda operation: operation.label)
def test_reservation_routes_with_widened_values_never_answer_5xx(operation, live_server, live_admin_token,
                                                                  ingest_token, pools):
    """Issue 24: huge exponents, long digit strings and lone surrogates, on real tasks (some of whose AI items
    hold such numbers), orders, batches and operations; the ingest route as the ingest client."""
    token = ingest_token if operation.path.endswith("/ai-batches") else live_admin_token
    world = World(headers={"Authorization": f"Bearer {token}"}, path=pools, body={"hotel_id": ["FZ"]})
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
