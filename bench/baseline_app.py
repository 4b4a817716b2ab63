"""The baseline: a bare ASGI callable that runs a scenario's SQL through psycopg and answers JSON.

It is what a request costs with the same server (uvicorn, same loop and HTTP parser, same number of
worker processes), the same driver and the same statements against the same database, but without
FastAPI, the dependency system, Pydantic, the SQLAlchemy ORM and pool, token verification and our
middleware. Tenet's numbers divided by these are the price of those layers.

Every request, whatever its path (except /readyz), runs in one transaction, as Tenet's unit of work
does: psycopg opens it with BEGIN before the first statement and the pool's context manager COMMITs it
(unless the plan asks for autocommit, below).
What it runs is the scenario's: either a fixed list of statements (`baseline_sql`), answered as
`{"results": [rows of each]}`, or the scenario's `baseline` handler, which reads the request (a cursor, a
body) and answers like Tenet. Configured through the environment by the harness:

    BENCH_BASELINE_PLAN   path of a JSON file: {"database_url", "pool_min", "pool_max", "autocommit"} and
                          either "statements" or "scenario" (a module name) with its "config"

With "autocommit" (a scenario's BASELINE_AUTOCOMMIT, for routes Tenet serves on its transaction-free read
path) the pool's connections are in autocommit mode: no BEGIN, no COMMIT, one round trip per statement, as
Tenet's read path sends them.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, decode_statements, decode_value

PLAN_ENV = "BENCH_BASELINE_PLAN"

_plan = json.loads(Path(os.environ[PLAN_ENV]).read_text(encoding="utf-8"))
# Opened in the lifespan (one pool per worker process, like Tenet's engine).
_pool = AsyncConnectionPool(
    _plan["database_url"], min_size=_plan["pool_min"], max_size=_plan["pool_max"], open=False,
    kwargs={"application_name": "tenet-bench-baseline", "autocommit": bool(_plan.get("autocommit", False))},
)
_JSON_HEADERS = [(b"content-type", b"application/json")]


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Any) -> bytes:
    # Always the whole body: a handler may need it, and a POST costs the same I/O here as in Tenet either way.
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


Handler = Callable[[DictCursor, BaselineRequest], Awaitable[BaselineAnswer]]


def _statements_handler(statements: list[tuple[str, Any]]) -> Handler:
    async def run(cursor: DictCursor, request: BaselineRequest) -> BaselineAnswer:
        results: list[Any] = []
        for sql, params in statements:
            await cursor.execute(sql, params)
            results.append(await cursor.fetchall() if cursor.description else cursor.rowcount)
        return BaselineAnswer(200, {"results": results})

    return run


def _scenario_handler(name: str, config: dict[str, Any]) -> Handler:
    module = importlib.import_module(f"bench.scenarios.{name}")

    async def run(cursor: DictCursor, request: BaselineRequest) -> BaselineAnswer:
        return await module.baseline(cursor, request, config)

    return run


_handle = (_statements_handler(decode_statements(_plan["statements"])) if "statements" in _plan
           else _scenario_handler(_plan["scenario"], decode_value(_plan["config"])))


async def _run(request: BaselineRequest) -> BaselineAnswer:
    async with _pool.connection() as connection, connection.cursor(row_factory=dict_row) as cursor:
        return await _handle(cursor, request)


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await _pool.open(wait=True, timeout=30)
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": repr(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await _pool.close()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        return
    body = await _read_body(receive)
    if scope["path"] == "/readyz":
        async with _pool.connection() as connection:
            await connection.execute("SELECT 1")
        await _respond(send, 200, b'{"status":"ready"}')
        return
    request = BaselineRequest(method=scope["method"], path=scope["path"],
                              query=dict(parse_qsl(scope["query_string"].decode("latin-1"))), body=body,
                              headers={name.decode("latin-1"): value.decode("latin-1")
                                       for name, value in scope["headers"]})
    try:
        answer = await _run(request)
    except Exception as exc:  # a failed statement must show as a non-2xx answer in wrk's count
        await _respond(send, 500, json.dumps({"error": repr(exc)}).encode())
        return
    # default=str: UUIDs and datetimes as their text (a handler that mimics Tenet's JSON formats its own).
    await _respond(send, answer.status, json.dumps(answer.body, default=str, separators=(",", ":")).encode())
