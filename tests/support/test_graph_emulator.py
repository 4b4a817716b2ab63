"""The Graph emulator itself, driven as the Outlook sync will drive it: MSAL's confidential client (unmodified, its
token cache) against the emulator's authority, httpx trusting only the emulator's CA, and a real HTTPS receiver for
the validation call-backs and notifications."""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, date, datetime, timedelta
from urllib.parse import parse_qs, urlparse
from zoneinfo import ZoneInfo

import httpx
import msal
import pytest
import requests
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.support.graph.server import serve_in_thread, stop_thread

GRAPH_SCOPE = ["https://graph.microsoft.com/.default"]
IMMUTABLE = 'IdType="ImmutableId"'
WINDOW = {"startDateTime": "2026-01-01T00:00:00Z", "endDateTime": "2026-04-01T00:00:00Z"}
LA = ZoneInfo("America/Los_Angeles")


def msal_app(graph, secret: str | None = None) -> msal.ConfidentialClientApplication:
    # requests lets REQUESTS_CA_BUNDLE from the environment win over Session.verify: a session that ignores the
    # environment is how GRAPH_CA_BUNDLE can win. The emulator is not a Microsoft host: no instance discovery.
    session = requests.Session()
    session.trust_env = False
    session.verify = graph.ca_bundle
    return msal.ConfidentialClientApplication(graph.client_id, client_credential=secret or graph.client_secret,
                                              authority=graph.authority, http_client=session,
                                              instance_discovery=False, token_cache=msal.TokenCache())


def token_of(graph) -> str:
    return msal_app(graph).acquire_token_for_client(GRAPH_SCOPE)["access_token"]


def graph_client(graph, token: str | None = None, **prefer: str) -> httpx.AsyncClient:
    preferences = [IMMUTABLE, *(f"{k.replace('_', '.')}={v}" for k, v in prefer.items())]
    return httpx.AsyncClient(verify=ssl.create_default_context(cafile=graph.ca_bundle), trust_env=False,
                             headers={"Authorization": f"Bearer {token or token_of(graph)}",
                                      "Prefer": ", ".join(preferences)})


async def all_pages(client: httpx.AsyncClient, url: str, **params: str) -> tuple[list[dict], str, int]:
    """Follow @odata.nextLink to the end: (items, deltaLink, pages)."""
    response = await client.get(url, params=params or None)
    items, pages = [], 1
    while True:
        assert response.status_code == 200, response.text
        body = response.json()
        items.extend(body["value"])
        if "@odata.nextLink" not in body:
            return items, body.get("@odata.deltaLink", ""), pages
        response = await client.get(body["@odata.nextLink"])
        pages += 1


class Receiver:
    """A subscriber's HTTPS endpoint: echoes validation tokens (or misbehaves, per `mode`), records every POST."""

    def __init__(self, graph) -> None:
        self.mode = "echo"
        self.posts: list[tuple[str, dict | None, str]] = []  # (path, json body, validation token)
        app = Starlette(routes=[Route("/{path:path}", self._receive, methods=["POST"])])
        self._server, self._thread, port = serve_in_thread(app, graph.issue_certificate("127.0.0.1"), "receiver")
        self.url = f"https://127.0.0.1:{port}"

    async def _receive(self, request: Request) -> Response:
        token = request.query_params.get("validationToken")
        body = await request.body()
        self.posts.append((request.url.path, None if token else (await request.json() if body else None),
                           token or ""))
        if token is not None:
            if self.mode == "hang":
                await asyncio.sleep(30)
            if self.mode == "wrong":
                return PlainTextResponse("not the token")
            return PlainTextResponse(token)
        return Response(status_code=202)

    def notifications(self, path: str) -> list[list[dict]]:
        return [body["value"] for p, body, _token in self.posts if p == path and body]

    def stop(self) -> None:
        stop_thread(self._server, self._thread)


@pytest.fixture
def receiver(graph):
    made = Receiver(graph)
    yield made
    made.stop()


def subscription_body(graph, receiver, mailbox, **overrides) -> dict:
    return {"changeType": "created,updated,deleted", "notificationUrl": f"{receiver.url}/notifications",
            "lifecycleNotificationUrl": f"{receiver.url}/lifecycle", "resource": f"/users/{mailbox.id}/events",
            "expirationDateTime": (datetime.now(UTC) + timedelta(minutes=4000)).isoformat(),
            "clientState": "the-client-state", **overrides}


# ---- identity ------------------------------------------------------------------------------------------------------

def test_msal_gets_a_token_through_discovery_and_caches_it(graph):
    app = msal_app(graph)
    first = app.acquire_token_for_client(GRAPH_SCOPE)
    second = app.acquire_token_for_client(GRAPH_SCOPE)
    assert first["token_type"] == "Bearer" and first["expires_in"] > 3000
    assert second["access_token"] == first["access_token"] and second["token_source"] == "cache"
    assert [r.route for r in graph.requests(api="identity")] == ["discovery", "token"]
    assert graph.requests(api="identity")[1].body["grant_type"] == "client_credentials"


def test_a_wrong_client_secret_gets_the_identity_platforms_invalid_client(graph):
    result = msal_app(graph, secret="not-the-secret").acquire_token_for_client(GRAPH_SCOPE)
    assert result["error"] == "invalid_client"
    assert result["error_codes"] == [7000215] and result["error_description"].startswith("AADSTS7000215:")


