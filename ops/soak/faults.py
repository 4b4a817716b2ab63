"""The faults the soak injects, each blocking until the topology is whole again (run in a thread while the load
runs). Each returns a note for the report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psycopg

from ops.soak.topology import DATABASE, Managed, Topology

API_DOWN = 3.0  # seconds a killed API process stays down before it is restarted
PRIMARY_DOWN = 6.0  # seconds the primary is stopped
REPLICA_DOWN = 12.0  # seconds the replica is stopped


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the load began
    kind: str


@dataclass(frozen=True)
class Outcome:
    """What a fault did: a note for the report and, for a worker killed mid-job, the automation runs it was
    executing (each must still run exactly once, on another worker)."""

    note: str
    runs_cut: list[str] = field(default_factory=list)


MID_DRAIN_TIMEOUT = 75.0  # seconds to wait for a worker executing automation runs (a burst falls every minute)

KINDS = ("api-kill", "worker-kill", "pgbouncer-restart", "primary-restart", "replica-stop")


def schedule(duration: float) -> list[Fault]:
    """Every kind in turn from 15 s in, spread evenly; at 2 minutes that is one of each kind."""
    rounds = max(1, int(duration // 120))
    gap = (duration - 25) / (rounds * len(KINDS))
    return [Fault(round(15 + i * gap, 1), KINDS[i % len(KINDS)]) for i in range(rounds * len(KINDS))]


def inject(topology: Topology, fault: Fault, n: int) -> Outcome:
    if fault.kind == "api-kill":
        index = n % len(topology.apis)
        api, ns = topology.apis[index], topology.namespaces[index]
        api.kill()
        time.sleep(API_DOWN)
        api.restart()
        topology.wait_ready(ns, api)
        return Outcome(f"{api.name} SIGKILLed, restarted after {API_DOWN:.0f} s")
    if fault.kind == "worker-kill":
        return _kill_a_worker(topology, n)
    if fault.kind == "pgbouncer-restart":
        assert topology.bouncer is not None
        topology.bouncer.halt()
        topology.bouncer.start()
        return Outcome("PgBouncer stopped and started on the same port")
    if fault.kind == "primary-restart":
        assert topology.cluster is not None
        topology.cluster.primary.stop("fast")
        time.sleep(PRIMARY_DOWN)
        topology.cluster.primary.start()
        return Outcome(f"primary stopped (fast) for {PRIMARY_DOWN:.0f} s, Tenet not restarted")
    if fault.kind == "replica-stop":
        assert topology.cluster is not None
        topology.cluster.standby.stop("fast")
        time.sleep(REPLICA_DOWN)
        topology.cluster.standby.start()
        return Outcome(f"replica stopped for {REPLICA_DOWN:.0f} s")
    raise ValueError(fault.kind)


def _kill_a_worker(topology: Topology, n: int) -> Outcome:
    """SIGKILL a worker while it executes automation runs (mid-job: its drain holds them), else the next worker
    while any job runs; restart it a second later."""
    worker, runs = _wait_for_a_worker_mid_drain(topology, MID_DRAIN_TIMEOUT)
    busy = bool(runs)
    if worker is None:
        worker = topology.workers[n % len(topology.workers)]
        busy = _wait_for_running_job(topology, 10.0)
    worker.kill()
    time.sleep(1.0)
    worker.restart()
    what = f"executing {len(runs)} automation runs" if runs else ("with a job running" if busy else "idle")
    return Outcome(f"{worker.name} SIGKILLed {what}", runs_cut=runs)


def _wait_for_a_worker_mid_drain(topology: Topology, timeout: float) -> tuple[Managed | None, list[str]]:
    """The first worker seen executing automation runs (claimed_by is `host:pid:token`), and those runs."""
    assert topology.cluster is not None
    by_pid = {str(w.process.pid): w for w in topology.workers if w.process is not None}
    deadline = time.monotonic() + timeout
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            rows = connection.execute("SELECT id, split_part(claimed_by, ':', 2) FROM social.automation_runs "
                                      "WHERE status = 'running'").fetchall()
            for pid in {pid for _, pid in rows}:
                if pid in by_pid:
                    return by_pid[pid], [str(run) for run, owner in rows if owner == pid]
            time.sleep(0.02)
    return None, []


def _wait_for_running_job(topology: Topology, timeout: float) -> bool:
    """Until a job is running (procrastinate's 'doing'), so the kill lands mid-job when there is one."""
    assert topology.cluster is not None
    deadline = time.monotonic() + timeout
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            row = connection.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'").fetchone()
            if row and row[0]:
                return True
            time.sleep(0.05)
    return False
