"""ai_ingest: `POST /api/v1/reservations/ai-batches`, a new batch of 20 AI items each time, into 1,000 orders.

What Tenet does for it (src/tenet/reservations/api.py ingest_batch, ingest.py): verify the JWT, load the API
client (`CLIENT_PRINCIPAL_SQL`) on the read path, parse the body with spans and map every item (no I/O),
look the batch key up on the read path (`BATCH_BY_KEY_SQL`: not a replay), then one unit of work: claim the
batch key (INSERT .. ON CONFLICT, with the hotel), match the items' keys to ACTIVE orders, allocate ids,
lock the matched orders in id order and allocate their queue positions, insert the temporary orders, then
the transitions, tasks, cards and audit rows (one statement each, the rows as one JSON parameter) and the
stored first answer; COMMIT. The baseline runs the very same statements (Tenet's `ingest.ingest` on a
psycopg cursor) after the same principal and replay look-ups, and answers the same JSON.

Each batch: 14 updates of orders drawn at random from the 1,000 (`BK0000`..`BK0999`), 2 new bookings, 2
notifications, 1 manual review and 1 child of the first new booking, with a unique request id (the wrk run
label, the thread and a counter), so every request writes a new batch. Run it with `--concurrency 16` (the
issue's 16 concurrent clients); items per second = requests per second x 20.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._reservations import (
    BASE,
    HOTEL,
    ORDERS,
    CursorStatements,
    Setup,
    batch_body,
    jsonable,
    prepare,
    update_item,
)
from tenet.iam.principal import Principal
from tenet.iam.queries import CLIENT_PRINCIPAL_SQL
from tenet.reservations import ingest, queries

DESCRIPTION = "POST /api/v1/reservations/ai-batches, a new batch of 20 items each time, into 1,000 ACTIVE orders"
ITEMS = 20
SERVICE_ENV = {"TENET_RESERVATION_INGEST_MAX_ITEMS": "500"}

_NEW = ('{{"result_type":"normal_task","ai_task_type":"NEW_BOOKING","current_or_history":"current",'
        '"source_event_index":{event},"extracted_fields":{{"guest_name":"Bench Guest","adults":2}}}}')
_NOTE = ('{{"result_type":"normal_task","ai_task_type":"MESSAGE_NOTIFICATION","current_or_history":"current",'
         '"source_event_index":{event},"informational_message":{{"summary":"Parking?"}}}}')
_REVIEW = ('{{"result_type":"manual_review","current_or_history":"current","source_event_index":{event},'
           '"manual_review":{{"reason_code":"AMBIGUOUS"}}}}')
_CHILD = ('{{"result_type":"normal_task","ai_task_type":"TRACE_RESERVATION_NOTES","current_or_history":"current",'
          '"source_event_index":{event},"parent_source_event_index":15,"blocked_until_parent_completed":true}}')


@dataclass(frozen=True)
class Context:
    setup: Setup
    one_off: itertools.count = field(default_factory=lambda: itertools.count(1))


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    return Context(setup=await prepare(client, database_url))


def items(keys: list[int]) -> list[str]:
    updates = [update_item(i + 1, f"BK{key:04d}") for i, key in enumerate(keys)]
    return [*updates, _NEW.format(event=15), _NEW.format(event=16), _NOTE.format(event=17), _NOTE.format(event=18),
            _REVIEW.format(event=19), _CHILD.format(event=20)]


def wrk_request(context: Context) -> Request:
    n = next(context.one_off)
    return Request(path=f"{BASE}/ai-batches", method="POST",
                   headers={"Authorization": f"Bearer {context.setup.client_token}",
                            "Content-Type": "application/json"},
                   body=batch_body(items([(n * 7 + i * 71) % ORDERS for i in range(14)]),
                                   request_id=f"one-off-{n}-{uuid.uuid4().hex[:6]}", message=n))


def wrk_lua(context: Context) -> str:
    updates = ",".join(f"'{update_item(i + 1, 'BK%04d')}'" for i in range(14))
    fixed = ",".join(f"'{text}'" for text in items([0] * 14)[14:])
    return f"""
local updates = {{{updates}}}
local fixed = {{{fixed}}}
local sent = 0

function request()
  sent = sent + 1
  local parts = {{}}
  for i = 1, #updates do
    parts[i] = string.format(updates[i], math.random(0, {ORDERS - 1}))
  end
  for i = 1, #fixed do
    parts[#parts + 1] = fixed[i]
  end
  local body = string.format('{{"hotel_id":"{HOTEL}","source_message_id":%d,"request_id":"%s-t%d-%d",'
                             .. '"ai_task_results":[%s]}}', thread_index * 100000000 + sent, bench_run,
                             thread_index, sent, table.concat(parts, ","))
  return wrk.format("POST", "{BASE}/ai-batches", nil, body)
end
"""


def baseline_config(context: Context) -> dict[str, object]:
    return {"client_id": context.setup.client_id}


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    await cursor.execute(CLIENT_PRINCIPAL_SQL, {"id": config["client_id"]})
    client = await cursor.fetchone()
    assert client is not None, "the bench's API client is not in the database"
    principal = Principal(kind="client", id=client["id"], scopes=frozenset(client["scopes"]),
                          hotel_ids=frozenset(client["hotel_ids"]))
    prepared = ingest.prepare(request.body, principal=principal, max_items=500)
    await cursor.execute(queries.BATCH_BY_KEY_SQL, {"hotel_id": prepared.hotel_id, "key": prepared.key})
    if await cursor.fetchone() is not None:
        return BaselineAnswer(409, {"code": "a replay: this scenario sends new batches only"})
    answer = await ingest.ingest(CursorStatements(cursor), prepared, principal=principal, now=datetime.now(UTC))
    return BaselineAnswer(201, jsonable({**answer, "replayed": False}))


def check(client: httpx.Client, service: str, context: Context) -> None:
    request = wrk_request(context)
    response = client.post(request.path, content=request.body, headers=request.headers)
    answer = response.json()
    if response.status_code != 201 or len(answer.get("items", [])) != ITEMS:
        raise SystemExit(f"{service}: an ingest did not answer 201 with {ITEMS} items: {response.text[:300]}")
    shapes = sorted((i["system_task_type"], i["order_status"], i["task_status"]) for i in answer["items"])
    first_new, child = answer["items"][14], answer["items"][19]
    if shapes.count(("UPDATE_BOOKING", "ACTIVE", "PENDING_CONFIRM")) != 14 or first_new["order_id"] != child[
            "order_id"] or first_new["order_status"] != "TEMPORARY":
        raise SystemExit(f"{service}: the items did not land where Tenet puts them: {shapes}")


def describe(context: Context) -> dict[str, object]:
    return {"active_orders": ORDERS, "items_per_batch": ITEMS, "hotel": HOTEL}