async def test_a_revoked_token_gets_401_and_a_fresh_token_works(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    app = msal_app(graph)
    token = app.acquire_token_for_client(GRAPH_SCOPE)["access_token"]
    graph.revoke_tokens()
    async with graph_client(graph, token) as client:
        refused = await client.get(f"{graph.base_url}/users/{mailbox.id}/events",
                                   headers={"client-request-id": "c-1"})
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert error["code"] == "InvalidAuthenticationToken"
    assert error["innerError"]["client-request-id"] == "c-1" == refused.headers["client-request-id"]
    assert error["innerError"]["request-id"] == refused.headers["request-id"] and error["innerError"]["date"]
    assert app.acquire_token_for_client(GRAPH_SCOPE)["token_source"] == "cache"  # MSAL does not know
    app.remove_tokens_for_client()
    fresh = app.acquire_token_for_client(GRAPH_SCOPE)["access_token"]
    async with graph_client(graph, fresh) as client:
        assert (await client.get(f"{graph.base_url}/users/{mailbox.id}/events")).status_code == 200


# ---- events, series, instances -----------------------------------------------------------------------------------

async def test_a_weekly_series_stays_at_nine_in_los_angeles_across_dst_with_exceptions(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    master = mailbox.create_series("Weekly", "2026-03-02T09:00", "2026-03-02T10:00",
                                   pattern={"type": "weekly", "daysOfWeek": ["monday"]}, until=date(2026, 3, 30))
    second = datetime(2026, 3, 9, 9, tzinfo=LA)
    exception = mailbox.edit_occurrence(master, second, subject="Moved", start="2026-03-09T11:00",
                                        end="2026-03-09T12:00")
    async with graph_client(graph) as client:
        url = f"{graph.base_url}/users/room@contoso.com/events/{mailbox.id_of(master)}/instances"
        utc, _, _ = await all_pages(client, url, **WINDOW)
        local = (await client.get(url, params=WINDOW,
                                  headers={"Prefer": f'{IMMUTABLE}, outlook.timezone="Pacific Standard Time"'}))
        got = await client.get(f"{graph.base_url}/users/room@contoso.com/events/{mailbox.id_of(master)}")
    assert [i["start"]["dateTime"] for i in utc] == ["2026-03-02T17:00:00.0000000", "2026-03-09T18:00:00.0000000",
                                                     "2026-03-16T16:00:00.0000000", "2026-03-23T16:00:00.0000000",
                                                     "2026-03-30T16:00:00.0000000"]
    assert [i["start"]["dateTime"][11:16] for i in local.json()["value"]] == ["09:00", "11:00", "09:00", "09:00",
                                                                              "09:00"]
    assert local.json()["value"][0]["start"]["timeZone"] == "Pacific Standard Time"
    moved = utc[1]
    assert moved["type"] == "exception" and moved["id"] == mailbox.id_of(exception) and moved["subject"] == "Moved"
    assert moved["originalStart"] == "2026-03-09T16:00:00Z" and moved["seriesMasterId"] == mailbox.id_of(master)
    assert {i["type"] for i in utc} == {"occurrence", "exception"} and len({i["iCalUId"] for i in utc}) == 5
    master_json = got.json()
    assert master_json["type"] == "seriesMaster"
    assert master_json["recurrence"]["range"]["recurrenceTimeZone"] == "Pacific Standard Time"
    assert master_json["originalStartTimeZone"] == "Pacific Standard Time"


async def test_events_list_pages_singles_and_masters_and_filters_on_type(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    for n in range(3):
        mailbox.create_event(f"Single {n}", f"2026-01-0{n + 5}T09:00", f"2026-01-0{n + 5}T10:00")
    mailbox.create_series("Daily", "2026-01-05T08:00", "2026-01-05T08:15", pattern={"type": "daily"}, count=3)
    async with graph_client(graph) as client:
        listed, _, pages = await all_pages(client, f"{graph.base_url}/users/{mailbox.id}/events", **{"$top": "2"})
        masters = await client.get(f"{graph.base_url}/users/{mailbox.id}/events",
                                   params={"$filter": "type eq 'seriesMaster'", "$select": "subject,type"})
        missing = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/AAkALgAAAAAAHYQDnope")
    assert pages == 2 and sorted(e["type"] for e in listed) == ["seriesMaster"] + ["singleInstance"] * 3
    assert [(e["subject"], set(e)) for e in masters.json()["value"]] == [("Daily", {"@odata.etag", "id", "subject",
                                                                                    "type"})]
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "ErrorItemNotFound"


async def test_rest_ids_change_when_an_event_moves_and_immutable_ids_do_not(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    event = mailbox.create_event("Moving", "2026-01-05T09:00", "2026-01-05T10:00")
    rest_before, immutable = mailbox.id_of(event, immutable=False), mailbox.id_of(event)
    mailbox.move_event(event)
    async with graph_client(graph) as client:
        old_rest = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/{rest_before}",
                                    headers={"Prefer": ""})
        by_immutable = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/{immutable}")
        as_rest = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/{immutable}", headers={"Prefer": ""})
    assert old_rest.status_code == 404 and by_immutable.json()["id"] == immutable
    assert as_rest.json()["id"] == mailbox.id_of(event, immutable=False) != rest_before
    assert [r.immutable_id for r in graph.requests()] == [False, True, False]
    assert len(graph.requests_without_immutable_id()) == 2
