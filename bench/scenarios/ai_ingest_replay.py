"""ai_ingest_replay: the same `POST /api/v1/reservations/ai-batches` again: the first answer, replayed.

What Tenet does for it: verify the JWT, load the API client on the read path, parse and map the body (the
key is the client's request id), find the batch by its key on the read path (`BATCH_BY_KEY_SQL`, one index
probe) and answer its stored first answer with `replayed: true` — no transaction. The baseline does the
same look-ups and answers the same JSON. The known batch is one of 20 items, made during setup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios import ai_ingest
from bench.scenarios._reservations import BASE, Setup, batch_body, jsonable, prepare
from tenet.iam.principal import Principal
from tenet.iam.queries import CLIENT_PRINCIPAL_SQL
from tenet.reservations import ingest, queries

DESCRIPTION = "POST /api/v1/reservations/ai-batches of a batch already ingested (20 items): the replay"


@dataclass(frozen=True)
class Context:
    setup: Setup
    body: str


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    made = await prepare(client, database_url)
    body = batch_body(ai_ingest.items([(i * 73) % 1000 for i in range(14)]), request_id="known-batch", message=1)
    response = await client.post(f"{BASE}/ai-batches", content=body, headers={
        "Authorization": f"Bearer {made.client_token}", "Content-Type": "application/json"})
    if response.status_code != 201:
        raise SystemExit(f"ingesting the known batch answered {response.status_code}: {response.text[:300]}")
    return Context(setup=made, body=body)


def wrk_request(context: Context) -> Request:
    return Request(path=f"{BASE}/ai-batches", method="POST", body=context.body,
                   headers={"Authorization": f"Bearer {context.setup.client_token}",
                            "Content-Type": "application/json"})


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
    row = await cursor.fetchone()
    if row is None or row["request_payload_sha256"] != prepared.body_sha:
        return BaselineAnswer(409, {"code": "not the known batch"})
    return BaselineAnswer(200, jsonable({
        "batch_id": row["id"], "replayed": True, "hotel_id": row["hotel_id"],
        "source_message_id": row["source_message_id"], "request_id": row["request_id"],
        "request_payload_sha256": row["request_payload_sha256"],
        "batch_idempotency_key": row["batch_idempotency_key"], "item_count": row["item_count"],
        "items": row["response_items_json"]}))


def check(client: httpx.Client, service: str, context: Context) -> None:
    request = wrk_request(context)
    answer = client.post(request.path, content=request.body, headers=request.headers)
    if answer.status_code != 200 or answer.json().get("replayed") is not True or len(answer.json()["items"]) != 20:
        raise SystemExit(f"{service}: the known batch was not replayed: {answer.text[:300]}")


def describe(context: Context) -> dict[str, object]:
    return {"items_in_the_batch": 20, "body_bytes": len(context.body.encode())}
