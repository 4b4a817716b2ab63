"""Background jobs on procrastinate (PostgreSQL-backed: periodic tasks, retries, locks, many workers).

Each domain defines a `procrastinate.Blueprint` in its `tasks.py`; `tenet.worker` assembles them. A task
body is a boundary: it opens its own unit of work through `runtime().db` and commits once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from tenet.db.database import Database
from tenet.kernel.clock import Clock
from tenet.settings import Settings


@dataclass
class JobRuntime:
    settings: Settings
    db: Database
    clock: Clock


_runtime: JobRuntime | None = None


def install_runtime(runtime: JobRuntime | None) -> None:
    global _runtime
    _runtime = runtime


def runtime() -> JobRuntime:
    if _runtime is None:
        raise RuntimeError("no job runtime: tasks run inside `tenet worker` (or a test that installs one)")
    return _runtime


async def count_jobs(connection: AsyncConnection) -> dict[tuple[str, str], int]:
    """Background jobs per (queue, status), read from procrastinate's table (for /metrics)."""
    rows = await connection.execute(text(
        "SELECT queue_name, status::text, count(*) FROM procrastinate_jobs GROUP BY 1, 2"))
    return {(queue, status): count for queue, status, count in rows}
