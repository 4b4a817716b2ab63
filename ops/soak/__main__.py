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

import httpx
import psycopg

from ops.soak import checks, faults, report, world
from ops.soak.load import Record, run_load
from ops.soak.topology import DATABASE, Managed, Topology
from ops.soak.world import World

RSS_FACTOR = 1.5
RSS_SLACK_KIB = 96 * 1024
RSS_SETTLED_AFTER = 15.0  # seconds after a process became ready before its "start" RSS is taken
DRAIN_TIMEOUT = 180.0  # seconds the outbox and the automation slots may take to finish once the load stops
SETTLE = 5.0
TAIL = 10.0  # seconds of load after the last fault has healed
FAULT_GAP = 10.0  # seconds at least between a fault's healing and the next fault


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (120: the short soak)")
    parser.add_argument("--users", type=int, default=8, help="virtual users")
    parser.add_argument("--think", type=float, default=0.4, help="mean pause of a virtual user between requests")
    parser.add_argument("--automations-per-minute", type=int, default=150,
                        help="automation slots falling on each minute of the load (the workers' burst)")
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
            topology.create_admin(world.ADMIN_EMAIL, world.ADMIN_PASSWORD)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"soak: could not build the topology: {exc}", file=sys.stderr)
            return 2
        result = asyncio.run(_soak(topology, args))
        result["started"] = started
        if not result["passed"]:
            _dump_database(topology, args.out / "database.dump")
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
    runs_cut: list[str] = []  # automation runs a killed worker was executing
    made: list[World] = []

    async def injector() -> None:
        await loaded.wait()
        await asyncio.sleep(10)
        baseline["connections"] = await asyncio.to_thread(topology.server_connections)
        healed = 0.0
        for n, fault in enumerate(plan):
            # At its time, and never sooner than FAULT_GAP after the previous fault healed: each phase then
            # shows one fault and its recovery, not the tail of the one before.
            earliest = max(record.started + fault.at, healed + FAULT_GAP)
            delay = earliest - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            began = round(time.monotonic() - record.started, 1)
            print(f"soak: {began:6.1f} s  {fault.kind}", flush=True)
            injected.append(faults.Fault(began, fault.kind))
            outcome = await asyncio.to_thread(faults.inject, topology, fault, n, made[0])
            runs_cut.extend(outcome.runs_cut)
            record.uploads.extend(outcome.uploads)
            record.acks.extend(checks.Ack("attachment", u.id) for u in outcome.uploads)
            took = time.monotonic() - record.started - began
            notes.append({"at": began, "kind": fault.kind, "note": f"{outcome.note}; whole again after {took:.0f} s"})
            healed = time.monotonic()
        # The load runs its full duration, and on for TAIL seconds after the last fault has healed.
        await asyncio.sleep(max(TAIL, record.started + args.duration - time.monotonic()))
        stop.set()

    print(f"soak: load for {args.duration:.0f} s, {len(plan)} faults", flush=True)
    loaded = asyncio.Event()
    load = asyncio.create_task(run_load(topology.base_url, users=args.users, think=args.think, record=record,
                                        stop=stop, loaded=loaded, duration=args.duration,
                                        automations_per_minute=args.automations_per_minute, prepared=made.append))
    await asyncio.gather(load, injector())
    plan = injected
    slots = _due_slots(made[0])
    print(f"soak: load done; waiting for the outbox to drain and {len(slots)} automation slots to run", flush=True)
    drained = await asyncio.to_thread(_drain, topology, slots)
    await asyncio.sleep(SETTLE)
    sampling.set()
    sampler.join(5)
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as client:
        differ = await checks.downloads_differ(client, (world.ADMIN_EMAIL, world.ADMIN_PASSWORD), record.uploads)
    context = {"world": made[0], "slots": slots, "runs_cut": runs_cut, "downloads_differ": differ}
    return _checks(topology, record, plan, notes, baseline.get("connections", {}), drained, args, context)


def _dump_database(topology: Topology, path: Path) -> None:
    """A failed soak leaves the primary's database behind (`pg_restore -d <db> database.dump`) for a closer look:
    the topology itself is removed."""
    assert topology.cluster is not None
    dumped = subprocess.run([str(topology.cluster.bin_dir / "pg_dump"), "-Fc", "-f", str(path),
                             topology.cluster.primary.url(DATABASE)], capture_output=True, text=True, timeout=600)
    print(f"soak: the database is in {path}" if dumped.returncode == 0 else
          f"soak: pg_dump failed: {dumped.stderr.strip()[:300]}", flush=True)


