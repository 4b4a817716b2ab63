"""The README's quick start as a new user meets it: `tenet serve` on a fresh machine (no DATABASE_URL)
starts the embedded PostgreSQL, migrates it, creates the first administrator and serves /docs."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.live import LiveServer, service_env

pytestmark = pytest.mark.live_server


def test_first_start_on_the_embedded_database_prints_how_to_sign_in(embedded, tmp_path):
    data_dir = embedded.data_dir
    env = service_env(TENET_DATA_DIR=str(data_dir))
    env.pop("TENET_SECRET_KEY")  # a fresh machine has none: a development key is generated
    server = LiveServer(env=env, log_path=tmp_path / "first.log").start()
    try:
        server.wait_ready(timeout=120)
        banner = re.search(r"First administrator created: (\S+) / password (\S+)", server.output)
        assert banner, server.output
        email, password = banner.groups()
        assert f"{server.url}/docs" in server.output
        assert httpx.get(f"{server.url}/docs").status_code == 200
        tokens = httpx.post(f"{server.url}/api/v1/auth/token",
                            data={"grant_type": "password", "username": email, "password": password})
        assert tokens.status_code == 200, tokens.text
        me = httpx.get(f"{server.url}/api/v1/auth/me",
                       headers={"Authorization": f"Bearer {tokens.json()['access_token']}"}).json()
        assert "Administrator" in me["roles"]
    finally:
        server.stop()
    assert (data_dir / "pgdata" / "PG_VERSION").exists() and (data_dir / "secret_key").exists()

    # A second start keeps the data and does not create another administrator.
    again = LiveServer(env=env, log_path=tmp_path / "second.log").start()
    try:
        again.wait_ready(timeout=120)
        assert "First administrator created" not in again.output
        assert "tenet users create-admin" in again.output
        tokens = httpx.post(f"{again.url}/api/v1/auth/token",
                            data={"grant_type": "password", "username": email, "password": password})
        assert tokens.status_code == 200
    finally:
        again.stop()
