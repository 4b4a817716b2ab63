"""task_detail: `GET /api/v1/reservations/tasks/{id}`, a READY task with its card, order and operations summary.

What Tenet does for it (api.py get_task, queries.py TASK_SQL, views.py task_read): verify the JWT, load the
agent's principal on the read path, then one statement: the task (visible to the caller), its order, card,
transition, parent status, its order's first open queue task and its operations' counts; the card's prefill
is computed from the AI item's exact text against the card's definition, then `blocked` and the flags; the
answer is pre-serialised with `ETag`. The baseline runs the same two statements and builds the answer with
the same code (queries.task on its cursor).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios import order_queue
from bench.scenarios._reservations import CursorReads, jsonable
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.iam.principal import Principal
from tenet.reservations import errors, queries
from tenet.reservations.permissions import Viewer

DESCRIPTION = "GET /api/v1/reservations/tasks/{id}: a READY task with card, order, prefill and flags, by an agent"


@dataclass(frozen=True)
class Context:
    queue: order_queue.Context
    task_id: str


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    queue = await order_queue.setup(client, database_url)
    return Context(queue=queue, task_id=queue.task_ids[4])  # the READY one


def wrk_request(context: Context) -> Request:
    return Request(path=f"/api/v1/reservations/tasks/{context.task_id}",
                   headers={"Authorization": f"Bearer {context.queue.setup.agent_token}"})


def baseline_config(context: Context) -> dict[str, object]:
    return {"principal": principal_params(context.queue.setup.agent_id, context.queue.setup.agent_token)}


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    await cursor.execute(PRINCIPAL_SQL, config["principal"])
    row = await cursor.fetchone()
    assert row is not None, "the bench's principal is not in the database"
    viewer = Viewer(Principal(kind="user", id=uuid.UUID(str(row["id"])), roles=frozenset(row["roles"]),
                              permissions=frozenset(row["permissions"])))
    try:
        task = await queries.task(CursorReads(cursor), task_id=int(request.path.rsplit("/", 1)[1]), viewer=viewer)
    except errors.TaskNotFound:
        return BaselineAnswer(404, {"code": "TASK_NOT_FOUND"})
    return BaselineAnswer(200, jsonable(task))


def check(client: httpx.Client, service: str, context: Context) -> None:
    answer = client.get(wrk_request(context).path, headers=wrk_request(context).headers).json()
    if (answer.get("task_status"), answer.get("can_execute")) != ("READY", True) or not answer["card"]["prefill"]:
        raise SystemExit(f"{service}: the task is not the READY one with its prefill: {str(answer)[:300]}")


def describe(context: Context) -> dict[str, object]:
    return {"orders": 1000, "task_id": context.task_id}
