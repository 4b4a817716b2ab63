"""`python -m bench <scenario>`: one measured run of Tenet and of the baseline, then the report."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
from datetime import UTC, datetime
from typing import Any

import httpx

from bench import cpu, openloop, report, scenario, sqllog, waits, wrk
from bench.services import BenchDatabase, ServiceProcess, log, start_baseline, start_tenet
from tenet import __version__ as tenet_version
from tenet.db.database import libpq_url
from tenet.settings import Settings

# The environment of `tenet serve` on top of the harness's own (so TENET_DB_POOL_SIZE and the like
# still pass through). A scenario may add to it with a module-level SERVICE_ENV dict. Every entry goes
# through `_settings_env`, so a scenario's rate limits may be written like these.
SERVICE_ENV = {
    "TENET_LOG_LEVEL": "WARNING",  # the per-request INFO log line would measure stdout, not the service
    # argon2id at production cost makes loading 1,000 users take a minute on two cores. No scenario so far
    # measures hashing; one that does (sign-in) must set the production cost back in its SERVICE_ENV.
    "TENET_PASSWORD_HASH_TIME_COST": "1",
    "TENET_PASSWORD_HASH_MEMORY_KIB": "1024",
    # The bench token must outlive warm-up plus a long --duration.
    "TENET_ACCESS_TOKEN_TTL_SECONDS": "86400",
}


# Loading data registers and signs in far more often than the production limits allow.
RATE_ENV = {"TENET_REGISTRATION_LIMIT": "100000/hour", "TENET_LOGIN_FAILURE_LIMIT": "100000/15min"}


def _settings_env(env: dict[str, str]) -> dict[str, str]:
    """`env` in a form this Tenet's Settings accepts.

    pydantic-settings takes a dataclass-typed field (`Rate`) for a "complex" one and JSON-decodes its
    environment value, so `10/15min` is refused and only the JSON string `"10/15min"` gets through.
    Ask Settings which form works rather than hard-code the workaround, so a fix in src/ needs no change here.
    A variable Settings does not know yet (a limit the service will add) is passed as it is.
    """
    found = {}
    for name, value in env.items():
        for candidate in (value, json.dumps(value)):
            saved = os.environ.get(name)
            os.environ[name] = candidate
            try:
                Settings(_env_file=None)
            except ValueError:  # pydantic's ValidationError and pydantic-settings' SettingsError both are
                continue
            else:
                found[name] = candidate
                break
            finally:
                if saved is None:
                    del os.environ[name]
                else:
                    os.environ[name] = saved
        else:
            raise SystemExit(f"tenet.settings.Settings accepts neither {value!r} nor its JSON form for {name}")
    return found


def _seconds(text: str) -> int:
    """Whole seconds, as wrk takes them: `10` or `10s`."""
    value = int(text.removesuffix("s"))
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", help=f"one of: {', '.join(scenario.available())}")
    parser.add_argument("--concurrency", type=int, default=32, help="open connections wrk keeps busy (default 32)")
    parser.add_argument("--duration", type=_seconds, default=10, help="seconds measured per side (default 10)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="API processes of Tenet and of the baseline (default 2)")
    parser.add_argument("--warmup", type=_seconds, default=2,
                        help="seconds of unmeasured load before each measurement: fills the connection pools "
                             "and psycopg's prepared statements (default 2; 0 to skip)")
    parser.add_argument("--timeout", default="10s",
                        help="wrk's per-request timeout; slower answers count as timeouts, not latency (default 10s)")
    parser.add_argument("--show-sql", action="store_true",
                        help="before measuring, print the SQL PostgreSQL receives for one request to each side "
                             "(embedded database only); how to check a scenario's baseline_sql")
    loop = parser.add_argument_group(
        "open loop", "--open-loop: a fixed arrival rate stepped up until P95 passes the target (bench/openloop.py); "
        "--duration is each step's length, --concurrency the generator's connections")
    loop.add_argument("--open-loop", action="store_true",
                      help="measure the capacity at a latency target instead of closed-loop throughput")
    loop.add_argument("--rate-start", type=float, default=25.0, help="first arrival rate, requests/s (default 25)")
    loop.add_argument("--rate-factor", type=float, default=1.25, help="rate multiplier per step (default 1.25)")
    loop.add_argument("--target-p95", type=float, default=150.0, help="P95 target in ms (default 150, spec 000)")
    loop.add_argument("--max-steps", type=int, default=30, help="steps at most per side (default 30)")
    return parser


async def _setup(module: Any, base_url: str, database_url: str) -> Any:
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as client:
        return await module.setup(client, database_url)


def _check_answers(service: ServiceProcess, module: Any, context: Any) -> None:
    """One request before the load, so a broken scenario fails with its answer, not as a wall of non-2xx;
    then the scenario's own checks, if it has any."""
    request = module.wrk_request(context)
    response = httpx.request(request.method, service.base_url + request.path, headers=request.headers,
                             content=request.body, timeout=30.0)
    if not 200 <= response.status_code < 300:
        raise SystemExit(f"{service.name} answered {response.status_code} to {request.method} {request.path}: "
                         f"{response.text[:1000]}\nServer output:\n{service.output_tail()}")
    if hasattr(module, "check"):
        with httpx.Client(base_url=service.base_url, headers=request.headers, timeout=30.0) as client:
            module.check(client, service.name, context)


