"""Tenet behind a real PgBouncer (Debian's 1.18) in transaction pooling mode, in front of the test server.

Transaction mode hands each transaction of a client connection to whichever server connection is free. PgBouncer
1.18 does not carry protocol-level prepared statements across, so psycopg's own preparation (after a statement's
fifth run on a connection) breaks: the next transaction lands on a server connection that never saw the statement.
TENET_DATABASE_PGBOUNCER turns server-side preparation off everywhere (units of work, the read path, procrastinate,
migrations); what lives in a server session (the worker's LISTEN, its session advisory locks) takes
TENET_DATABASE_DIRECT_URL. The first test shows the failure the setting prevents, with Tenet's own engine factory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ops.cluster import PgBouncer, ensure_pgbouncer, running_pgbouncer
from tenet.app import create_app
from tenet.db.database import Database, make_engine
from tenet.iam.permissions import Role
from tenet.kernel.jobs import JobRuntime, JobScope, JobSpec, execute
from tenet.meetings import checkin, service
from tenet.meetings.codes import CheckInCodes
from tenet.worker import build_job_app
from tests.conftest import TEST_SECRET, test_settings
from tests.reservations.conftest import ReservationApi, body, item, make_world
from tests.support.api import Api
from tests.support.cli import run_cli
from tests.support.invariants import rules_hold
from tests.support.live import LiveProcess, service_env
from tests.support.outcomes import outcome
from tests.support.users import PASSWORD, UserFactory

CODES = CheckInCodes(TEST_SECRET, 30)
SERVER_CONNECTIONS = 4  # PgBouncer's pool per database: what may be in a transaction at once
REPEATS = 12  # more than psycopg's prepare_threshold (5): without the setting the statements would be prepared


@pytest.fixture(scope="module")
def direct_url(migrated_database) -> str:
    """The module's own database on the test server, migrated: what TENET_DATABASE_DIRECT_URL names."""
    url = migrated_database("pgbouncer")
    return url


@pytest.fixture(scope="module")
def pgbouncer(direct_url: str) -> Iterator[PgBouncer]:
    if ensure_pgbouncer() is None:
        pytest.skip("PgBouncer is not installed and cannot be here (make pgbouncer: apt-get install pgbouncer as root)")
    # Four server connections for up to a dozen client connections: transactions hop between them.
    with running_pgbouncer(direct_url, pool_size=SERVER_CONNECTIONS) as bouncer:
        yield bouncer


def bounced_settings(pgbouncer: PgBouncer, direct_url: str, tmp_path, **overrides: object):
    return test_settings(data_dir=tmp_path, database_url=pgbouncer.url, database_pgbouncer=True,
                         database_direct_url=direct_url, **overrides)


@pytest.fixture
async def bounced(pgbouncer, direct_url, tmp_path, clock) -> AsyncIterator[tuple[object, Database]]:
    """The application on a Database built from the settings, every connection through PgBouncer."""
    settings = bounced_settings(pgbouncer, direct_url, tmp_path)
    db = Database.from_settings(settings, pgbouncer.url, pool_size=6, max_overflow=0, read_pool_size=6)
    try:
        yield create_app(settings, database=db, clock=clock, run_background_tasks=False), db
    finally:
        await db.dispose()


