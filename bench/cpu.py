"""CPU time the service and PostgreSQL spend during a measured interval, read from /proc (Linux).

Per process, /proc/<pid>/stat holds utime and stime (its own CPU) and cutime and cstime (the CPU of its
children that exited and were waited for). A tree's CPU is the sum of all four over its processes, so a
process that exits during the interval (a PostgreSQL backend of a closed overflow connection) still
counts: its CPU moves into its parent's cutime/cstime when the parent reaps it.

- The service: the process the harness started (`tenet serve` or the baseline's uvicorn, both the
  supervisor of their worker processes) and every descendant.
- PostgreSQL, embedded database: the whole server, the postmaster (from `postmaster.pid`) and every
  process it forked (backends, WAL writer, checkpointer, I/O workers, autovacuum). What the server does
  when nobody asks anything is measured for a second before each side's load and subtracted.
- PostgreSQL, DATABASE_URL: the backends connected to the bench database (`pg_stat_activity`), when they
  run on this machine; a backend that exits during the interval is missed. None otherwise.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.services import BenchDatabase

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
IDLE_SECONDS = 1.0


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks of the process and of its reaped children), for every process."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # Field 2, the command name, is in parentheses and may hold spaces: split after the last ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[0] is field 3 (state); ppid is field 4; utime, stime, cutime, cstime are fields 14-17.
        found[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    return found


def _tree_ticks(processes: dict[int, tuple[int, int]], root: int) -> int:
    children = defaultdict(list)
    for pid, (parent, _) in processes.items():
        children[parent].append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if pid in processes:
            total += processes[pid][1]
            stack.extend(children[pid])
    return total


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    service_s: float
    postgresql_s: float | None


class CpuMeter:
    """Samples the CPU seconds used so far by one service's process tree and by PostgreSQL."""

    def __init__(self, service_pid: int, database: BenchDatabase) -> None:
        self.service_pid = service_pid
        self.database = database

    def _postgresql_ticks(self, processes: dict[int, tuple[int, int]]) -> int | None:
        if self.database.mode == "embedded":
            postmaster = int((self.database.pgdata / "postmaster.pid").read_text().split()[0])
            return _tree_ticks(processes, postmaster)
        assert self.database.url is not None
        with psycopg.connect(self.database.url, autocommit=True) as connection:
            pids = [pid for (pid,) in connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]
        local = [pid for pid in pids if pid in processes and _command(pid) == "postgres"]
        return sum(processes[pid][1] for pid in local) if local else None

    def sample(self) -> Sample:
        processes = _processes()
        postgresql = self._postgresql_ticks(processes)
        return Sample(at=time.monotonic(), service_s=_tree_ticks(processes, self.service_pid) / CLOCK_TICKS,
                      postgresql_s=None if postgresql is None else postgresql / CLOCK_TICKS)

    def postgresql_idle(self) -> float:
        """CPU seconds per second PostgreSQL uses with no load on it (background work), over IDLE_SECONDS."""
        start = self.sample()
        time.sleep(IDLE_SECONDS)
        end = self.sample()
        if start.postgresql_s is None or end.postgresql_s is None:
            return 0.0
        return max(0.0, (end.postgresql_s - start.postgresql_s) / (end.at - start.at))


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def usage(start: Sample, end: Sample, *, requests: int, postgresql_idle: float) -> dict[str, float | None]:
    """CPU between two samples, in seconds and in milliseconds per completed request."""
    interval = end.at - start.at
    service = end.service_s - start.service_s
    postgresql = None
    if start.postgresql_s is not None and end.postgresql_s is not None:
        postgresql = max(0.0, end.postgresql_s - start.postgresql_s - postgresql_idle * interval)

    def per_request(seconds: float | None) -> float | None:
        return round(seconds * 1000 / requests, 3) if seconds is not None and requests else None

    return {
        "interval_s": round(interval, 3),
        "service_s": round(service, 2),
        "postgresql_s": None if postgresql is None else round(postgresql, 2),
        "postgresql_idle_s_per_s": round(postgresql_idle, 4),
        "service_ms_per_request": per_request(service),
        "postgresql_ms_per_request": per_request(postgresql),
    }
