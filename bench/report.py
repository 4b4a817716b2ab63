"""Results: ratios Tenet / baseline, one JSON file and one markdown table per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.wrk import WrkResult

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PERCENTILES = ("p50", "p95", "p99")
CPU_PARTS = (("service", "Service"), ("postgresql", "PostgreSQL"))


def _ratio(tenet: float | None, baseline: float | None) -> float | None:
    return round(tenet / baseline, 3) if tenet is not None and baseline else None


def ratios(tenet: WrkResult, baseline: WrkResult, tenet_cpu: dict[str, Any],
           baseline_cpu: dict[str, Any]) -> dict[str, float | None]:
    """Tenet divided by the baseline. Throughput: below 1 means Tenet serves fewer requests per second.
    Latency and CPU per request: above 1 means Tenet answers more slowly, or spends more."""
    found = {"requests_per_s": _ratio(tenet.requests_per_s, baseline.requests_per_s)}
    for p in PERCENTILES:
        found[f"latency_{p}"] = _ratio(tenet.latency_ms[p], baseline.latency_ms[p])
    for part, _ in CPU_PARTS:
        key = f"{part}_ms_per_request"
        found[f"cpu_{key}"] = _ratio(tenet_cpu[key], baseline_cpu[key])
    return found


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    tenet = results["runs"]["tenet"]
    base = results["runs"]["baseline"]
    r = results["ratios"]
    m = results["machine"]
    p = results["parameters"]
    rows = [
        ("Requests/s", fmt(tenet["requests_per_s"], 1), fmt(base["requests_per_s"], 1), fmt(r["requests_per_s"])),
        *((f"Latency {q.upper()} (ms)", fmt(tenet["latency_ms"][q]), fmt(base["latency_ms"][q]),
           fmt(r[f"latency_{q}"])) for q in PERCENTILES),
        ("Latency mean / max (ms)", f"{fmt(tenet['latency_ms']['mean'])} / {fmt(tenet['latency_ms']['max'])}",
         f"{fmt(base['latency_ms']['mean'])} / {fmt(base['latency_ms']['max'])}", ""),
        ("Requests", f"{tenet['requests']:,}", f"{base['requests']:,}", ""),
        ("Non-2xx answers", str(tenet["non_2xx"]), str(base["non_2xx"]), ""),
        ("Socket errors (connect/read/write/timeout)",
         "/".join(str(tenet["socket_errors"][k]) for k in ("connect", "read", "write", "timeout")),
         "/".join(str(base["socket_errors"][k]) for k in ("connect", "read", "write", "timeout")), ""),
        *((f"{name} CPU / request (ms)", fmt(tenet["cpu"][f"{part}_ms_per_request"], 3),
           fmt(base["cpu"][f"{part}_ms_per_request"], 3), fmt(r[f"cpu_{part}_ms_per_request"]))
          for part, name in CPU_PARTS),
        *_wait_rows(tenet.get("waits"), base.get("waits")),
    ]
    data = ", ".join(f"{k}={v}" for k, v in results["data"].items()) or "none"
    lines = [
        f"## {results['scenario']}: {results['description']}",
        "",
        f"Run {results['started_at']}. Machine: {m['cpu_count']} CPUs, Python {m['python']}, "
        f"PostgreSQL {m['postgresql_version']} ({results['database']['mode']}), {m['wrk']}, {m['platform']}.",
        f"Load: {p['workers']} API processes each side, {p['concurrency']} connections, {p['threads']} wrk threads, "
        f"{p['duration_s']} s measured after {p['warmup_s']} s warm-up. Data: {data}.",
        "",
        "| Metric | Tenet | Baseline | Tenet / baseline |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        "",
        "Baseline: the same SQL statements "
        + ("on autocommit connections (as Tenet's read path sends them)" if results.get("baseline_autocommit")
           else "in one transaction")
        + " through a psycopg pool, served by a bare ASGI callable on the same uvicorn setup (bench/baseline_app.py).",
        f"CPU: user + system time over the measured interval divided by the requests completed; service = the "
        f"server's process tree, PostgreSQL = {_postgresql_cpu_scope(results['database']['mode'])}.",
    ]
    return "\n".join(lines) + "\n"


def _wait_rows(tenet: dict[str, Any] | None, base: dict[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """The PostgreSQL backends' states while each side was measured (bench/waits.py), as shares of the samples;
    the locks waited for on the last row."""
    if not tenet or not base:
        return []
    rows = [(f"Backends {name} (share of samples)", f"{tenet['shares'][name]:.1%}", f"{base['shares'][name]:.1%}", "")
            for name in tenet["shares"] if tenet["shares"][name] or base["shares"].get(name)]

    def locks(side: dict[str, Any]) -> str:
        return ", ".join(f"{event} {count}" for event, count in side["locks"].items()) or "none"

    return [*rows, ("Lock waits seen (samples)", locks(tenet), locks(base), "")]


def _postgresql_cpu_scope(mode: str) -> str:
    if mode == "embedded":
        return "the whole server less what it uses idle (measured for 1 s before each side)"
    return "the backends of the bench database, when the server runs on this machine"


def write(results: dict[str, Any], stem: str, table: str | None = None) -> tuple[Path, Path, str]:
    """The results as JSON and their table as markdown; `table` for a scenario that makes its own (`measure`)."""
    RESULTS_DIR.mkdir(exist_ok=True)
    table = markdown(results) if table is None else table
    json_path = RESULTS_DIR / f"{stem}.json"
    md_path = RESULTS_DIR / f"{stem}.md"
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    md_path.write_text(table, encoding="utf-8")
    return json_path, md_path, table
