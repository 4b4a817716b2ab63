"""GraphClient against the Graph emulator (real HTTPS, MSAL unmodified): tokens from the cache, ImmutableId on every
request, Retry-After honoured, one retry after a 401 with a new token, the per-mailbox concurrency bound, the CA of
GRAPH_CA_BUNDLE winning over the environment's, and no write ever leaving for a mailbox (MA-INV-38)."""

from __future__ import annotations

import asyncio

import pytest

from tenet.kernel.settings import section
from tenet.meetings.outlook.graph import GraphClient, GraphError, ReadOnlyViolation
from tenet.meetings.settings import MeetingSettings
from tests.meetings.outlook.conftest import assert_read_only


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _client(settings, **kwargs) -> GraphClient:
    return GraphClient(section(settings, MeetingSettings), **kwargs)


async def test_reads_carry_immutable_ids_and_reuse_the_cached_token(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    box.create_event("Standup", "2026-01-05T09:00", "2026-01-05T09:15", zone="Pacific Standard Time")
    async with _client(settings) as client:
        user = await client.user("room@contoso.com")
        assert user["id"] == box.id
        page = await client.first_event(box.id)
        assert len(page.body["value"]) == 1 and page.request_id
    async with _client(settings) as client:  # a second client of the same process: MSAL's cache answers
        await client.user(box.id)
    assert len(graph.requests(api="identity", route="token")) == 1
    assert_read_only(graph)


async def test_429_and_503_wait_for_retry_after_then_succeed(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    graph.throttle(box, retry_after=3, route="events")
    graph.unavailable(box, retry_after=1, route="events")
    sleeps = Sleeps()
    async with _client(settings, sleep=sleeps) as client:
        await client.first_event(box.id)
        assert client.requests == 3
    assert sleeps.waits == [3.0, 1.0]
    assert [r.status for r in graph.requests(route="events")] == [429, 503, 200]
    assert_read_only(graph)


async def test_a_retry_after_beyond_the_bound_is_left_to_the_job(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    graph.throttle(box, retry_after=120, route="events")
    sleeps = Sleeps()
    async with _client(settings, sleep=sleeps, max_retry_sleep=30) as client:
        with pytest.raises(GraphError) as caught:
            await client.first_event(box.id)
    assert caught.value.status == 429 and caught.value.retry_after == 120 and sleeps.waits == []


async def test_a_401_drops_the_cached_token_and_retries_once(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    async with _client(settings) as client:
        await client.user(box.id)
        graph.revoke_tokens()
        await client.user(box.id)
    assert [r.status for r in graph.requests(route="user")] == [200, 401, 200]
    assert len(graph.requests(api="identity", route="token")) == 2
    assert_read_only(graph)


async def test_denied_mailbox_errors_carry_graph_s_code_and_request_id(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    graph.deny(box)
    async with _client(settings) as client:
        assert (await client.user(box.id))["id"] == box.id  # the directory still answers
        with pytest.raises(GraphError) as caught:
            await client.first_event(box.id)
    assert caught.value.access_denied and caught.value.request_id
    assert caught.value.request_id == graph.requests(route="events")[-1].request_id


async def test_at_most_the_policy_s_requests_are_in_flight_per_mailbox(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    held = graph.hold(route="events", mailbox=box)
    async with _client(settings, max_concurrent=2) as client:
        calls = [asyncio.create_task(client.first_event(box.id)) for _ in range(5)]
        await graph.wait_in_flight(box, 2)
        await asyncio.sleep(0.2)
        assert graph.in_flight(box) == 2
        held.release()
        await asyncio.gather(*calls)
    assert graph.peak_concurrency(box) == 2
    assert all(r.status == 200 for r in graph.requests(route="events"))


async def test_the_graph_ca_bundle_wins_over_the_environment_s(graph, settings, monkeypatch, tmp_path):
    bogus = tmp_path / "other-ca.pem"
    bogus.write_text("not a certificate\n")
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.setenv(name, str(bogus))
    box = graph.add_mailbox("room@contoso.com")
    async with _client(settings) as client:
        assert (await client.user(box.id))["id"] == box.id


@pytest.mark.invariant("MA-INV-38")
@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/users/room@contoso.com/events"), ("PATCH", "/users/room@contoso.com/events/AAMk1"),
    ("DELETE", "/users/room@contoso.com/events/AAMk1"), ("POST", "/users/room@contoso.com/events/AAMk1/cancel"),
    ("PUT", "/users/room@contoso.com/calendar"), ("POST", "/users/room@contoso.com/calendarView"),
])
async def test_no_write_to_a_mailbox_ever_leaves_the_process(graph, settings, method, path):
    graph.add_mailbox("room@contoso.com")
    async with _client(settings) as client:
        with pytest.raises(ReadOnlyViolation):
            await client._send(method, path, json={})
        # Tenet's own subscriptions are the one write it makes (their verbs pass the guard).
        with pytest.raises(GraphError):
            await client._send("DELETE", "/subscriptions/no-such-subscription")
    assert graph.requests(api="graph", route="event_write") == [] and len(graph.requests()) == 1
    assert_read_only(graph)
