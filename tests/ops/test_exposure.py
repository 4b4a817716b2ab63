"""What the service tells a stranger: /metrics only to a scraper holding TENET_METRICS_TOKEN, no `Server`
header naming the software, and readiness reasons in words (never an exception class)."""

from __future__ import annotations

import httpx
import pytest

from tenet.app import create_app
from tenet.db.database import Database
from tests.conftest import test_settings
from tests.support.live import LiveServer, service_env

METRICS_TOKEN = "scrape-token-0123456789abcdef"


async def get(app, path: str, **kwargs) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.get(path, **kwargs)


async def test_metrics_are_not_served_without_a_token_setting(db, clock, tmp_path):
    app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    response = await get(app, "/metrics")
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert "TENET_METRICS_TOKEN" in response.json()["detail"]
    assert "tenet_http_requests_total" not in response.text


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-0123456789abcdef", f"Basic {METRICS_TOKEN}",
                                           f"Bearer {METRICS_TOKEN}x", "Bearer"])
async def test_metrics_need_the_bearer_token(db, clock, tmp_path, authorization):
    app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=db, clock=clock,
                     run_background_tasks=False)
    response = await get(app, "/metrics", headers={"Authorization": authorization} if authorization else {})
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "NOT_AUTHENTICATED" and response.headers["www-authenticate"] == "Bearer"
    assert "tenet_http_requests_total" not in response.text


async def test_metrics_answer_the_scraper_holding_the_token(db, clock, tmp_path):
    app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=db, clock=clock,
                     run_background_tasks=False)
    response = await get(app, "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200
    assert "tenet_http_requests_total" in response.text and "tenet_database_up 1.0" in response.text


def test_a_short_metrics_token_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="at least 16"):
        test_settings(metrics_token="short")


async def test_a_not_ready_answer_gives_its_reason_in_words(clock, tmp_path):
    database = Database.from_url("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", pool_timeout=2)
    try:
        app = create_app(test_settings(data_dir=tmp_path), database=database, clock=clock,
                         run_background_tasks=False)
        response = await get(app, "/readyz")
    finally:
        await database.dispose()
    assert response.status_code == 503
    body = response.json()
    assert body["reason"] == "the database is not accepting connections", body
    assert "Error" not in response.text and "psycopg" not in response.text.lower()


@pytest.mark.live_server
@pytest.mark.parametrize("workers", [1, 2])
def test_no_answer_names_the_server_software(live_database_url, tmp_path, workers):
    server = LiveServer(env=service_env(DATABASE_URL=live_database_url, TENET_DATA_DIR=str(tmp_path)),
                        log_path=tmp_path / "server.log", workers=workers).start()
    try:
        server.wait_ready()
        answers = [httpx.get(f"{server.url}{path}") for path in ("/healthz", "/readyz", "/no-such-route", "/metrics")]
        answers.append(httpx.post(f"{server.url}/api/v1/auth/token", content=b"{", headers={
            "content-type": "application/json"}))
    finally:
        server.stop()
    assert [a.status_code for a in answers] == [200, 200, 404, 401, 415]
    assert [a.headers.get("server") for a in answers] == [None] * len(answers)
