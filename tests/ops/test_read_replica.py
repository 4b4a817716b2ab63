"""The read path on a real streaming hot standby (TENET_DATABASE_READ_URL), with read-your-writes.

The test makes its own cluster: a primary (initdb, wal_level=replica) and a standby made by `pg_basebackup -R`
from it, on free ports in a temporary directory. The standby's replay is paused (`pg_wal_replay_pause()`) to make
it lag on purpose, and stopped to make it disappear; what each read sees tells which server answered it: a write
the paused standby has not replayed is visible on the primary only.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client import REGISTRY

from ops.cluster import StreamingCluster, postgres_bin, streaming_cluster
from tenet.app import create_app
from tenet.db import migrate
from tenet.db.database import Database
from tenet.kernel.replica import READ_AFTER_COOKIE, READ_AFTER_HEADER, parse_lsn
from tests.conftest import test_settings
from tests.support.api import Api
from tests.support.metrics import STANDBY_SERIES, sample_names, series_used, value
from tests.support.outcomes import code
from tests.support.users import TestUser, UserFactory

DATABASE = "tenet"
METRICS_TOKEN = "replica-metrics-token-0123456789"
WAIT_LIMIT = 60.0  # seconds before a wait for a state gives up (a hung test, not a slow one)


@pytest.fixture(scope="module")
def cluster() -> Iterator[StreamingCluster]:
    if postgres_bin() is None:
        pytest.skip("no PostgreSQL server binaries here (Debian's postgresql-15 or the embedded wheel's)")
    with streaming_cluster() as cluster:
        with psycopg.connect(cluster.primary.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        migrate.upgrade(cluster.primary.url(DATABASE))
        cluster.wait_replayed(DATABASE)
        yield cluster


@pytest.fixture
def standby_state(cluster: StreamingCluster) -> Iterator[StreamingCluster]:
    """The cluster, its standby running and replaying again after the test whatever the test did to it."""
    try:
        yield cluster
    finally:
        if not cluster.standby.running():
            cluster.standby.start()
        with psycopg.connect(cluster.standby.url(DATABASE), autocommit=True) as connection:
            connection.execute("SELECT pg_wal_replay_resume()")
        cluster.wait_replayed(DATABASE)


@asynccontextmanager
async def serving(cluster: StreamingCluster, tmp_path, clock, *, max_lag: float) -> AsyncIterator[Any]:
    """The application with the standby configured, as an API process builds it from its settings."""
    settings = test_settings(data_dir=tmp_path, database_url=cluster.primary.url(DATABASE),
                             database_read_url=cluster.standby.url(DATABASE), database_read_max_lag_seconds=max_lag,
                             metrics_token=METRICS_TOKEN)
    db = Database.from_settings(settings, cluster.primary.url(DATABASE), standby=True, pool_size=4, max_overflow=0,
                                read_pool_size=4)
    try:
        yield create_app(settings, database=db, clock=clock, run_background_tasks=False)
    finally:
        await db.dispose()


def client_of(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("203.0.113.7", 50000)),
                             base_url="http://testserver")


async def wait_until(condition: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Wait for a state of the system (not a timing claim: the deadline only stops a hung test)."""
    deadline = time.monotonic() + WAIT_LIMIT
    while True:
        result = condition()
        if result if isinstance(result, bool) else await result:
            return
        assert time.monotonic() < deadline, f"still not {what} after {WAIT_LIMIT} s"
        await asyncio.sleep(0.05)


async def standby_in_use(app) -> None:
    reads = app.state.db.standby
    await reads.all("SELECT 1")  # the first read starts the monitor
    await wait_until(lambda: reads.state.usable, "using the standby")


def pause_replay(cluster: StreamingCluster) -> None:
    with psycopg.connect(cluster.standby.url(DATABASE), autocommit=True) as connection:
        connection.execute("SELECT pg_wal_replay_pause()")


async def people(app, cluster: StreamingCluster, clock) -> TestUser:
    """A user made on the primary and replayed on the standby (signing in reads the standby too)."""
    user = await UserFactory(app, app.state.db, clock).make()
    cluster.wait_replayed(DATABASE)
    return user


