"""What PostgreSQL's backends were doing while a side was measured: sampled from pg_stat_activity.

A tail has a cause, and the usual suspects leave traces here: lock waits (`Lock`: a row or advisory lock another
transaction holds), contention inside the server (`LWLock`, e.g. WAL insertion or a buffer mapping), I/O (`IO`,
`IPC`), or backends with nothing to do because the service has not sent the next statement (`Client`: the
backend waits for the client inside a transaction; `idle`: between transactions). Every SAMPLE_SECONDS a thread
reads the state of every client backend of the bench database (its own connection excluded) and counts it under
one category; the shares of those counts over the measured interval are reported per side.

The query is cheap (pg_stat_activity is a view over shared memory) and runs at the same rate for both sides, so
it costs both the same.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import psycopg

SAMPLE_SECONDS = 0.02
_QUERY = """
    SELECT state, wait_event_type, wait_event FROM pg_stat_activity
     WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
"""
# The order the report shows them in.
CATEGORIES = ("running", "Lock", "LWLock", "IO", "IPC", "Client (in transaction)", "idle", "other")


def category(state: str | None, wait_type: str | None) -> str:
    """One backend's sample, by what it was doing."""
    if state == "idle":
        return "idle"
    if wait_type is None:
        return "running" if state == "active" else "other"
    if wait_type == "Client":
        return "Client (in transaction)"
    return wait_type if wait_type in CATEGORIES else "other"


@dataclass
class WaitSampler:
    """Samples the database's backends in a thread from `start()` to `stop()`; `shares()` then answers each
    category's share of the backend samples taken, and `lock_events()` which locks were waited for."""

    conninfo: str
    counts: Counter[str] = field(default_factory=Counter)
    locks: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bench-waits", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        try:
            with psycopg.connect(self.conninfo, autocommit=True, application_name="tenet-bench-waits") as conn:
                while not self._stop.wait(SAMPLE_SECONDS):
                    for state, wait_type, wait_event in conn.execute(_QUERY).fetchall():
                        found = category(state, wait_type)
                        self.counts[found] += 1
                        if found in ("Lock", "LWLock"):
                            self.locks[f"{wait_type}:{wait_event}"] += 1
        except psycopg.Error:
            pass  # the database went away: the samples taken so far stand

    def shares(self) -> dict[str, float]:
        total = sum(self.counts.values())
        return {name: round(self.counts[name] / total, 4) if total else 0.0 for name in CATEGORIES}

    def lock_events(self, most: int = 4) -> dict[str, int]:
        return dict(self.locks.most_common(most))
