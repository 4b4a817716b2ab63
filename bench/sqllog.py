"""`--show-sql`: the statements PostgreSQL receives for one request to Tenet and one to the baseline.

This is how to write (and keep honest) a scenario's `baseline_sql`: the two listings should match,
except for what Tenet's layers add on purpose (SQLAlchemy's pool pre-ping shows as `statement: ;`).
Embedded database only: it reads the server's log file in the run's data dir.
"""

from __future__ import annotations

import sys
import time

import httpx
import psycopg

from bench.scenario import Request
from bench.services import BenchDatabase, ServiceProcess, log


def _set_log_statement(database: BenchDatabase, value: str | None) -> None:
    assert database.url is not None
    with psycopg.connect(database.url, autocommit=True) as connection:
        if value is None:
            connection.execute("ALTER SYSTEM RESET log_statement")
        else:
            connection.execute(f"ALTER SYSTEM SET log_statement = '{value}'")
        # A reload reaches the sessions already open in both pools, not only new ones.
        connection.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)  # the backends apply the reload when they next look, not at once


def show(database: BenchDatabase, requests: list[tuple[ServiceProcess, Request]]) -> None:
    """Send each request to its service and print the statements PostgreSQL logged meanwhile."""
    if database.mode != "embedded":
        log("--show-sql needs the embedded database (it reads the server's log); skipped")
        return
    server_log = database.pgdata / "log"
    _set_log_statement(database, "all")
    try:
        for service, request in requests:
            start = server_log.stat().st_size
            httpx.request(request.method, service.base_url + request.path, headers=request.headers,
                          content=request.body, timeout=30.0)
            time.sleep(0.3)  # let the server flush its log
            with server_log.open("rb") as f:
                f.seek(start)
                text = f.read().decode("utf-8", errors="replace")
            print(f"--- SQL of one {request.method} {request.path} to {service.name} ---\n{text.rstrip()}\n",
                  file=sys.stderr)
    finally:
        _set_log_statement(database, None)
