"""Test databases and applications.

Each pytest-xdist worker gets its own database on one server, built by `alembic upgrade head`: the
embedded PostgreSQL under var/test-pgdata by default, or the server of DATABASE_URL when set.
Ordinary tests run inside one transaction that is rolled back (`db`); tests that need committed data
and real parallel connections use `committed_db`, which empties the tables afterwards.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tenet.app import create_app
from tenet.db import migrate
from tenet.db.database import Database, make_engine
from tenet.db.embedded import database_url as url_for_database
from tenet.db.embedded import drop_database, ensure_database, start_embedded_server
from tenet.domains import load_all, schemas
from tenet.kernel.clock import FrozenClock
from tenet.kernel.jobs import JobRuntime
from tenet.settings import Settings
from tests.support.users import UserFactory

ROOT = Path(__file__).resolve().parent.parent
load_all()  # the composition root: every domain's tables, rules, events, as every boundary does
APP_SCHEMAS = schemas()
TEST_SECRET = "test-secret-key-that-is-long-enough-for-hs256-0123456789"
# Tables filled by migrations (seed data); never emptied between tests.
SEED_TABLES = {"iam.role", "iam.permission", "iam.role_permission", "meeting_attendance.outlook_policy"}


def test_settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        "secret_key": TEST_SECRET,
        "password_hash_time_cost": 1,
        "password_hash_memory_kib": 1024,
        "log_format": "console",
        "log_level": "WARNING",
        "registration_limit": "1000/hour",
        "login_failure_limit": "1000/15min",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


test_settings.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture(scope="session")
def server_url() -> str:
    """A URL on the test server with rights to create databases."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return start_embedded_server(ROOT / "var" / "test-pgdata")


@pytest.fixture(scope="session")
def run_id() -> str:
    """Names this run's databases, so two test runs on one server (two engineers, CI) never collide."""
    return (os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex)[:8]


def _migrated_database(server_url: str, name: str) -> Iterator[str]:
    """The database `name` on the test server, migrated to head; dropped when the fixture ends."""
    url = ensure_database(server_url, name)
    migrate.upgrade(url)
    yield url
    drop_database(server_url, name)


@pytest.fixture(scope="session")
def database_url(server_url: str, worker_id: str, run_id: str):
    """This worker's own database, migrated to head; dropped when the session ends."""
    yield from _migrated_database(server_url, f"tenet_test_{run_id}_{worker_id}")


@pytest.fixture(scope="session")
def scratch_database(server_url: str, worker_id: str, run_id: str):
    """A factory of empty databases (migration tests); each is dropped at the end of the session."""
    made: list[str] = []

    def make(suffix: str) -> str:
        name = f"tenet_scratch_{run_id}_{worker_id}_{suffix}"
        drop_database(server_url, name)
        made.append(name)
        return ensure_database(server_url, name)

    yield make
    for name in made:
        drop_database(server_url, name)


@pytest.fixture(scope="session")
def migrated_database(server_url: str, worker_id: str, run_id: str):
    """A factory of fresh databases at head, for tests whose tools commit (CLIs, cut-over runs, live servers).
    Each is a copy of one migrated template of this worker (CREATE DATABASE ... TEMPLATE): a fraction of a
    second, where running the migration chain again costs seconds. Migrations themselves are tested on empty
    databases (tests/db, `scratch_database`). Every copy and the template are dropped at the end."""
    template = f"tenet_template_{run_id}_{worker_id}"
    made: list[str] = []

    def make(suffix: str) -> str:
        if not made:  # the template, on first use: the migration chain runs once per worker
            drop_database(server_url, template)
            migrate.upgrade(ensure_database(server_url, template))
            made.append(template)
        name = f"tenet_scratch_{run_id}_{worker_id}_{suffix}"
        drop_database(server_url, name)
        made.append(name)
        return ensure_database(server_url, name, template=template)

    yield make
    for name in reversed(made):
        drop_database(server_url, name)


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url, pool_size=12, max_overflow=4)
    yield engine
    await engine.dispose()


@pytest.fixture
async def db(engine: AsyncEngine) -> AsyncIterator[Database]:
    """A Database whose every unit of work is a savepoint of one transaction rolled back at the end."""
    async with engine.connect() as connection:
        transaction = await connection.begin()
        yield Database(engine, bind=connection)
        await transaction.rollback()


