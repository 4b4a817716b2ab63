"""What a scenario is, and how the harness finds one.

A scenario is a module `bench/scenarios/<name>.py` with:

    DESCRIPTION: str
        One line for the report.

    async def setup(client: httpx.AsyncClient, database_url: str) -> Context
        Loads data through Tenet's public API (`client` has Tenet's base URL), or straight into the bench
        database (`database_url`, libpq form) when the API would take too long, and answers whatever the
        functions below need: ids, tokens... Runs once, before any measurement.

    def wrk_request(context) -> Request
        A request as wrk sends it, to Tenet and to the baseline alike. Called for each one-off request
        (the answer check, --show-sql) and once for wrk's defaults (method, headers, body), so a scenario
        whose requests must differ (a write with unique values) answers a new one on every call.

and the baseline, either

    def baseline_sql(context) -> list[Statement]
        The statements Tenet runs for that request, in order, with their parameters. The baseline runs
        exactly these in one transaction per request (see baseline_app.py).

or, when the statements depend on the request (a cursor, an email in the body) or on earlier results,

    def baseline_config(context) -> dict[str, object]
        What the baseline's processes need to know (ids...); passed to them as JSON (see encode_value).

    async def baseline(cursor, request: BaselineRequest, config) -> BaselineAnswer
        Runs in the baseline's process, inside its transaction (`cursor`: a psycopg AsyncCursor with
        dict rows): the statements Tenet runs for `request`, in order, and the answer to send. The request
        carries its headers, so a scenario whose requests come from many accounts can tell who asks
        (the Authorization header's token).

    BASELINE_AUTOCOMMIT: bool
        True when Tenet answers on its transaction-free read path (tenet.kernel.reads: autocommit, no BEGIN
        and no COMMIT): the baseline then runs its statements on autocommit connections too, so both sides
        make the same round trips. Default False: one transaction per request, like a unit of work.

and optionally

    def describe(context) -> dict[str, object]
        Facts about the loaded data (row counts...) written into the results.

    def wrk_lua(context) -> str
        Lua for wrk when the requests vary: it defines `request()` (wrk's hook; build requests with
        `wrk.format(method, path, headers, body)`, which adds the headers of wrk_request) and may define
        `scenario_init()` (per thread; `thread_index` 1..`bench_threads` and `bench_run`, a label unique
        to the wrk run such as "tenet-warmup", are set) and `scenario_response(status, body)`.

    def check(client: httpx.Client, service: str, context) -> None
        Further checks of one service's answers before the load (`client` has its base URL); raise
        SystemExit to stop the run.

    SERVICE_ENV: dict[str, str]
        Extra environment for `tenet serve` (limits a scenario would otherwise hit).

    def measure(args) -> dict[str, object]  and  def table(results) -> str
        Instead of everything above, for a load wrk cannot make (150 MB upload bodies, a worker's runs): the
        scenario starts its own servers and clients and answers its results (JSON-able; the harness writes them
        to bench/results/ with the table) and their markdown table.

    def verify(context) -> dict[str, object]
        Runs after both measurements while the database still runs: what the load left there (a write
        scenario's row counts, duplicates); raise SystemExit when it is wrong. Reported with `describe`.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import Any, TypeAlias

from psycopg import AsyncCursor
from psycopg.rows import DictRow

import bench.scenarios

# What a baseline handler gets: the baseline's cursor, whose rows are dicts (bench/baseline_app.py).
DictCursor: TypeAlias = AsyncCursor[DictRow]


@dataclass(frozen=True)
class Request:
    path: str
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True)
class Statement:
    """One SQL statement in psycopg's placeholder style (`%s` or `%(name)s`) and its parameters.

    Give parameters the Python types Tenet passes (a `uuid.UUID`, not its string): psycopg picks the
    wire type from them, and a text parameter would make PostgreSQL plan a different query.
    """

    sql: str
    params: tuple[Any, ...] | dict[str, Any] = ()


@dataclass(frozen=True)
class BaselineRequest:
    """What the baseline's handler sees of one HTTP request."""

    method: str
    path: str
    query: dict[str, str]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case, as HTTP/1.1 allows


@dataclass(frozen=True)
class BaselineAnswer:
    status: int
    body: Any  # served as JSON (UUIDs and datetimes as text)


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.scenarios.__path__) if not m.name.startswith("_"))


def load(name: str) -> ModuleType:
    if name not in available():
        raise SystemExit(f"no scenario {name!r}; available: {', '.join(available()) or 'none'}")
    module = importlib.import_module(f"bench.scenarios.{name}")
    if hasattr(module, "measure"):
        return module  # it runs its own load (bench/cli.py main)
    missing = [attr for attr in ("setup", "wrk_request") if not hasattr(module, attr)]
    if not hasattr(module, "baseline_sql") and not all(hasattr(module, a) for a in ("baseline_config", "baseline")):
        missing.append("baseline_sql (or baseline_config and baseline)")
    if missing:
        raise SystemExit(f"scenario {name!r} lacks {', '.join(missing)} (see bench/scenario.py)")
    return module


# --- parameters across a process boundary ------------------------------------------------------------
# The baseline runs in other processes (uvicorn workers), so the statements travel as JSON. Types JSON
# lacks are tagged so they arrive as the same Python type, hence the same PostgreSQL parameter type.


def encode_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {"$dict": {k: encode_value(v) for k, v in value.items()}}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot pass a {type(value).__name__} to the baseline; add it to bench/scenario.py")


def decode_value(value: Any) -> Any:
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        if "$uuid" in value:
            return uuid.UUID(value["$uuid"])
        if "$datetime" in value:
            return datetime.fromisoformat(value["$datetime"])
        if "$dict" in value:
            return {k: decode_value(v) for k, v in value["$dict"].items()}
    return value


def encode_statements(statements: list[Statement]) -> list[dict[str, Any]]:
    return [{"sql": s.sql, "params": encode_value(s.params)} for s in statements]


def decode_statements(encoded: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    decoded = []
    for item in encoded:
        params = decode_value(item["params"])
        decoded.append((item["sql"], tuple(params) if isinstance(params, list) else params))
    return decoded
