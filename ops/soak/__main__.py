"""python -m ops.soak [--duration 600] [--out var/soak]: build the topology, load it, inject the faults, check,
report; exit 1 when a check failed (something acknowledged lost, a mail never sent, invariants broken, a 500,
connections or memory not back within bounds), 2 when the topology could not be built."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from ops.soak import checks, faults, report
from ops.soak.load import Record, run_load
from ops.soak.topology import DATABASE, Managed, Topology

RSS_FACTOR = 1.5
RSS_SLACK_KIB = 96 * 1024
RSS_SETTLED_AFTER = 15.0  # seconds after a process became ready before its "start" RSS is taken
DRAIN_TIMEOUT = 120.0  # seconds the outbox may take to empty once the load stops
SETTLE = 5.0
TAIL = 10.0  # seconds of load after the last fault has healed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (120: the short soak)")
    parser.add_argument("--users", type=int, default=8, help="virtual users")
    parser.add_argument("--think", type=float, default=0.4, help="mean pause of a virtual user between requests")
    parser.add_argument("--out", type=Path, default=Path("var/soak"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "logs"
    run_dir.mkdir(exist_ok=True)
    topology = Topology(run_dir)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        print("soak: building the topology", flush=True)
        try:
            topology.build()
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"soak: could not build the topology: {exc}", file=sys.stderr)
            return 2
        result = asyncio.run(_soak(topology, args))
        result["started"] = started
        report.write(args.out, result, result.pop("_samples"), result.pop("_faults"), result["duration_s"])
        print(report.markdown(result).split("## Faults")[0], flush=True)
        print(f"soak: report in {args.out}/report.md", flush=True)
        return 0 if result["passed"] else 1
    finally:
        topology.close()


async def _soak(topology: Topology, args: argparse.Namespace) -> dict[str, Any]:
    record = Record()
    plan = faults.schedule(args.duration)
    stop = asyncio.Event()
    sampling = threading.Event()
    baseline: dict[str, dict[str, int]] = {}

    def sample_rss() -> None:
        while not sampling.wait(2.0):
            for process in topology.processes():
                process.sample_rss()

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    notes: list[dict[str, Any]] = []

    injected: list[faults.Fault] = []  # when each fault actually began (the schedule's times are the earliest)

    async def injector() -> None:
        await loaded.wait()
        await asyncio.sleep(10)
        baseline["connections"] = await asyncio.to_thread(topology.server_connections)
        for n, fault in enumerate(plan):
            delay = record.started + fault.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            began = round(time.monotonic() - record.started, 1)
            print(f"soak: {began:6.1f} s  {fault.kind}", flush=True)
            injected.append(faults.Fault(began, fault.kind))
            note = await asyncio.to_thread(faults.inject, topology, fault, n)
            took = time.monotonic() - record.started - began
            notes.append({"at": began, "kind": fault.kind, "note": f"{note}; whole again after {took:.0f} s"})
        # The load runs its full duration, and on for TAIL seconds after the last fault has healed.
        await asyncio.sleep(max(TAIL, record.started + args.duration - time.monotonic()))
        stop.set()

    print(f"soak: load for {args.duration:.0f} s, {len(plan)} faults", flush=True)
    loaded = asyncio.Event()
    load = asyncio.create_task(run_load(topology.base_url, users=args.users, think=args.think, record=record,
                                        stop=stop, loaded=loaded))
    await asyncio.gather(load, injector())
    plan = injected
    print("soak: load done; waiting for the outbox to drain", flush=True)
    drained = await asyncio.to_thread(_drain_outbox, topology)
    await asyncio.sleep(SETTLE)
    sampling.set()
    sampler.join(5)
    return _checks(topology, record, plan, notes, baseline.get("connections", {}), drained, args)


def _drain_outbox(topology: Topology) -> bool:
    assert topology.cluster is not None
    deadline = time.monotonic() + DRAIN_TIMEOUT
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            row = connection.execute("SELECT count(*) FROM kernel.email_outbox "
                                     "WHERE status = 'pending' AND next_attempt_at <= now()").fetchone()
            if row is not None and row[0] == 0:
                return True
            time.sleep(0.5)
    return False


def _rss(process: Managed) -> dict[str, Any]:
    assert process.process is not None
    current = [s for s in process.rss_samples if s[1] == process.process.pid]
    if not current:
        return {"name": process.name, "restarts": process.restarts, "rss_start_kib": None, "rss_end_kib": None,
                "within_bound": True}
    ready = process.ready_at if process.ready_at is not None else process.started_at
    settled = [s for s in current if s[0] - ready >= RSS_SETTLED_AFTER] or current
    start, end = settled[0][2], current[-1][2]
    return {"name": process.name, "restarts": process.restarts, "rss_start_kib": start, "rss_end_kib": end,
            "within_bound": checks.rss_within(start, end, factor=RSS_FACTOR, slack_kib=RSS_SLACK_KIB)}


def _checks(topology: Topology, record: Record, plan: list[faults.Fault], notes: list[dict[str, Any]],
            connections_start: dict[str, int], drained: bool, args: argparse.Namespace) -> dict[str, Any]:
    assert topology.cluster is not None and topology.smtp is not None
    results: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        results.append({"name": name, "ok": ok, "detail": detail})

    direct = topology.cluster.primary.url(DATABASE)
    with psycopg.connect(direct, autocommit=True) as connection:
        lost = checks.missing_writes(connection, record.acks)
    kinds = sorted({a.kind for a in record.acks})
    check("acknowledged writes present", not lost,
          f"{len(record.acks)} acknowledged ("
          f"{', '.join(f'{k}: {sum(a.kind == k for a in record.acks)}' for k in kinds)}),"
          f" {len(lost)} missing{': ' + ', '.join(f'{a.kind} {a.id}' for a in lost[:5]) if lost else ''};"
          f" {len(record.abandoned)} writes never acknowledged (given up), {record.replayed} answers replayed")

    invariants = subprocess.run([sys.executable, "-m", "tenet", "invariants", "check", "--database-url", direct],
                                env=topology.env("127.0.0.1", "invariants"), capture_output=True, text=True,
                                timeout=300)
    said = " ".join((invariants.stdout + invariants.stderr).split())
    check("tenet invariants check", invariants.returncode == 0, said.replace("|", "/")[:300])

    mail = checks.check_mail(record.invited, [checks.Mail(to, mid) for _, to, mid in topology.smtp.received])
    check("mail sent at least once, duplicates share Message-ID", mail.ok and drained,
          f"{mail.expected} invitations, {mail.received} deliveries, {mail.duplicates} duplicate deliveries, "
          f"{len(mail.never_received)} never received, {len(mail.split)} with different Message-IDs"
          f"{'' if drained else '; the outbox did not drain'}")

    with psycopg.connect(direct, autocommit=True) as connection:
        outbox = dict(connection.execute("SELECT status || CASE WHEN status = 'pending' AND next_attempt_at > now() "
                                         "THEN ' (not yet due)' ELSE '' END, count(*) FROM kernel.email_outbox "
                                         "GROUP BY 1").fetchall())
    results[-1]["detail"] += f"; outbox: {outbox}"

    connections_end = topology.server_connections()
    start_total, end_total = sum(connections_start.values()), sum(connections_end.values())
    check("server connections back to their start", end_total <= start_total,
          f"primary client connections: start {start_total} {connections_start}, end {end_total} {connections_end}")

    processes = [_rss(p) for p in topology.processes()]
    check(f"RSS within {RSS_FACTOR}x start + {RSS_SLACK_KIB // 1024} MiB", all(p["within_bound"] for p in processes),
          ", ".join(f"{p['name']}: {p['rss_start_kib']}→{p['rss_end_kib']} KiB" for p in processes))

    rows = report.phases(record.samples, plan)
    five_hundreds = sum(r["status_500"] for r in rows)
    check("no 500 answers (an outage is 503 with Retry-After)", five_hundreds == 0, f"{five_hundreds} answers 500")

    return {
        "passed": all(r["ok"] for r in results),
        "duration_s": record.samples[-1].at if record.samples else 0.0, "users": args.users,
        "topology": (f"{len(topology.apis)} API hosts (tenet serve, each in its own network namespace), "
                     f"{len(topology.workers)} workers, nginx, PgBouncer (transaction mode, pool "
                     f"{topology.pool_size}), PostgreSQL primary + streaming replica, aiosmtpd"),
        "checks": results, "faults": notes, "phases": rows, "processes": processes,
        "rss_bound": f"end <= {RSS_FACTOR} x start + {RSS_SLACK_KIB // 1024} MiB, start taken "
                     f"{RSS_SETTLED_AFTER:.0f} s after each process became ready (a restarted one: after its restart)",
        "health_changes": [{"host": h, "ready": ok} for _, h, ok in topology.health_changes],
        "lost": [{"kind": a.kind, "id": a.id} for a in lost],
        "_samples": record.samples, "_faults": plan,
    }


if __name__ == "__main__":
    sys.exit(main())