async def test_a_client_reads_its_own_write_at_once_while_others_read_the_lagging_standby(standby_state, tmp_path,
                                                                                           clock):
    cluster = standby_state
    async with serving(cluster, tmp_path, clock, max_lag=3600) as app:
        owner = await people(app, cluster, clock)
        await standby_in_use(app)
        pause_replay(cluster)
        async with client_of(app) as writer, client_of(app) as other:
            api, other_api = Api(writer, app, clock), Api(other, app, clock)
            created = await api.post(owner, "/api/v1/workspaces", {"name": "Read after write"})
            assert created.status_code == 201, created.text
            position = created.headers[READ_AFTER_HEADER]
            parse_lsn(position)
            assert f"{READ_AFTER_COOKIE}={position}" in created.headers["set-cookie"]
            path = f"/api/v1/workspaces/{created.json()['id']}"

            # The writer sends its position back (the header): the primary answers, the write is there.
            mine = await writer.get(path, headers={**api.headers(owner), READ_AFTER_HEADER: position})
            assert mine.status_code == 200, mine.text
            # A browser sends it back in the cookie it was given.
            browser = await other.get(path, headers={**api.headers(owner), "Cookie": f"{READ_AFTER_COOKIE}={position}"})
            assert browser.status_code == 200, browser.text
            # A read that does not need the write may use the standby, which has not replayed it yet.
            before = app.state.db.standby.routed["standby"]
            stale = await other_api.get(owner, path)
            assert stale.status_code == 404, stale.text
            assert app.state.db.standby.routed["standby"] > before  # the caller's principal, then the workspace

            # Replayed: the same position reads from the standby now.
            with psycopg.connect(cluster.standby.url(DATABASE), autocommit=True) as connection:
                connection.execute("SELECT pg_wal_replay_resume()")
            await wait_until(lambda: (app.state.db.standby.state.replay_position or 0) >= parse_lsn(position),
                             "replayed on the standby")
            before = app.state.db.standby.routed["standby"]
            replayed = await writer.get(path, headers={**api.headers(owner), READ_AFTER_HEADER: position})
            assert replayed.status_code == 200
            assert app.state.db.standby.routed["standby"] > before


async def test_every_read_goes_to_the_primary_when_the_standby_lags_past_the_bound(standby_state, tmp_path, clock):
    cluster = standby_state
    async with serving(cluster, tmp_path, clock, max_lag=1) as app:
        owner = await people(app, cluster, clock)
        await standby_in_use(app)
        pause_replay(cluster)
        async with client_of(app) as writer, client_of(app) as reader:
            api, reader_api = Api(writer, app, clock), Api(reader, app, clock)
            created = await api.post(owner, "/api/v1/workspaces", {"name": "Past the bound"})
            assert created.status_code == 201, created.text
            await wait_until(lambda: not app.state.db.standby.state.usable, "taken out of use for its lag")
            assert app.state.db.standby.state.reason == "lagging past the bound"
            before = dict(app.state.db.standby.routed)
            # No position sent: the bound alone sends it to the primary, which has the write.
            found = await reader_api.get(owner, f"/api/v1/workspaces/{created.json()['id']}")
            assert found.status_code == 200, found.text
            assert app.state.db.standby.routed["standby"] == before["standby"]
            assert app.state.db.standby.routed["primary"] > before["primary"]
            scraped = await reader.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
            assert "tenet_db_standby_in_use 0.0" in scraped.text
            lag = re.search(r"^tenet_db_standby_lag_seconds (\S+)$", scraped.text, flags=re.M)
            assert lag is not None and float(lag.group(1)) > 1


async def test_the_standby_series_the_dashboard_and_the_alerts_select_are_exported(standby_state, tmp_path, clock):
    """deploy/grafana and deploy/prometheus select these; tests/ops/test_monitoring.py checks the others, which an
    app without a standby exports too."""
    async with serving(standby_state, tmp_path, clock, max_lag=3600) as app:
        await standby_in_use(app)
        before = REGISTRY.get_sample_value("tenet_db_reads_routed_total", {"target": "standby"})
        await app.state.db.standby.all("SELECT 1")
        async with client_of(app) as client:
            scraped = (await client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})).text
    wanted = {name for name in series_used() if name.startswith(STANDBY_SERIES)}
    assert {"tenet_db_standby_in_use", "tenet_db_standby_lag_seconds", "tenet_db_reads_routed_total"} <= wanted
    assert wanted <= sample_names(scraped)
    assert value(scraped, "tenet_db_standby_in_use") == 1.0
    assert value(scraped, "tenet_db_reads_routed_total", target="standby") == before + 1


async def test_reads_move_to_the_primary_when_the_standby_stops(standby_state, tmp_path, clock):
    cluster = standby_state
    async with serving(cluster, tmp_path, clock, max_lag=3600) as app:
        owner = await people(app, cluster, clock)
        await standby_in_use(app)
        async with client_of(app) as client:
            api = Api(client, app, clock)
            listed = await api.get(owner, "/api/v1/workspaces")
            assert listed.status_code == 200
            cluster.standby.stop("immediate")
            # The reads that meet the dead standby's connections run on the primary; none answers 5xx.
            answers = [await api.get(owner, "/api/v1/workspaces") for _ in range(5)]
            answers += await asyncio.gather(*(api.get(owner, "/api/v1/auth/me") for _ in range(8)))
            assert [a.status_code for a in answers] == [200] * len(answers), [a.text for a in answers if a.is_error]
            assert not app.state.db.standby.state.usable
            # Back: the monitor's next good sample returns the reads to it.
            cluster.standby.start()
            await wait_until(lambda: app.state.db.standby.state.usable, "using the restarted standby")
            before = app.state.db.standby.routed["standby"]
            assert (await api.get(owner, "/api/v1/workspaces")).status_code == 200
            assert app.state.db.standby.routed["standby"] > before


