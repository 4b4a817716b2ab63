"""/readyz answers 503 until the database is reachable and at head; a lost database is a 503, not a 500."""

from __future__ import annotations

import httpx
import pytest

from tenet.app import create_app
from tenet.db.database import Database
from tests.conftest import test_settings

METRICS_TOKEN = "readiness-scrape-token-0123456789"


async def call(database: Database, path: str, clock, tmp_path, **kwargs) -> httpx.Response:
    app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=database, clock=clock,
                     run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.get(path, **kwargs)


@pytest.fixture
async def unreachable():
    # Nothing listens on port 1; connect_timeout keeps the test quick.
    database = Database.from_url("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", pool_timeout=2)
    yield database
    await database.dispose()


async def test_ready_when_migrated(db, clock, tmp_path):
    response = await call(db, "/readyz", clock, tmp_path)
    assert response.status_code == 200 and response.json()["status"] == "ready"


async def test_not_ready_while_the_database_is_unreachable(unreachable, clock, tmp_path):
    response = await call(unreachable, "/readyz", clock, tmp_path)
    assert response.status_code == 503
    assert response.json()["code"] == "SERVICE_UNAVAILABLE" and response.headers["retry-after"]


async def test_not_ready_before_migrations(scratch_database, clock, tmp_path):
    database = Database.from_url(scratch_database("unmigrated"))
    try:
        response = await call(database, "/readyz", clock, tmp_path)
    finally:
        await database.dispose()
    assert response.status_code == 503 and "not at head" in response.json()["detail"]


async def test_healthz_and_metrics_answer_without_a_database(unreachable, clock, tmp_path):
    assert (await call(unreachable, "/healthz", clock, tmp_path)).status_code == 200
    metrics = await call(unreachable, "/metrics", clock, tmp_path,
                         headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert metrics.status_code == 200 and "tenet_database_up 0.0" in metrics.text


async def test_a_route_needing_the_database_answers_503_not_500(unreachable, clock, tmp_path):
    from tenet.iam.tokens import AccessTokens

    app = create_app(test_settings(data_dir=tmp_path), database=unreachable, clock=clock, run_background_tasks=False)
    tokens: AccessTokens = app.state.access_tokens
    import uuid

    token = tokens.issue(subject=uuid.uuid4(), kind="user", now=clock.now())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "SERVICE_UNAVAILABLE"


async def test_a_pooled_connection_whose_backend_died_is_refused_at_checkout(database_url, engine):
    """The check without a round trip (`refuse_dead_connection`): a live idle connection passes; once its
    backend is terminated, the same connection is refused, before any statement is sent on it."""
    from sqlalchemy import text
    from sqlalchemy.exc import DisconnectionError

    from tenet.db.database import make_engine, refuse_dead_connection

    probe = make_engine(database_url, pool_size=1, application_name="tenet-liveness-test")
    try:
        async with probe.connect() as connection:
            raw = await connection.get_raw_connection()
            refuse_dead_connection(raw.dbapi_connection, None, None)  # alive: nothing raised
            async with engine.connect() as admin:
                killed = (await admin.execute(text(
                    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                    "WHERE application_name = 'tenet-liveness-test'"))).scalar_one()
            assert killed == 1
            with pytest.raises(DisconnectionError):
                refuse_dead_connection(raw.dbapi_connection, None, None)
            await connection.invalidate()
    finally:
        await probe.dispose()


async def test_pool_survives_a_database_restart(database_url, engine):
    """Connections killed by a server restart are replaced at checkout, no service restart needed."""
    from sqlalchemy import text

    from tenet.db.database import make_engine

    survivor = Database(make_engine(database_url, pool_size=2, application_name="tenet-restart-test"))
    try:
        async with survivor.read_only() as session:
            assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
        async with engine.connect() as admin:
            killed = (await admin.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'tenet-restart-test'"))).scalar_one()
        assert killed >= 1
        async with survivor.read_only() as session:
            assert (await session.execute(text("SELECT 2"))).scalar_one() == 2
    finally:
        await survivor.dispose()


async def test_a_post_with_an_idempotency_key_answers_503_not_500_when_the_database_is_gone(unreachable, clock,
                                                                                           tmp_path):
    """Issue 6.5: the idempotency claim itself needs the database; its failure is an outage (503 + Retry-After),
    not a bug."""
    app = create_app(test_settings(data_dir=tmp_path), database=unreachable, clock=clock, run_background_tasks=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/api/v1/auth/register", headers={"Idempotency-Key": "outage-1"},
                                     json={"email": "o@example.com", "password": "a long password",
                                           "display_name": "O"})
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "SERVICE_UNAVAILABLE" and response.headers["retry-after"]
    assert response.json()["request_id"] == response.headers["x-request-id"]


async def test_the_read_path_retries_once_on_a_fresh_connection_after_its_connections_were_killed(
        database_url, engine, clock, tmp_path):
    """Issue 8: a read is safe to repeat, so a statement whose connection broke (server restart, killed backend)
    runs again on a fresh one and the client never sees the failure."""
    from sqlalchemy import text

    from tests.support.users import UserFactory

    database = Database.from_url(database_url, pool_size=2, read_pool_size=2)
    app = create_app(test_settings(data_dir=tmp_path), database=database, clock=clock, run_background_tasks=False)
    try:
        user = await UserFactory(app, database, clock).make()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 200
            async with engine.connect() as admin:
                killed = (await admin.execute(text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'tenet-read' AND datname = current_database()"))).scalar_one()
            assert killed >= 1
            answers = [(await client.get("/api/v1/auth/me", headers=user.headers)).status_code for _ in range(4)]
        assert answers == [200] * 4
    finally:
        await database.dispose()
        async with engine.begin() as connection:
            await connection.execute(text("SET LOCAL session_replication_role = replica"))
            await connection.execute(text("TRUNCATE iam.user_account, kernel.audit_log CASCADE"))


async def test_a_write_on_a_killed_connection_is_not_repeated_and_the_next_request_gets_a_live_one(
        database_url, engine, clock, tmp_path):
    """Review item 4: the one-statement writes of the read path's pool (`write_one`: the sign-in limiter's
    count) are not retried after a broken connection — the statement may have run — but the pool's other
    idle connections, killed by the same event, are checked, so only one request meets the outage."""
    import asyncio

    from sqlalchemy import text

    database = Database.from_url(database_url, pool_size=2, read_pool_size=4)
    app = create_app(test_settings(data_dir=tmp_path), database=database, clock=clock, run_background_tasks=False)
    try:
        # Four idle connections in the read pool, then all of them killed.
        await asyncio.gather(*(database.reads.value("SELECT pg_sleep(0.1)") for _ in range(4)))
        async with engine.connect() as admin:
            killed = (await admin.execute(text(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE application_name = 'tenet-read' AND datname = current_database()"))).scalar_one()
        assert killed == 4
        form = {"grant_type": "password", "username": "nobody@example.com", "password": "wrong"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            answers = [(await client.post("/api/v1/auth/token", data=form)).status_code for _ in range(4)]
        assert answers == [503, 401, 401, 401]
        async with engine.connect() as admin:
            hits = (await admin.execute(text("SELECT hits FROM kernel.rate_limit_counter "
                                             "WHERE bucket = 'login:account:nobody@example.com'"))).scalar_one()
        assert hits == 3  # the lost write was not repeated
    finally:
        await database.dispose()
        async with engine.begin() as connection:
            await connection.execute(text("DELETE FROM kernel.rate_limit_counter"))
