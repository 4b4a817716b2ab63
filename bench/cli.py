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

from bench import report, scenario, sqllog, wrk
from bench.services import BenchDatabase, ServiceProcess, log, start_baseline, start_tenet
from tenet import __version__ as tenet_version
from tenet.db.database import libpq_url
from tenet.settings import Settings

# The environment of `tenet serve` on top of the harness's own (so TENET_DB_POOL_SIZE and the like
# still pass through). A scenario may add to it with a module-level SERVICE_ENV dict.
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


def _rate_env() -> dict[str, str]:
    """RATE_ENV in a form this Tenet's Settings accepts.

    pydantic-settings takes a dataclass-typed field (`Rate`) for a "complex" one and JSON-decodes its
    environment value, so `10/15min` is refused and only the JSON string `"10/15min"` gets through.
    Ask Settings which form works rather than hard-code the workaround, so a fix in src/ needs no change here.
    """
    found = {}
    for name, value in RATE_ENV.items():
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
    return parser


async def _setup(module: Any, base_url: str) -> Any:
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as client:
        return await module.setup(client)


def _check_answers(service: ServiceProcess, request: scenario.Request) -> None:
    """One request before the load, so a broken scenario fails with its answer, not as a wall of non-2xx."""
    response = httpx.request(request.method, service.base_url + request.path, headers=request.headers,
                             content=request.body, timeout=30.0)
    if not 200 <= response.status_code < 300:
        raise SystemExit(f"{service.name} answered {response.status_code} to {request.method} {request.path}: "
                         f"{response.text[:1000]}\nServer output:\n{service.output_tail()}")


def _measure(tool: str, service: ServiceProcess, request: scenario.Request, args: argparse.Namespace,
             script: Any) -> wrk.WrkResult:
    threads = min(args.threads, args.concurrency)  # wrk refuses more threads than connections
    if args.warmup > 0:
        log(f"warming up {service.name} for {args.warmup:g} s")
        wrk.run(tool, url=service.base_url, request=request, script=script, threads=threads,
                connections=args.concurrency, duration=args.warmup, timeout=args.timeout)
    log(f"measuring {service.name} for {args.duration:g} s at {args.concurrency} connections")
    result = wrk.run(tool, url=service.base_url, request=request, script=script, threads=threads,
                     connections=args.concurrency, duration=args.duration, timeout=args.timeout)
    log(f"{service.name}: {result.requests_per_s:,.1f} req/s, P50 {result.latency_ms['p50']:.2f} ms, "
        f"P99 {result.latency_ms['p99']:.2f} ms, non-2xx {result.non_2xx}")
    return result


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
        tenet = start_tenet(database, workers=args.workers,
                            extra_env={**SERVICE_ENV, **_rate_env(), **getattr(module, "SERVICE_ENV", {})})
        tenet.wait_ready()
        database.join_embedded()
        server = database.server_facts()

        log(f"loading data ({args.scenario}.setup)")
        context = asyncio.run(_setup(module, tenet.base_url))
        request = module.wrk_request(context)
        statements = module.baseline_sql(context)

        plan = database.data_dir / "baseline-plan.json"
        plan.write_text(json.dumps({
            "database_url": libpq_url(database.url),
            "statements": scenario.encode_statements(statements),
            # Tenet's engine per process: pool_size kept open, up to max_overflow more under load.
            "pool_min": settings.db_pool_size,
            "pool_max": settings.db_pool_size + settings.db_max_overflow,
        }), encoding="utf-8")
        log(f"starting the baseline ({args.workers} workers)")
        baseline = start_baseline(database, workers=args.workers, plan_path=plan)
        baseline.wait_ready()

        _check_answers(tenet, request)
        _check_answers(baseline, request)
        if args.show_sql:
            sqllog.show(database, [tenet, baseline], request)
        script = wrk.write_script(request, database.data_dir / "request.lua")
        tenet_result = _measure(tool, tenet, request, args, script)
        baseline_result = _measure(tool, baseline, request, args, script)
    finally:
        for service in (baseline, tenet):
            if service is not None:
                service.stop()
        database.close()

    return {
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
        "data": module.describe(context) if hasattr(module, "describe") else {},
        "request": {"method": request.method, "path": request.path, "headers": sorted(request.headers)},
        "baseline_sql": [s.sql for s in statements],
        "runs": {"tenet": tenet_result.to_dict(), "baseline": baseline_result.to_dict()},
        "ratios": report.ratios(tenet_result, baseline_result),
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.concurrency < 1 or args.threads < 1 or args.workers < 1 or args.duration < 1:
        raise SystemExit("--concurrency, --threads, --workers and --duration must be >= 1")
    results = run(args)
    # 2026-01-02T03:04:05Z -> 20260102T030405Z: sorts by time, no colons in file names.
    stem = f"{results['started_at'].replace('-', '').replace(':', '')}-{args.scenario}"
    json_path, md_path, table = report.write(results, stem)
    print(table, end="")
    log(f"wrote {json_path.relative_to(report.RESULTS_DIR.parent.parent)} and "
        f"{md_path.relative_to(report.RESULTS_DIR.parent.parent)}")
    return 0
