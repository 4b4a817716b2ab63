"""The soak's report: per-phase figures from the samples, and the markdown, JSON and chart written to var/soak/."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ops.soak.checks import percentile
from ops.soak.faults import Fault
from ops.soak.load import Sample

BUCKET = 5.0  # seconds per point of the chart


def failed(sample: Sample) -> bool:
    """An answer that counts as an error: no answer at all, or 5xx (a 503 with Retry-After included)."""
    return sample.status == 0 or sample.status >= 500


def phase_of(at: float, faults: Sequence[Fault]) -> str:
    current = "baseline"
    for n, fault in enumerate(faults):
        if at >= fault.at:
            current = f"{n + 1}. {fault.kind}"
    return current


def phases(samples: Sequence[Sample], faults: Sequence[Fault]) -> list[dict[str, Any]]:
    grouped: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        grouped[phase_of(sample.at, faults)].append(sample)
    order = ["baseline", *(f"{n + 1}. {f.kind}" for n, f in enumerate(faults))]
    rows = []
    for name in order:
        group = grouped.get(name, [])
        statuses: dict[str, int] = defaultdict(int)
        for sample in group:
            statuses[str(sample.status)] += 1
        errors = sum(1 for s in group if failed(s))
        p95 = percentile([s.latency for s in group], 0.95)
        rows.append({"phase": name, "requests": len(group), "errors": errors,
                     "error_rate": round(errors / len(group), 4) if group else 0.0,
                     "p95_ms": round(p95 * 1000, 1) if p95 is not None else None,
                     "status_500": statuses.get("500", 0),
                     "status_503_with_retry_after": sum(1 for s in group if s.status == 503 and s.retry_after),
                     "statuses": dict(sorted(statuses.items()))})
    return rows


def series(samples: Sequence[Sample], duration: float) -> tuple[list[float], list[float], list[float]]:
    buckets = int(duration // BUCKET) + 1
    ok = [0] * buckets
    bad = [0] * buckets
    for sample in samples:
        index = min(buckets - 1, max(0, int(sample.at // BUCKET)))
        (bad if failed(sample) else ok)[index] += 1
    return [i * BUCKET for i in range(buckets)], [n / BUCKET for n in ok], [n / BUCKET for n in bad]


def write_chart(path: Path, samples: Sequence[Sample], faults: Sequence[Fault], duration: float) -> None:
    import pygal

    times, ok, bad = series(samples, duration)
    chart = pygal.Line(title="Tenet soak: answers per second through the load balancer", x_title="seconds",
                       y_title="answers/s", show_dots=False, x_label_rotation=45, show_minor_x_labels=False,
                       height=420, width=1000)
    marks = {int(f.at // BUCKET): f.kind for f in faults}
    chart.x_labels = [f"{t:.0f}{' ' + marks[i] if i in marks else ''}" for i, t in enumerate(times)]
    chart.x_labels_major = [label for i, label in enumerate(chart.x_labels) if i in marks]
    chart.add("2xx-4xx", ok)
    chart.add("errors (5xx, no answer)", bad)
    path.write_text(chart.render(is_unicode=True))


def write(out: Path, result: dict[str, Any], samples: Sequence[Sample], faults: Sequence[Fault],
          duration: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "samples.csv").open("w", newline="") as handle:  # every answer, for a closer look at a phase
        writer = csv.writer(handle)
        writer.writerow(["at_s", "op", "status", "latency_ms", "retry_after"])
        writer.writerows([f"{s.at:.3f}", s.op, s.status, f"{s.latency * 1000:.1f}", int(s.retry_after)]
                         for s in samples)
    (out / "report.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str))
    write_chart(out / "throughput.svg", samples, faults, duration)
    (out / "report.md").write_text(markdown(result))


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Tenet soak: {'PASS' if result['passed'] else 'FAIL'}", "",
             f"{result['duration_s']:.0f} s of load, {result['users']} virtual users, started {result['started']}.",
             "Topology: " + result["topology"], "", "## Checks", "", "| check | result | detail |", "|---|---|---|"]
    for check in result["checks"]:
        lines.append(f"| {check['name']} | {'ok' if check['ok'] else '**FAIL**'} | {check['detail']} |")
    lines += ["", "## Faults", "", "| at (s) | fault | note |", "|---|---|---|"]
    for fault in result["faults"]:
        lines.append(f"| {fault['at']} | {fault['kind']} | {fault['note']} |")
    lines += ["", "## Phases", "", "A phase runs from its fault to the next one. Errors: 5xx answers (503 with "
              "Retry-After included) and requests with no answer; a write is retried with its Idempotency-Key.", "",
              "| phase | requests | errors | error rate | P95 ms | 500s | 503 + Retry-After |",
              "|---|---|---|---|---|---|---|"]
    for row in result["phases"]:
        lines.append(f"| {row['phase']} | {row['requests']} | {row['errors']} | {row['error_rate']:.2%} | "
                     f"{row['p95_ms']} | {row['status_500']} | {row['status_503_with_retry_after']} |")
    lines += ["", "## Processes (RSS, KiB)", "", "| process | restarts | start | end | within bound |",
              "|---|---|---|---|---|"]
    for proc in result["processes"]:
        lines.append(f"| {proc['name']} | {proc['restarts']} | {proc['rss_start_kib']} | {proc['rss_end_kib']} | "
                     f"{'yes' if proc['within_bound'] else '**no**'} |")
    lines += ["", f"RSS bound: {result['rss_bound']}.", "", "![throughput](throughput.svg)", ""]
    return "\n".join(lines)
