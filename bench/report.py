"""Results: ratios Tenet / baseline, one JSON file and one markdown table per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.wrk import WrkResult

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PERCENTILES = ("p50", "p95", "p99")


def _ratio(tenet: float, baseline: float) -> float | None:
    return round(tenet / baseline, 3) if baseline else None


def ratios(tenet: WrkResult, baseline: WrkResult) -> dict[str, float | None]:
    """Tenet divided by the baseline. Throughput: below 1 means Tenet serves fewer requests per second.
    Latency: above 1 means Tenet answers more slowly."""
    found = {"requests_per_s": _ratio(tenet.requests_per_s, baseline.requests_per_s)}
    for p in PERCENTILES:
        found[f"latency_{p}"] = _ratio(tenet.latency_ms[p], baseline.latency_ms[p])
    return found


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    tenet = results["runs"]["tenet"]
    base = results["runs"]["baseline"]
    r = results["ratios"]
    m = results["machine"]
    p = results["parameters"]
    rows = [
        ("Requests/s", _fmt(tenet["requests_per_s"], 1), _fmt(base["requests_per_s"], 1), _fmt(r["requests_per_s"])),
        *((f"Latency {q.upper()} (ms)", _fmt(tenet["latency_ms"][q]), _fmt(base["latency_ms"][q]),
           _fmt(r[f"latency_{q}"])) for q in PERCENTILES),
        ("Latency mean / max (ms)", f"{_fmt(tenet['latency_ms']['mean'])} / {_fmt(tenet['latency_ms']['max'])}",
         f"{_fmt(base['latency_ms']['mean'])} / {_fmt(base['latency_ms']['max'])}", ""),
        ("Requests", f"{tenet['requests']:,}", f"{base['requests']:,}", ""),
        ("Non-2xx answers", str(tenet["non_2xx"]), str(base["non_2xx"]), ""),
        ("Socket errors (connect/read/write/timeout)",
         "/".join(str(tenet["socket_errors"][k]) for k in ("connect", "read", "write", "timeout")),
         "/".join(str(base["socket_errors"][k]) for k in ("connect", "read", "write", "timeout")), ""),
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
        "Baseline: the same SQL statements in one transaction through a psycopg pool, served by a bare "
        "ASGI callable on the same uvicorn setup (bench/baseline_app.py).",
    ]
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], stem: str) -> tuple[Path, Path, str]:
    RESULTS_DIR.mkdir(exist_ok=True)
    table = markdown(results)
    json_path = RESULTS_DIR / f"{stem}.json"
    md_path = RESULTS_DIR / f"{stem}.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(table, encoding="utf-8")
    return json_path, md_path, table
