"""A database outage, for real: the test's own PostgreSQL stopped and started again under a running app.

While the database is known to be down every request needing it answers 503 at once (no wait on a pool),
/readyz says why in words, and a probe in the background reopens the service when the database is back.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx

from tenet.app import create_app
from tenet.db.database import Database
from tenet.db.embedded import restart_embedded_server
from tests.conftest import test_settings
from tests.support.users import UserFactory

# Far longer than the test waits for an answer: a request that waited on a pool would not answer in time.
POOL_TIMEOUT = 120.0
ANSWER_WITHIN = 30.0


def registration() -> dict[str, str]:
    return {"email": f"outage-{uuid.uuid4().hex[:8]}@example.com", "password": "a long password 1",
            "display_name": "Outage"}


async def answers_while_down(client: httpx.AsyncClient, headers: dict[str, str]) -> list[httpx.Response]:
    """A read, a write and the readiness probe, each three times at once."""
    requests = [client.get("/api/v1/auth/me", headers=headers), client.post("/api/v1/auth/register",
                json=registration()), client.get("/readyz")] * 3
    return list(await asyncio.wait_for(asyncio.gather(*requests), ANSWER_WITHIN))


async def test_requests_answer_at_once_while_the_database_is_down_and_serve_again_once_it_is_back(
        private_postgres, clock, tmp_path):
    database = Database.from_url(private_postgres.url, pool_size=2, pool_timeout=POOL_TIMEOUT, read_pool_size=2)
    app = create_app(test_settings(data_dir=tmp_path), database=database, clock=clock, run_background_tasks=False)
    try:
        user = await UserFactory(app, database, clock).make()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 200
            assert (await client.get("/readyz")).status_code == 200

            private_postgres.stop_fast()
            # The first answers find the outage; those after it are refused before any pool is asked.
            for _ in range(2):
                answers = await answers_while_down(client, user.headers)
                assert [a.status_code for a in answers] == [503] * len(answers), [a.text for a in answers]
                assert {a.json()["code"] for a in answers} == {"SERVICE_UNAVAILABLE"}
                assert all(a.headers["retry-after"] for a in answers)
            ready = answers[2].json()
            assert ready["detail"] == "database unreachable"
            assert ready["reason"] == "the database is not accepting connections"

            restart_embedded_server(private_postgres.pgdata)
            # The probe reopens the service on its own: no restart of the app, no operator.
            for _ in range(600):
                if (await client.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("still not ready 60 s after the database came back")
            me = await asyncio.wait_for(client.get("/api/v1/auth/me", headers=user.headers), ANSWER_WITHIN)
            registered = await asyncio.wait_for(client.post("/api/v1/auth/register", json=registration()),
                                                ANSWER_WITHIN)
            assert (me.status_code, registered.status_code) == (200, 201), (me.text, registered.text)
    finally:
        await database.dispose()