def _baseline_plan(module: Any, context: Any) -> dict[str, Any]:
    """What the baseline's processes run: the fixed statements, or the scenario's handler and its config."""
    if hasattr(module, "baseline_sql"):
        return {"statements": scenario.encode_statements(module.baseline_sql(context))}
    return {"scenario": module.__name__.rsplit(".", 1)[-1],
            "config": scenario.encode_value(module.baseline_config(context))}


def _measure(tool: str, service: ServiceProcess, database: BenchDatabase, request: scenario.Request,
             args: argparse.Namespace, script: Any) -> tuple[wrk.WrkResult, dict[str, float | None], dict[str, Any]]:
    threads = min(args.threads, args.concurrency)  # wrk refuses more threads than connections
    meter = cpu.CpuMeter(service.process.pid, database)
    idle = meter.postgresql_idle()  # before any load of this side, so its after-effects do not count
    if args.warmup > 0:
        log(f"warming up {service.name} for {args.warmup:g} s")
        wrk.run(tool, url=service.base_url, request=request, script=script, threads=threads,
                connections=args.concurrency, duration=args.warmup, timeout=args.timeout,
                label=f"{service.name}-warmup")
    log(f"measuring {service.name} for {args.duration:g} s at {args.concurrency} connections")
    assert database.url is not None  # set once the database has started
    sampler = waits.WaitSampler(libpq_url(database.url))
    start = meter.sample()
    sampler.start()
    try:
        result = wrk.run(tool, url=service.base_url, request=request, script=script, threads=threads,
                         connections=args.concurrency, duration=args.duration, timeout=args.timeout,
                         label=service.name)
    finally:
        sampler.stop()
    used = cpu.usage(start, meter.sample(), requests=result.requests, postgresql_idle=idle)
    log(f"{service.name}: {result.requests_per_s:,.1f} req/s, P50 {result.latency_ms['p50']:.2f} ms, "
        f"P99 {result.latency_ms['p99']:.2f} ms, non-2xx {result.non_2xx}, CPU/request: service "
        f"{report.fmt(used['service_ms_per_request'])} ms, "
        f"PostgreSQL {report.fmt(used['postgresql_ms_per_request'])} ms")
    return result, used, {"shares": sampler.shares(), "locks": sampler.lock_events()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    module = scenario.load(args.scenario)
    tool = wrk.ensure_wrk()
    started = datetime.now(UTC)
    settings = Settings(_env_file=None)  # the pool sizes Tenet will use, so the baseline's pool matches
    database = BenchDatabase.create()
    tenet: ServiceProcess | None = None
    baseline: ServiceProcess | None = None
    try:
        log(f"starting Tenet ({args.workers} workers, {database.mode} database) in {database.data_dir}")
        tenet = start_tenet(database, workers=args.workers, extra_env=_settings_env(
            {**SERVICE_ENV, **RATE_ENV, **getattr(module, "SERVICE_ENV", {})}))
        tenet.wait_ready()
        database.join_embedded()
        server = database.server_facts()

        log(f"loading data ({args.scenario}.setup)")
        assert database.url is not None  # joined above
        context = asyncio.run(_setup(module, tenet.base_url, libpq_url(database.url)))
        request = module.wrk_request(context)
        baseline_plan = _baseline_plan(module, context)

        plan = database.data_dir / "baseline-plan.json"
        plan.write_text(json.dumps({
            "database_url": libpq_url(database.url),
            **baseline_plan,
            # Tenet's engine per process: up to pool_size + max_overflow under load. The pool starts small and
            # grows during the warm-up, so while Tenet is measured it does not hold connections the server's
            # max_connections must count (Tenet also has its read pool).
            "pool_min": 2,
            "pool_max": settings.db_pool_size + settings.db_max_overflow,
            # Routes Tenet serves on its transaction-free read path: no BEGIN/COMMIT on the baseline's side either.
            "autocommit": bool(getattr(module, "BASELINE_AUTOCOMMIT", False)),
        }), encoding="utf-8")
        log(f"starting the baseline ({args.workers} workers)")
        baseline = start_baseline(database, workers=args.workers, plan_path=plan)
        baseline.wait_ready()

        _check_answers(tenet, module, context)
        _check_answers(baseline, module, context)
        if args.show_sql:
            sqllog.show(database, [(tenet, module.wrk_request(context)), (baseline, module.wrk_request(context))])
        if args.open_loop:
            open_loop = _open_loop(module, context, tenet, baseline, args)
        else:
            script = wrk.write_script(request, database.data_dir / "request.lua",
                                      module.wrk_lua(context) if hasattr(module, "wrk_lua") else "")
            tenet_result, tenet_cpu, tenet_waits = _measure(tool, tenet, database, request, args, script)
            baseline_result, baseline_cpu, baseline_waits = _measure(tool, baseline, database, request, args, script)
        # What the runs left in the database, read while it still runs (a write scenario's "nothing lost, nothing
        # doubled"): the scenario's optional `verify(context)`, reported beside `describe`. The baseline is stopped
        # first: its pools and Tenet's together can hold every connection the server allows.
        baseline.stop()
        baseline = None
        verified = module.verify(context) if hasattr(module, "verify") else {}
    finally:
        for service in (baseline, tenet):
            if service is not None:
                service.stop()
        database.close()

    found = {
        "scenario": args.scenario,
        "description": getattr(module, "DESCRIPTION", ""),
        "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "wrk": wrk.version(tool),
            "tenet_version": tenet_version,
            **server,
        },
        "parameters": {
            "workers": args.workers, "concurrency": args.concurrency, "threads": min(args.threads, args.concurrency),
            "duration_s": args.duration, "warmup_s": args.warmup, "timeout": args.timeout,
            "db_pool_size": settings.db_pool_size, "db_max_overflow": settings.db_max_overflow,
        },
        # Never the URL itself: it may carry a password.
        "database": {"mode": database.mode, "name": database.name},
        "data": {**(module.describe(context) if hasattr(module, "describe") else {}), **verified},
        "request": {"method": request.method, "path": request.path, "headers": sorted(request.headers)},
        # The fixed statements, or the scenario's handler (its SQL is in its module).
        "baseline_sql": ([s["sql"] for s in baseline_plan["statements"]] if "statements" in baseline_plan
                         else f"{module.__name__}.baseline"),
        "baseline_autocommit": bool(getattr(module, "BASELINE_AUTOCOMMIT", False)),
    }
    if args.open_loop:
        return {**found, "open_loop": open_loop}
    return {**found, "runs": {"tenet": {**tenet_result.to_dict(), "cpu": tenet_cpu, "waits": tenet_waits},
                              "baseline": {**baseline_result.to_dict(), "cpu": baseline_cpu,
                                           "waits": baseline_waits}},
            "ratios": report.ratios(tenet_result, baseline_result, tenet_cpu, baseline_cpu)}