def _due_slots(made: World) -> list[tuple[str, dt.datetime]]:
    """The automations whose slot has come by the end of the load: each must run exactly once."""
    now = dt.datetime.now(dt.UTC)
    return [(a.id, a.slot) for a in made.automations if a.slot <= now]


def _drain(topology: Topology, slots: list[tuple[str, dt.datetime]]) -> bool:
    """Until no due mail is pending and every due automation slot's run has finished (or DRAIN_TIMEOUT)."""
    assert topology.cluster is not None
    deadline = time.monotonic() + DRAIN_TIMEOUT
    jobs = [j for j, _ in slots]
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            # Due mail nobody holds. A row still claimed is a deliverer's that died after sending (its lease
            # runs 5 minutes, then it goes out again with the same Message-ID): it is reported, not waited for.
            mail = connection.execute("SELECT count(*) FROM kernel.email_outbox WHERE status = 'pending' "
                                      "AND next_attempt_at <= now() AND (claimed_until IS NULL "
                                      "OR claimed_until <= now())").fetchone()
            finished = connection.execute(
                "SELECT count(*) FROM social.automation_runs WHERE job_id = ANY(%s::uuid[]) "
                "AND status IN ('succeeded', 'failed')", (jobs,)).fetchone()
            if mail is not None and mail[0] == 0 and finished is not None and finished[0] >= len(slots):
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
            connections_start: dict[str, int], drained: bool, args: argparse.Namespace,
            context: dict[str, Any]) -> dict[str, Any]:
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
    _check_effects(direct, record, context, check)

    check("mail sent at least once, duplicates share Message-ID", mail.ok and drained,
          f"{mail.expected} invitations, {mail.received} deliveries, {mail.duplicates} duplicate deliveries, "
          f"{len(mail.never_received)} never received, {len(mail.split)} with different Message-IDs"
          f"{'' if drained else '; the outbox did not drain'}")

    with psycopg.connect(direct, autocommit=True) as connection:
        outbox: dict[str, int] = dict(connection.execute(
            "SELECT status || CASE WHEN status <> 'pending' THEN '' WHEN claimed_until > now() "
            "THEN ' (claimed: a deliverer died after sending; again after its lease)' WHEN next_attempt_at > now() "
            "THEN ' (not yet due)' ELSE '' END, count(*) FROM kernel.email_outbox GROUP BY 1").fetchall())
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


def _check_effects(direct: str, record: Record, context: dict[str, Any], check: Any) -> None:
    """Exactly once, where a retry or a killed worker could have done a thing twice or not at all."""
    made: World = context["world"]
    with psycopg.connect(direct, autocommit=True) as connection:
        slots = checks.check_slots(connection, context["slots"])
        cut = checks.check_runs_cut(connection, context["runs_cut"])
        abandoned = checks.abandoned_jobs(connection)
        extra = checks.unacknowledged_uploads(connection, [m.item_id for m in made.meetings], record.uploads)
    check("every automation slot ran once", slots.ok,
          f"{slots.expected} slots due, {slots.ran_once} ran once with one digest; missing "
          f"{slots.missing[:3]}, not succeeded {slots.not_succeeded[:3]}, effects {slots.effects_not_once[:3]}")
    check("a worker killed mid-job: its work done once by another worker", cut.ok and abandoned.ok,
          f"{len(context['runs_cut'])} automation runs cut: {cut.detail}; procrastinate jobs abandoned by a dead "
          f"worker: {abandoned.detail}")
    given_up = record.abandoned.count("upload")
    bad: list[str] = context["downloads_differ"]
    check("uploads: bytes intact through any host, none stored twice", not bad and extra <= given_up,
          f"{len(record.uploads)} acknowledged uploads downloaded and hashed, {len(bad)} differ"
          f"{': ' + ', '.join(bad[:3]) if bad else ''}; {extra} stored files no acknowledgement names "
          f"({given_up} uploads given up by the client)")


if __name__ == "__main__":
    sys.exit(main())
