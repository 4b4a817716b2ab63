"""Whose address is the client's: the socket peer, unless the peer is a proxy the operator named
(`--forwarded-allow-ips`, else TENET_FORWARDED_ALLOW_IPS). Seen through the per-address limit on failed
sign-ins of a real `tenet serve`, so a caller who rotates X-Forwarded-For cannot escape it."""

from __future__ import annotations

import random
import uuid

import httpx
import pytest

from tests.support.live import LiveServer, service_env

pytestmark = pytest.mark.live_server

LIMIT = 3  # failed sign-ins per address per day (a day's window: no boundary falls inside a test)


def random_loopback() -> str:
    """A source address of its own on the loopback network (127.0.0.0/8), so its count starts at zero."""
    return f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def forwarded_address() -> str:
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


@pytest.fixture
def start_server(live_database_url, tmp_path):
    servers: list[LiveServer] = []

    def start(*extra_args: str, **env: str) -> LiveServer:
        server = LiveServer(
            env=service_env(DATABASE_URL=live_database_url, TENET_DATA_DIR=str(tmp_path),
                            TENET_LOGIN_FAILURE_LIMIT=f"{LIMIT}/day", **env),
            log_path=tmp_path / f"server-{len(servers)}.log", extra_args=list(extra_args))
        servers.append(server)
        return server.start().wait_ready()

    yield start
    for server in servers:
        server.stop()


def failed_sign_ins(server: LiveServer, forwarded_for: list[str | None], source: str = "127.0.0.1") -> list[int]:
    """One failed sign-in per entry (each for an account of its own, so only the address limit can bite),
    sent from `source` with that X-Forwarded-For; answers the statuses."""
    statuses = []
    with httpx.Client(transport=httpx.HTTPTransport(local_address=source), base_url=server.url) as client:
        for value in forwarded_for:
            response = client.post(
                "/api/v1/auth/token",
                data={"grant_type": "password", "username": f"nobody-{uuid.uuid4().hex}@example.com",
                      "password": "not the password"},
                headers={"X-Forwarded-For": value} if value else {})
            statuses.append(response.status_code)
    return statuses


BLOCKED_AFTER_LIMIT = [401] * LIMIT + [429, 429]


def test_by_default_no_proxy_is_trusted(start_server):
    # uvicorn alone would trust 127.0.0.1, or whatever its own FORWARDED_ALLOW_IPS says: Tenet ignores both.
    server = start_server(FORWARDED_ALLOW_IPS="*")
    rotating = [forwarded_address() for _ in range(LIMIT + 2)]
    assert failed_sign_ins(server, rotating, source=random_loopback()) == BLOCKED_AFTER_LIMIT


def test_a_named_proxy_forwards_the_client_address(start_server):
    """--forwarded-allow-ips wins over TENET_FORWARDED_ALLOW_IPS (it replaces it, it does not add to it)."""
    overridden = random_loopback()
    server = start_server("--forwarded-allow-ips", "127.0.0.1", TENET_FORWARDED_ALLOW_IPS=overridden)

    # Through the proxy, each forwarded address is a client of its own ...
    rotating = [forwarded_address() for _ in range(LIMIT + 2)]
    assert failed_sign_ins(server, rotating) == [401] * (LIMIT + 2)
    # ... and one forwarded address is counted as one client.
    assert failed_sign_ins(server, [forwarded_address()] * (LIMIT + 2)) == BLOCKED_AFTER_LIMIT
    # The address only the setting named is not trusted: its X-Forwarded-For is ignored.
    rotating = [forwarded_address() for _ in range(LIMIT + 2)]
    assert failed_sign_ins(server, rotating, source=overridden) == BLOCKED_AFTER_LIMIT


def test_the_setting_names_trusted_proxies(start_server):
    server = start_server(TENET_FORWARDED_ALLOW_IPS=" 192.0.2.10, 127.0.0.0/8 ")
    rotating = [forwarded_address() for _ in range(LIMIT + 2)]
    assert failed_sign_ins(server, rotating, source=random_loopback()) == [401] * (LIMIT + 2)
