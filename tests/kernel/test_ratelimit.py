"""Rate limits counted in the database: every API process sees the same count."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text

from tenet.app import create_app
from tenet.db.database import Database, make_engine
from tenet.kernel.settings import Rate
from tests.conftest import _empty_tables as _empty
from tests.conftest import test_settings
from tests.support.users import PASSWORD, UserFactory


@asynccontextmanager
async def committed_db_engine(url: str):
    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        yield engine
    finally:
        await engine.dispose()

TOKEN = "/api/v1/auth/token"


@pytest.fixture
async def second_process_db(database_url):
    """Another pool on the same database, as a second API process would have."""
    engine = make_engine(database_url, pool_size=2, max_overflow=0)
    yield Database(engine)
    await engine.dispose()


def app_client(db, clock, tmp_path, address: str, **overrides) -> httpx.AsyncClient:
    settings = test_settings(data_dir=tmp_path, **overrides)
    app = create_app(settings, database=db, clock=clock, run_background_tasks=False)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 1)), base_url="http://t")


def sign_in(email: str, password: str) -> dict:
    return {"grant_type": "password", "username": email, "password": password}


@pytest.mark.parametrize("text,limit,seconds", [("10/15min", 10, 900), ("20/hour", 20, 3600),
                                                ("120/minute", 120, 60), ("5 / 2 h", 5, 7200)])
def test_rates_parse(text, limit, seconds):
    rate = Rate.parse(text)
    assert (rate.limit, rate.window.total_seconds()) == (limit, seconds)


@pytest.mark.parametrize("text", ["ten/min", "0/min", "5/fortnight", "5"])
def test_bad_rates_are_refused(text):
    with pytest.raises(ValueError):
        Rate.parse(text)


async def test_failed_sign_ins_are_counted_across_processes(committed_db, second_process_db, clock, tmp_path):
    async with app_client(committed_db, clock, tmp_path, "192.0.2.1") as first:
        await first.post("/api/v1/auth/register", json={
            "email": "victim@example.com", "password": PASSWORD, "display_name": "V"})
    async with (app_client(committed_db, clock, tmp_path, "192.0.2.1", login_failure_limit="3/15min") as one,
                app_client(second_process_db, clock, tmp_path, "192.0.2.2", login_failure_limit="3/15min") as two):
        statuses = [
            (await one.post(TOKEN, data=sign_in("victim@example.com", "wrong-1"))).status_code,
            (await two.post(TOKEN, data=sign_in("Victim@Example.com", "wrong-2"))).status_code,
            (await one.post(TOKEN, data=sign_in("victim@example.com", "wrong-3"))).status_code,
        ]
        assert statuses == [401, 401, 401]
        blocked = await two.post(TOKEN, data=sign_in("victim@example.com", PASSWORD))
        assert blocked.status_code == 429, blocked.text
        assert blocked.json()["code"] == "RATE_LIMITED"
        assert 0 < int(blocked.headers["retry-after"]) <= 900
        clock.advance(timedelta(minutes=15))
        allowed = await one.post(TOKEN, data=sign_in("victim@example.com", PASSWORD))
        assert allowed.status_code == 200


async def test_failures_from_one_address_across_accounts_are_limited(committed_db, clock, tmp_path):
    async with app_client(committed_db, clock, tmp_path, "192.0.2.9", login_failure_limit="2/15min") as client:
        for n in range(2):
            response = await client.post(TOKEN, data=sign_in(f"nobody{n}@example.com", "wrong"))
            assert response.status_code == 401
        third = await client.post(TOKEN, data=sign_in("nobody3@example.com", "wrong"))
    assert third.status_code == 429


async def test_an_address_at_its_limit_counts_nothing_more(committed_db, clock, tmp_path):
    """Issue 24 (the class of item 8): an attempt refused by one bucket took a slot in the others anyway, so an
    address at its limit still wrote a row per made-up email and spent any victim account's slots without a
    single password checked, until the victim was locked out everywhere."""
    async with app_client(committed_db, clock, tmp_path, "192.0.2.50") as setup:
        await setup.post("/api/v1/auth/register", json={
            "email": "victim2@example.com", "password": PASSWORD, "display_name": "V"})
    async with app_client(committed_db, clock, tmp_path, "192.0.2.51", login_failure_limit="2/15min") as attacker:
        for n in range(2):
            assert (await attacker.post(TOKEN, data=sign_in(f"made-up{n}@example.com", "wrong"))).status_code == 401
        for n in range(3):
            assert (await attacker.post(TOKEN, data=sign_in("victim2@example.com", "wrong"))).status_code == 429
            assert (await attacker.post(TOKEN, data=sign_in(f"later{n}@example.com", "wrong"))).status_code == 429
    assert await _login_counters(committed_db) == {"login:account:made-up0@example.com": 1,
                                                   "login:account:made-up1@example.com": 1,
                                                   "login:ip:192.0.2.51": 2}
    async with app_client(committed_db, clock, tmp_path, "192.0.2.52", login_failure_limit="2/15min") as victim:
        assert (await victim.post(TOKEN, data=sign_in("victim2@example.com", PASSWORD))).status_code == 200


async def test_a_successful_sign_in_clears_the_account_count(committed_db, clock, tmp_path):
    async with app_client(committed_db, clock, tmp_path, "192.0.2.3", login_failure_limit="2/15min") as client:
        await client.post("/api/v1/auth/register", json={
            "email": "forgetful@example.com", "password": PASSWORD, "display_name": "F"})
        assert (await client.post(TOKEN, data=sign_in("forgetful@example.com", "oops"))).status_code == 401
        assert (await client.post(TOKEN, data=sign_in("forgetful@example.com", PASSWORD))).status_code == 200
    # From another address (so only the account bucket matters): one failure does not block.
    async with app_client(committed_db, clock, tmp_path, "192.0.2.4", login_failure_limit="2/15min") as client:
        assert (await client.post(TOKEN, data=sign_in("forgetful@example.com", "oops"))).status_code == 401
        assert (await client.post(TOKEN, data=sign_in("forgetful@example.com", PASSWORD))).status_code == 200


async def test_registrations_per_address_are_limited(committed_db, clock, tmp_path):
    async with app_client(committed_db, clock, tmp_path, "192.0.2.5", registration_limit="2/hour") as client:
        codes = [(await client.post("/api/v1/auth/register", json={
            "email": f"r{n}@example.com", "password": PASSWORD, "display_name": "R"})).status_code for n in range(3)]
        assert codes == [201, 201, 429]
    async with app_client(committed_db, clock, tmp_path, "192.0.2.6", registration_limit="2/hour") as other:
        response = await other.post("/api/v1/auth/register", json={
            "email": "elsewhere@example.com", "password": PASSWORD, "display_name": "E"})
    assert response.status_code == 201


async def test_parallel_failures_on_one_account_never_evaluate_more_than_the_limit(committed_db, clock, tmp_path):
    """Issue 6.2: 20 wrong passwords at once against a limit of 10: exactly 10 are checked (401), the rest are
    refused before the password is looked at (429). Counting first, in one statement, is what holds it."""
    async with app_client(committed_db, clock, tmp_path, "192.0.2.20") as setup:
        await setup.post("/api/v1/auth/register", json={
            "email": "target@example.com", "password": PASSWORD, "display_name": "T"})
    clients = [app_client(committed_db, clock, tmp_path, f"198.51.100.{n}", login_failure_limit="10/15min")
               for n in range(20)]
    try:
        responses = await asyncio.gather(*(c.post(TOKEN, data=sign_in("target@example.com", f"wrong-{n}"))
                                           for n, c in enumerate(clients)))
    finally:
        for c in clients:
            await c.aclose()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [401] * 10 + [429] * 10, statuses
    async with committed_db.read_only() as session:
        hits = (await session.execute(text(
            "SELECT hits FROM kernel.rate_limit_counter WHERE bucket = 'login:account:target@example.com'"))).scalar()
    assert hits == 10


async def test_a_flood_of_failed_sign_ins_does_not_starve_other_requests(database_url, clock, tmp_path):
    """Issue 6.2: 40 clients flooding wrong passwords (argon2 at a real cost, every one evaluated) while other
    users read and write. No sign-in holds a pooled connection while argon2 runs, so a pool of 3 write and 2
    read connections with a 2 s wait serves everyone: no request answers 503."""
    db = Database.from_url(database_url, pool_size=3, max_overflow=0, pool_timeout=2.0, read_pool_size=2)
    settings = test_settings(data_dir=tmp_path, password_hash_time_cost=2, password_hash_memory_kib=19456,
                             login_failure_limit="10000/15min")
    app = create_app(settings, database=db, clock=clock, run_background_tasks=False)
    users = UserFactory(app, db, clock)
    try:
        reader, writer = await users.make(), await users.make()
        transport = httpx.ASGITransport(app=app, client=("192.0.2.40", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            async def flood(n: int) -> int:
                response = await client.post(TOKEN, data=sign_in(f"flood{n % 7}@example.com", f"wrong-{n}"))
                return response.status_code

            async def others() -> list[int]:
                await asyncio.sleep(0.05)  # once the flood is under way
                codes = []
                for n in range(5):
                    codes.append((await client.get("/api/v1/auth/me", headers=reader.headers)).status_code)
                    codes.append((await client.post("/api/v1/workspaces", json={"name": f"W{n}"},
                                                    headers=writer.headers)).status_code)
                return codes

            results = await asyncio.gather(*(flood(n) for n in range(40)), others())
        assert results[:40] == [401] * 40
        assert results[40] == [200, 201] * 5
    finally:
        await db.dispose()
        async with committed_db_engine(database_url) as engine:
            await _empty(engine)


async def _backend_waiting_on_a_lock(watcher, application_name: str = "tenet-read") -> int:
    for _ in range(500):
        row = await (await watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s "
            "AND wait_event_type = 'Lock'", [application_name])).fetchone()
        if row is not None:
            return int(row[0])
        await asyncio.sleep(0.02)
    raise AssertionError("no read-path statement came to wait on the lock")


async def _login_counters(db) -> dict[str, int]:
    async with db.read_only() as session:
        rows = await session.execute(text(
            "SELECT bucket, hits FROM kernel.rate_limit_counter WHERE bucket LIKE 'login:%'"))
        return {bucket: hits for bucket, hits in rows}


async def test_an_outage_while_checking_the_password_gives_the_slots_back(committed_db, database_url, clock,
                                                                         tmp_path):
    """Review item 3: the sign-in counts its attempt first, then reads the password hash. When that read
    cannot happen (here the database kills the read path's connection, twice, so its one retry fails too),
    the answer is 503 and the attempt is given back: an outage of ours must not lock a user out."""
    import psycopg

    from tenet.db.database import libpq_url

    async with app_client(committed_db, clock, tmp_path, "192.0.2.30", login_failure_limit="3/15min") as client:
        await client.post("/api/v1/auth/register", json={
            "email": "unlucky@example.com", "password": PASSWORD, "display_name": "U"})
        async with (await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as watcher,
                    await psycopg.AsyncConnection.connect(libpq_url(database_url)) as locker):
            # The password hash cannot be read while the table is locked: the read waits, and is killed.
            await locker.execute("LOCK TABLE iam.user_account IN ACCESS EXCLUSIVE MODE")
            attempt = asyncio.create_task(client.post(TOKEN, data=sign_in("unlucky@example.com", PASSWORD)))
            for _ in range(2):
                pid = await _backend_waiting_on_a_lock(watcher)
                await watcher.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
            response = await attempt
            await locker.rollback()
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "SERVICE_UNAVAILABLE"
        assert await _login_counters(committed_db) == {}
        # A wrong password is a verdict, and counts.
        assert (await client.post(TOKEN, data=sign_in("unlucky@example.com", "wrong"))).status_code == 401
        assert await _login_counters(committed_db) == {"login:account:unlucky@example.com": 1,
                                                       "login:ip:192.0.2.30": 1}
        assert (await client.post(TOKEN, data=sign_in("unlucky@example.com", PASSWORD))).status_code == 200
