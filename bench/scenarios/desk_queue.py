"""desk_queue: the reservation desk's queue page of a hotel with 1,000 ACTIVE orders (`GET
/console/desk/hotels/{id}/orders`, HTML, signed in by a console session), against the JSON route whose rows it
shows (`GET /api/v1/reservations/orders?hotel_id=...&limit=50`), in the same run (issue 19).

The page reads, through the queries the API routes call, the session and the viewer's settings, the task at the
head of each order's queue oldest first (the "next to work" list, 20 rows) and one page of 50 orders with their
task counts (queries.orders, the JSON route's own statement): four statements whatever the hotel holds.
Target: at least half the JSON route's requests per second.

wrk sends one kind of request per run, so the scenario measures with the harness's own `_measure` on one Tenet
(`measure`, as console_meeting does): the page, then the JSON route, each with its warm-up, at the same
concurrency.

Data: the reservation scenarios' hotel `BENCH` with 1,000 ACTIVE orders (`_reservations.prepare`, through the
API), and a second agent assigned to it who signs in to the console; then `tenet invariants check`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import psycopg

from bench import report, wrk
from bench.cli import RATE_ENV, SERVICE_ENV, _measure, _settings_env
from bench.loading import check_invariants, register_users
from bench.scenario import Request
from bench.scenarios._reservations import BASE, HOTEL, ORDERS, prepare
from bench.services import BenchDatabase, ServiceProcess, log, start_tenet
from tenet.db.database import libpq_url

DESCRIPTION = "GET the desk's queue page of a hotel with 1,000 ACTIVE orders vs the JSON orders route it shows"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def _console_cookie(client: httpx.AsyncClient, email: str, password: str) -> str:
    form = await client.get("/console/sign-in")
    found = _CSRF.search(form.text)
    if found is None:
        raise SystemExit(f"the console's sign-in form has no CSRF token: {form.text[:300]}")
    answer = await client.post("/console/sign-in", data={"csrf_token": found.group(1), "email": email,
                                                         "password": password, "next": "/console/desk"})
    secret = answer.cookies.get("tenet_session")
    if answer.status_code != 303 or not secret:
        raise SystemExit(f"the console's sign-in answered {answer.status_code}: {answer.text[:300]}")
    return f"tenet_anon={client.cookies.get('tenet_anon')}; tenet_session={secret}"


async def _setup(base_url: str, database_url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        made = await prepare(client, database_url)
        admin = {"Authorization": f"Bearer {made.admin_token}"}
        (desk_agent,) = await register_users(client, 1, prefix="desk-agent")
        for method, path, body in (("PUT", f"/api/v1/iam/users/{desk_agent.id}/roles", {"roles": ["ReservationAgent"]}),
                                   ("PUT", f"{BASE}/hotels/{HOTEL}/staff/{desk_agent.id}", None)):
            answer = await client.request(method, path, headers=admin, json=body)
            if answer.status_code not in (200, 204):
                raise SystemExit(f"{path} answered {answer.status_code}: {answer.text[:300]}")
        async with await psycopg.AsyncConnection.connect(database_url) as connection:
            await connection.execute("ANALYZE")
            await connection.commit()
        check_invariants(database_url)
        cookie = await _console_cookie(client, desk_agent.email, desk_agent.password)
    return {"agent_token": made.agent_token, "cookie": cookie}


def requests(context: dict[str, Any]) -> dict[str, Request]:
    return {
        "page": Request(path=f"/console/desk/hotels/{HOTEL}/orders", headers={"Cookie": context["cookie"]}),
        "orders": Request(path=f"{BASE}/orders?hotel_id={HOTEL}&status=ACTIVE&status=TEMPORARY&limit=50",
                          headers={"Authorization": f"Bearer {context['agent_token']}"}),
    }


def _check(service: ServiceProcess, name: str, request: Request) -> None:
    answer = httpx.get(service.base_url + request.path, headers=request.headers, timeout=30)
    if answer.status_code != 200:
        raise SystemExit(f"{name} answered {answer.status_code}: {answer.text[:500]}")
    if name == "page" and answer.text.count('data-order="') != 50:
        raise SystemExit("the queue page does not show a page of 50 orders")
    if name == "orders" and len(answer.json()["items"]) != 50:
        raise SystemExit(f"the orders route answered {len(answer.json()['items'])} rows, not 50")


def measure(args: Any) -> dict[str, Any]:
    tool = wrk.ensure_wrk()
    database = BenchDatabase.create()
    tenet: ServiceProcess | None = None
    results: dict[str, Any] = {}
    try:
        log(f"starting Tenet ({args.workers} workers) in {database.data_dir}")
        tenet = start_tenet(database, workers=args.workers, extra_env=_settings_env({**SERVICE_ENV, **RATE_ENV}))
        tenet.wait_ready()
        database.join_embedded()
        assert database.url is not None
        context = asyncio.run(_setup(tenet.base_url, libpq_url(database.url)))
        for name, request in requests(context).items():
            _check(tenet, name, request)
            script = wrk.write_script(request, database.data_dir / f"{name}.lua")
            result, used, _waits = _measure(tool, tenet, database, request, args, script)
            results[name] = {"path": request.path, **result.to_dict(), "cpu": used}
    finally:
        if tenet is not None:
            tenet.stop()
        database.close()
    return {"scenario": "desk_queue", "description": DESCRIPTION, "orders": ORDERS,
            "parameters": {"workers": args.workers, "concurrency": args.concurrency, "duration_s": args.duration,
                           "warmup_s": args.warmup}, "runs": results}


def table(results: dict[str, Any]) -> str:
    p, runs = results["parameters"], results["runs"]
    lines = [f"## desk_queue: {DESCRIPTION}", "",
             f"{p['workers']} API processes, {p['concurrency']} connections, {p['duration_s']} s each after "
             f"{p['warmup_s']} s of warm-up; one Tenet, one database, one run.", "",
             "| Request | req/s | P50 ms | P99 ms | non-2xx | service CPU ms/req | PostgreSQL CPU ms/req |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, run in runs.items():
        cpu = run["cpu"]
        lines.append(f"| {name} (`{run['path']}`) | {run['requests_per_s']:,.1f} | {run['latency_ms']['p50']:.2f} | "
                     f"{run['latency_ms']['p99']:.2f} | {run['non_2xx']} | "
                     f"{report.fmt(cpu['service_ms_per_request'])} | {report.fmt(cpu['postgresql_ms_per_request'])} |")
    if runs.get("orders", {}).get("requests_per_s"):
        ratio = runs["page"]["requests_per_s"] / runs["orders"]["requests_per_s"]
        lines.append("")
        lines.append(f"The page serves {ratio:.0%} of the JSON route's requests per second (target: at least 50%).")
    return "\n".join(lines) + "\n"