async def test_a_primary_outage_is_a_503_with_retry_after_and_passes_without_a_restart(standby_state, tmp_path,
                                                                                       clock):
    """With a standby configured the primary's outage is what it is without one: 503 SERVICE_UNAVAILABLE with
    Retry-After for every request that needs the database (reads included), then service again once it is back."""
    cluster = standby_state
    async with serving(cluster, tmp_path, clock, max_lag=3600) as app:
        owner = await people(app, cluster, clock)
        await standby_in_use(app)
        async with client_of(app) as client:
            api = Api(client, app, clock)
            cluster.primary.stop("fast")
            try:
                # The standby monitor's next sample of the primary finds it gone.
                await wait_until(lambda: app.state.db.availability.down, "aware that the primary is down")
                down = await api.get(owner, "/api/v1/workspaces")
                assert down.status_code == 503 and code(down) == "SERVICE_UNAVAILABLE"
                assert down.headers["retry-after"]
            finally:
                cluster.primary.start()
            await wait_until(lambda: not app.state.db.availability.down, "serving again")
            assert (await api.get(owner, "/api/v1/workspaces")).status_code == 200


async def test_a_malformed_read_after_header_is_a_400_problem(standby_state, tmp_path, clock):
    async with serving(standby_state, tmp_path, clock, max_lag=3600) as app, client_of(app) as client:
        answer = await client.get("/api/v1/workspaces", headers={READ_AFTER_HEADER: "yesterday"})
        assert answer.status_code == 400 and code(answer) == "BAD_REQUEST"
        assert answer.headers["content-type"].startswith("application/problem+json")
        # A cookie the browser cannot mend is ignored rather than refused.
        ignored = await client.get("/healthz", headers={"Cookie": f"{READ_AFTER_COOKIE}=garbage"})
        assert ignored.status_code == 200


@pytest.mark.live_server
def test_tenet_serve_behind_pgbouncer_with_a_standby_from_its_environment(standby_state, tmp_path):
    """The whole chain as processes: `tenet serve` (2 workers) with DATABASE_URL through PgBouncer (transaction
    mode) to the primary and TENET_DATABASE_READ_URL on the standby, configured by the environment alone."""
    from ops.cluster import ensure_pgbouncer, running_pgbouncer
    from tests.support.cli import run_cli
    from tests.support.live import LiveServer, service_env

    if ensure_pgbouncer() is None:
        pytest.skip("PgBouncer is not installed and cannot be here (make pgbouncer: apt-get install pgbouncer)")
    cluster = standby_state
    with running_pgbouncer(cluster.primary.url(DATABASE), pool_size=4) as bouncer:
        env = {"DATABASE_URL": bouncer.url, "TENET_DATABASE_PGBOUNCER": "1",
               "TENET_DATABASE_DIRECT_URL": cluster.primary.url(DATABASE),
               "TENET_DATABASE_READ_URL": cluster.standby.url(DATABASE)}
        made = run_cli("users", "create-admin", "--email", "chain@example.com", "--password", "a chain password",
                       env_extra={**service_env(**env)})
        assert made.returncode == 0, made.stderr
        cluster.wait_replayed(DATABASE)
        server = LiveServer(env=service_env(TENET_DATA_DIR=str(tmp_path), **env), log_path=tmp_path / "serve.log",
                            workers=2).start()
        try:
            server.wait_ready()
            with httpx.Client(base_url=server.url) as client:
                token = client.post("/api/v1/auth/token", data={
                    "grant_type": "password", "username": "chain@example.com", "password": "a chain password"})
                assert token.status_code == 200, token.text
                bearer = {"Authorization": f"Bearer {token.json()['access_token']}"}
                pause_replay(cluster)
                created = client.post("/api/v1/workspaces", json={"name": "Whole chain"}, headers=bearer)
                assert created.status_code == 201, created.text
                position = created.headers[READ_AFTER_HEADER]
                path = f"/api/v1/workspaces/{created.json()['id']}"
                # Both API processes honour the position (the client's cookie jar carries it too, so drop it).
                client.cookies.clear()
                answers = [client.get(path, headers={**bearer, READ_AFTER_HEADER: position}) for _ in range(6)]
                assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
        finally:
            server.stop()
    assert "prepared statement" not in server.output and "Traceback" not in server.output, server.output[-3000:]
