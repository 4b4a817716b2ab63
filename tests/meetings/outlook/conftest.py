"""Fixtures of the Outlook sync's tests: the app configured against the Graph emulator (tests/support/graph), so
MSAL and httpx run unmodified against real HTTPS, and the emulator-log assertions every scenario ends with."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tenet.settings import Settings
from tests.conftest import test_settings

CLIENT_STATE = "tenet-test-client-state-0123456789"
# Where the emulator reaches Tenet's webhook: the test's app, mounted in-process (`tenet_on_graph`).
TENET_URL = "https://tenet.test"


def graph_settings(graph, tmp_path: Path, **overrides: object) -> Settings:
    return test_settings(data_dir=tmp_path, graph_tenant_id=graph.tenant_id, graph_client_id=graph.client_id,
                         graph_client_secret=graph.client_secret, graph_authority_url=graph.authority_url,
                         graph_base_url=graph.base_url, graph_ca_bundle=graph.ca_bundle,
                         graph_notification_client_state=CLIENT_STATE, public_base_url=TENET_URL, **overrides)


@pytest.fixture
def settings(graph, tmp_path: Path) -> Settings:
    """The suite's settings with the emulator's credentials, endpoints and CA (GRAPH_* as the issue names them)."""
    return graph_settings(graph, tmp_path)


def assert_read_only(graph) -> None:
    """MA-INV-38 and the ImmutableId rule, as every scenario test checks them on the emulator's log."""
    assert graph.writes_to_events() == []
    assert graph.requests_without_immutable_id() == []


@pytest.fixture
async def tenet_on_graph(graph, app, clock):
    """The emulator delivers call-backs and notifications to this test's app (real HTTP, in process), on the clock
    of the test: Graph's "now" is the FrozenClock's, so expiries agree."""
    graph.state.set_now(clock.now())
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=TENET_URL)
    graph.mount(TENET_URL, client)
    yield graph
    await client.aclose()