def _open_loop(module: Any, context: Any, tenet: ServiceProcess, baseline: ServiceProcess,
               args: argparse.Namespace) -> dict[str, Any]:
    """Each request series of the scenario (`open_loop_series(context)`: name -> the requests sent in turn; else
    its one request), Tenet's capacity then the baseline's, one after the other in this run."""
    series = (module.open_loop_series(context) if hasattr(module, "open_loop_series")
              else {"request": [module.wrk_request(context)]})
    options = {"connections": args.concurrency, "start": args.rate_start, "factor": args.rate_factor,
               "seconds": float(args.duration), "warmup": float(args.warmup), "target_p95_ms": args.target_p95,
               "max_steps": args.max_steps}
    found: dict[str, Any] = {"options": options, "series": {}}
    for name, requests in series.items():
        sides = {}
        for service in (tenet, baseline):
            log(f"open loop, {name}: {service.name} from {args.rate_start:g}/s, x{args.rate_factor:g} per "
                f"{args.duration} s step, until P95 > {args.target_p95:g} ms")
            sides[service.name] = openloop.capacity(service.base_url, requests, log=log, **options)
            log(f"{name}: {service.name} held P95 <= {args.target_p95:g} ms up to "
                f"{sides[service.name]['capacity_per_s']:,.1f} requests/s")
        found["series"][name] = sides
    return found


def _stem(started_at: str, scenario_name: str) -> str:
    # 2026-01-02T03:04:05Z -> 20260102T030405Z: sorts by time, no colons in file names.
    return f"{started_at.replace('-', '').replace(':', '')}-{scenario_name}"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.concurrency < 1 or args.threads < 1 or args.workers < 1 or args.duration < 1:
        raise SystemExit("--concurrency, --threads, --workers and --duration must be >= 1")
    module = scenario.load(args.scenario)
    if hasattr(module, "measure"):
        # A load wrk cannot make (150 MB bodies, a worker's runs): the scenario runs its own clients and servers.
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        results = module.measure(args)
        json_path, md_path, table = report.write(results, _stem(started, args.scenario), module.table(results))
    else:
        results = run(args)
        custom = openloop.table(results) if args.open_loop else None
        json_path, md_path, table = report.write(results, _stem(results["started_at"], args.scenario), custom)
    print(table, end="")
    log(f"wrote {json_path.relative_to(report.RESULTS_DIR.parent.parent)} and "
        f"{md_path.relative_to(report.RESULTS_DIR.parent.parent)}")
    return 0