async def _empty_tables(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        rows = await connection.execute(text(
            "SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname = ANY(:schemas)"
        ), {"schemas": list(APP_SCHEMAS)})
        tables = [t for (t,) in rows if t not in SEED_TABLES]
        tables += ["public.procrastinate_jobs", "public.procrastinate_periodic_defers",
                   "public.procrastinate_events", "public.procrastinate_workers"]
        # The audit log refuses TRUNCATE by trigger (KERNEL-INV-01); the replica role skips triggers,
        # which only a superuser (the test server's) may do.
        await connection.execute(text("SET LOCAL session_replication_role = replica"))
        await connection.execute(text(f"TRUNCATE {', '.join(tables)} CASCADE"))


@pytest.fixture
async def committed_db(engine: AsyncEngine) -> AsyncIterator[Database]:
    """A Database that really commits, for races on separate connections. Emptied afterwards."""
    await _empty_tables(engine)
    # The session's engine is shared: an outage watch per test would add a listener to it each time.
    yield Database(engine, watch_outages=False)
    await _empty_tables(engine)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return test_settings(data_dir=tmp_path)


@pytest.fixture
def app(settings: Settings, db: Database, clock: FrozenClock):
    return create_app(settings, database=db, clock=clock, run_background_tasks=False)


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


@pytest.fixture
def users(app, db: Database, clock: FrozenClock) -> UserFactory:
    return UserFactory(app, db, clock)


def url_on_same_server(server_url: str, name: str) -> str:
    return url_for_database(server_url, name)


@pytest.fixture
def job_runtime(settings, db: Database, clock) -> Iterator[JobRuntime]:
    """The runtime jobs get from the worker, on the rolled-back test database (for `run_now`)."""
    yield JobRuntime(db=db, clock=clock, settings=settings)


@pytest.fixture
def smtp_server():
    """A real local SMTP server; `smtp_server.messages` holds what it received."""
    from tests.support.smtp import running_smtp_server

    yield from running_smtp_server()


@pytest.fixture(scope="session")
def live_database_url(migrated_database) -> str:
    """A database of its own for the subprocess server (committed data, dropped when the session ends)."""
    return migrated_database("live")


@pytest.fixture(scope="session")
def live_server(live_database_url: str, tmp_path_factory):
    """`tenet serve` as a real subprocess on a free port (2 API processes), shared by the session."""
    from tests.support.live import LiveServer, service_env

    data_dir = tmp_path_factory.mktemp("live")
    # Tokens live for the whole run: `live_admin_token` is signed once per session, and on a slow machine the
    # run outlasts the default 15 minutes (the fuzz modules that ran last then met 401s in their setup).
    server = LiveServer(env=service_env(DATABASE_URL=live_database_url, TENET_DATA_DIR=str(data_dir),
                                        TENET_ACCESS_TOKEN_TTL_SECONDS="86400"),
                        log_path=data_dir / "server.log", workers=2).start()
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def live_admin_token(live_server, live_database_url: str) -> str:
    """Bearer token of an administrator of the live server (made with `tenet users create-admin`)."""
    import subprocess
    import sys

    from tests.support.live import service_env

    email, password = "live-admin@example.com", "live admin password"
    subprocess.run([sys.executable, "-m", "tenet", "users", "create-admin", "--email", email, "--password", password],
                   env=service_env(DATABASE_URL=live_database_url), check=True, capture_output=True, timeout=60)
    response = httpx.post(f"{live_server.url}/api/v1/auth/token",
                          data={"grant_type": "password", "username": email, "password": password})
    response.raise_for_status()
    return response.json()["access_token"]


@pytest.fixture(scope="session")
def graph_emulator_server(tmp_path_factory):
    """The Microsoft Graph emulator's HTTPS server (tests/support/graph), started once per worker."""
    from tests.support.graph import running_emulator

    yield from running_emulator(tmp_path_factory.mktemp("graph"))


@pytest.fixture
def graph(graph_emulator_server):
    """The Graph emulator, reset for this test (a new tenant, app, mailboxes, log): see tests/support/graph."""
    graph_emulator_server.reset()
    return graph_emulator_server
