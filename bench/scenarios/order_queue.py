"""order_queue: `GET /api/v1/reservations/orders/{id}`, an order with 20 tasks in mixed states, as an agent.

What Tenet does for it (api.py get_order, queries.py ORDER_SQL, views.py): verify the JWT, load the agent's
principal on the read path, then one statement: the order (visible to the caller: the hotel assignment
joined in), its task counts and first open queue task, and its tasks in queue order with each one's parent
status; `blocked` and the `can_*` flags are computed from those rows and the caller's permission points;
the answer is pre-serialised. The baseline runs the same two statements and builds the same answer with
the same code (queries.order on its cursor).

The order: BK0500 of the 1,000, with 20 updates: 4 executed (COMPLETED), 1 READY, 15 waiting (blocked).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._reservations import BASE, CursorReads, Setup, batch_body, jsonable, prepare, update_item
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.iam.principal import Principal
from tenet.reservations import errors, queries
from tenet.reservations.permissions import Viewer

DESCRIPTION = "GET /api/v1/reservations/orders/{id}: one order with 20 tasks in mixed states, by an assigned agent"
TASKS = 20


@dataclass(frozen=True)
class Context:
    setup: Setup
    order_id: int
    task_ids: tuple[str, ...]


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    made = await prepare(client, database_url)
    body = batch_body([update_item(i + 1, "BK0500") for i in range(TASKS - 1)], request_id="queue", message=7)
    ingested = await client.post(f"{BASE}/ai-batches", content=body, headers={
        "Authorization": f"Bearer {made.client_token}", "Content-Type": "application/json"})
    order_id = int(ingested.json()["items"][0]["order_id"])
    agent = {"Authorization": f"Bearer {made.agent_token}"}
    order = (await client.get(f"{BASE}/orders/{order_id}", headers=agent)).json()
    for position, task in enumerate(order["tasks"][:5]):
        detail = (await client.get(f"{BASE}/tasks/{task['id']}", headers=agent)).json()
        payload = {**detail["card"]["prefill"], "confirmation_number": "BK0500"}
        confirmed = await client.post(f"{BASE}/tasks/{task['id']}/confirm", json={"payload": payload},
                                      headers={**agent, "If-Match": f'"{detail["version"]}"'})
        if confirmed.status_code != 200:
            raise SystemExit(f"confirming a task answered {confirmed.status_code}: {confirmed.text[:300]}")
        if position < 4:
            await client.post(f"{BASE}/tasks/{task['id']}/execute", headers=agent)
    order = (await client.get(f"{BASE}/orders/{order_id}", headers=agent)).json()
    if [t["task_status"] for t in order["tasks"]].count("COMPLETED") != 4 or len(order["tasks"]) != TASKS:
        raise SystemExit(f"the order is not in the intended shape: {[t['task_status'] for t in order['tasks']]}")
    return Context(setup=made, order_id=order_id, task_ids=tuple(t["id"] for t in order["tasks"]))


def wrk_request(context: Context) -> Request:
    return Request(path=f"{BASE}/orders/{context.order_id}",
                   headers={"Authorization": f"Bearer {context.setup.agent_token}"})


def baseline_config(context: Context) -> dict[str, object]:
    return {"principal": principal_params(context.setup.agent_id, context.setup.agent_token)}


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    await cursor.execute(PRINCIPAL_SQL, config["principal"])
    row = await cursor.fetchone()
    assert row is not None, "the bench's principal is not in the database"
    viewer = Viewer(Principal(kind="user", id=uuid.UUID(str(row["id"])), roles=frozenset(row["roles"]),
                              permissions=frozenset(row["permissions"])))
    order_id = int(request.path.rsplit("/", 1)[1])
    try:
        detail = await queries.order(CursorReads(cursor), order_id=order_id, viewer=viewer)
    except errors.OrderNotFound:
        return BaselineAnswer(404, {"code": "ORDER_NOT_FOUND"})
    return BaselineAnswer(200, jsonable(detail))


def check(client: httpx.Client, service: str, context: Context) -> None:
    answer = client.get(wrk_request(context).path, headers=wrk_request(context).headers).json()
    if [str(t["id"]) for t in answer.get("tasks", [])] != list(context.task_ids):
        raise SystemExit(f"{service}: the order's tasks are not the {TASKS} tasks in queue order")
    flags = [(t["blocked"], t["can_execute"]) for t in answer["tasks"]]
    if flags[4] != (False, True) or flags[5] != (True, False):
        raise SystemExit(f"{service}: blocked / can_execute are not computed as Tenet does: {flags[:6]}")


def describe(context: Context) -> dict[str, object]:
    return {"orders": 1000, "tasks_in_order": TASKS, "order_id": context.order_id}