def _advisory_holders(direct_url: str) -> list[str]:
    with psycopg.connect(direct_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchall()
    return sorted(name for (name,) in rows)


async def _hop_server_connection(engine_url: str, pgbouncer: PgBouncer, *, prepare: bool) -> None:
    """One client connection runs a statement often enough for psycopg to prepare it; then another client holds
    the only idle server connection in a transaction, and the first client's next transaction gets a new one."""
    engine = make_engine(engine_url, pool_size=1, max_overflow=0, prepare=prepare)
    try:
        async with engine.connect() as connection:
            for _ in range(REPEATS):
                await connection.execute(text("SELECT count(*) FROM iam.user_account WHERE email = :e"), {"e": "x"})
                await connection.commit()
            with psycopg.connect(pgbouncer.url) as holder:
                holder.execute("SELECT 1")  # BEGIN ... : the server connection the first client used, held
                await connection.execute(text("SELECT count(*) FROM iam.user_account WHERE email = :e"), {"e": "x"})
                await connection.commit()
    finally:
        await engine.dispose()


async def test_without_the_setting_prepared_statements_break_behind_pgbouncer(pgbouncer):
    with pytest.raises(DBAPIError) as failure:
        await _hop_server_connection(pgbouncer.url, pgbouncer, prepare=True)
    assert getattr(failure.value.orig, "sqlstate", None) in ("26000", "42P05"), failure.value  # does not exist / exists
    await _hop_server_connection(pgbouncer.url, pgbouncer, prepare=False)  # the setting's engine: no failure


async def test_the_flows_run_behind_pgbouncer_in_transaction_mode(bounced, pgbouncer, clock, monkeypatch):
    app, db = bounced
    users = UserFactory(app, db, clock)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        api = Api(client, app, clock)
        # Sign-in, many at once: the same statements many times on each pooled connection.
        person = await users.make()
        signed_in = await asyncio.gather(*(client.post("/api/v1/auth/token", data={
            "grant_type": "password", "username": person.email, "password": PASSWORD}) for _ in range(REPEATS)))
        assert [r.status_code for r in signed_in] == [200] * REPEATS, signed_in[0].text
        token = signed_in[0].json()["access_token"]
        mes = await asyncio.gather(*(client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
                                     for _ in range(REPEATS)))
        assert {r.status_code for r in mes} == {200}

        # A workspace and an invitation (the invitation's mail goes to the outbox in the same transaction).
        owner = await users.make()
        workspace = await api.ok(api.post(owner, "/api/v1/workspaces", {"name": "Pooled"}), 201)
        for n in range(REPEATS):
            await api.ok(api.post(owner, f"/api/v1/workspaces/{workspace['id']}/invitations",
                                  {"email": f"guest{n}@example.com", "role": "member"}), 201)

        # An idempotent POST: the same key twice is one workspace and one replayed answer.
        first = await client.post("/api/v1/workspaces", json={"name": "Once"},
                                  headers={**api.headers(owner), "Idempotency-Key": "pooled-1"})
        again = await client.post("/api/v1/workspaces", json={"name": "Once"},
                                  headers={**api.headers(owner), "Idempotency-Key": "pooled-1"})
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.headers.get("idempotent-replayed") == "true" and again.json() == first.json()

        # An AI ingest (SET LOCAL plan_cache_mode, a batch of statements in one transaction).
        world = await make_world(db, users, clock)
        rsv = ReservationApi(client, app, clock)
        for n in range(3):
            await rsv.ingest_ok(world.ingest1, body("H1", [item("new", cn=f"POOL{n}")]))

    # A check-in race on real parallel connections: as many scans of one user as PgBouncer has server connections
    # (each waits for the others inside its transaction) make one attendance (MA-INV-06).
    manager, user = await users.make(roles=[Role.MEETING_MANAGER]), await users.make()
    start = clock.now() + timedelta(days=1)
    async with db.unit_of_work() as session:
        meeting, _ = await service.create_meeting(
            session, principal_id=manager.id, fields={"title": "Pooled race", "start_time": start,
                                                      "end_time": start + timedelta(hours=1)},
            attendee_ids=[user.id], template_id=None, policy=service.MeetingPolicy(), now=clock.now())
    barrier = asyncio.Barrier(SERVER_CONNECTIONS)

    async def probed(request) -> None:
        await asyncio.wait_for(barrier.wait(), timeout=10)

    monkeypatch.setattr(checkin, "_probed", probed)

    async def scan(device: str):
        async with db.unit_of_work() as session:
            return await checkin.check_in_user(session, meeting_id=meeting.id, principal_id=user.id, mode="offline",
                                               device_id=device, code=CODES.offline_code(meeting.id), now=start,
                                               codes=CODES)

    results = await asyncio.gather(*(outcome(scan(f"device-{i}"), lambda r: r.already_checked_in)
                                     for i in range(SERVER_CONNECTIONS)))
    assert sorted(results) == [False] + [True] * (SERVER_CONNECTIONS - 1)
    await rules_hold(db, "MA-", now=start)

    with psycopg.connect(pgbouncer.url, autocommit=True, prepare_threshold=None) as connection:
        counts = connection.execute(
            "SELECT (SELECT count(*) FROM workspace.workspace WHERE name = 'Once'),"
            " (SELECT count(*) FROM meeting_attendance.attendances WHERE meeting_id = %s),"
            " (SELECT count(*) FROM reservation.workflow_reservation_ai_batch WHERE hotel_id = 'H1')",
            (meeting.id,)).fetchone()
    assert counts == (1, 1, 3)


async def test_a_jobs_session_lock_lives_on_the_direct_connection(bounced, direct_url, clock):
    """A job of several units of work holds a session advisory lock for its whole run: on the direct connection
    (a pooled one would lend the server session, lock included, to other clients between transactions)."""
    app, db = bounced
    runtime = JobRuntime(db=db, clock=clock, settings=app.state.settings)
    spec = JobSpec(name="test_pooled_lock", unit_of_work=False, lock="test:pooled", history=False)
    seen: dict[str, list[str]] = {}

    async def body(scope: JobScope) -> int:
        seen["holders"] = _advisory_holders(direct_url)
        for _ in range(REPEATS):
            async with scope.db.unit_of_work() as session:
                await session.execute(text("SELECT 1"))
        return 1

    assert await execute(spec, body, runtime, {}) == 1
    assert seen["holders"] == ["tenet-session"]
    assert _advisory_holders(direct_url) == []  # released, on the server session that took it


async def test_without_a_direct_url_a_session_lock_is_refused_not_leaked(pgbouncer, direct_url, tmp_path, clock):
    settings = test_settings(data_dir=tmp_path, database_url=pgbouncer.url, database_pgbouncer=True)
    db = Database.from_settings(settings, pgbouncer.url, pool_size=2, max_overflow=0)
    try:
        runtime = JobRuntime(db=db, clock=clock, settings=settings)
        spec = JobSpec(name="test_pooled_refused", unit_of_work=False, lock="test:refused", history=False)

        async def body(scope: JobScope) -> int:
            return 1

        with pytest.raises(RuntimeError, match="TENET_DATABASE_DIRECT_URL"):
            await execute(spec, body, runtime, {})
    finally:
        await db.dispose()
    assert _advisory_holders(direct_url) == []


def test_the_worker_refuses_to_start_behind_pgbouncer_without_a_direct_url(pgbouncer):
    result = run_cli("worker", env_extra={"DATABASE_URL": pgbouncer.url, "TENET_DATABASE_PGBOUNCER": "1",
                                          "TENET_SECRET_KEY": TEST_SECRET})
    assert result.returncode == 2, result.stderr
    assert "TENET_DATABASE_DIRECT_URL" in result.stderr and "LISTEN" in result.stderr


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "through-pgbouncer"])
def test_migrate_runs_behind_pgbouncer(pgbouncer, direct_url, direct):
    """`tenet migrate` takes the direct URL when there is one, and runs through PgBouncer without preparing when
    there is not."""
    env = {"DATABASE_URL": pgbouncer.url, "TENET_DATABASE_PGBOUNCER": "1", "TENET_SECRET_KEY": TEST_SECRET}
    if direct:
        env["TENET_DATABASE_DIRECT_URL"] = direct_url
    result = run_cli("migrate", env_extra=env)
    assert result.returncode == 0, result.stderr


@pytest.mark.live_server
async def test_the_worker_runs_a_locked_job_behind_pgbouncer(pgbouncer, direct_url, tmp_path):
    """`tenet worker` with its units of work through PgBouncer and procrastinate (LISTEN) plus its job locks on
    the direct URL: a deferred job with a per-key lock runs once and succeeds."""
    worker = LiveProcess(["worker", "--concurrency", "2"], log_path=tmp_path / "worker.log", env=service_env(
        DATABASE_URL=pgbouncer.url, TENET_DATABASE_PGBOUNCER="1", TENET_DATABASE_DIRECT_URL=direct_url,
        TENET_DATA_DIR=str(tmp_path))).start()
    try:
        job_app = build_job_app(direct_url)
        async with job_app.open_async():
            job_id = await job_app.configure_task(
                "reservations:reservation_migrate_card_contracts", queueing_lock="test:pooled-worker").defer_async()
        with psycopg.connect(direct_url, autocommit=True) as connection:
            deadline = time.monotonic() + 90
            while (status := connection.execute("SELECT status::text FROM procrastinate_jobs WHERE id = %s",
                                                (job_id,)).fetchone()[0]) != "succeeded":
                assert worker.process.poll() is None, f"the worker exited:\n{worker.output[-3000:]}"
                assert status not in ("failed", "aborted"), worker.output[-3000:]
                assert time.monotonic() < deadline, f"job {status} after 90 s:\n{worker.output[-3000:]}"
                await asyncio.sleep(0.2)
            run = connection.execute(
                "SELECT status, lock_key FROM kernel.job_run WHERE procrastinate_job_id = %s", (job_id,)).fetchall()
            listening = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
            ).fetchone()[0]
    finally:
        code = worker.stop()
    assert run == [("succeeded", "reservation.card_contracts")]
    assert listening >= 1, "procrastinate's LISTEN runs on a connection of its own to the server"
    assert code == 0, worker.output[-3000:]
    assert "prepared statement" not in worker.output
