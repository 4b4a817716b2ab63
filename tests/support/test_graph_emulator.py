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


async def test_each_mailbox_s_copy_of_a_meeting_has_its_own_ids_and_the_same_ical_uid(graph):
    """Graph's iCalUId: "a unique identifier for an event across calendars", different for each occurrence of a
    series. ImmutableIds are per mailbox: another mailbox's id is 404."""
    organizer, assistant = graph.add_mailbox("organizer@contoso.com"), graph.add_mailbox("assistant@contoso.com")
    master = organizer.create_series("Weekly", "2026-01-05T09:00", "2026-01-05T10:00",
                                     pattern={"type": "weekly", "daysOfWeek": ["monday"]}, count=3)
    copy = assistant.copy_event(master)
    single = organizer.create_event("Once", "2026-01-06T09:00", "2026-01-06T10:00")
    assert assistant.id_of(copy) != organizer.id_of(master)
    async with graph_client(graph) as client:
        mine = (await client.get(f"{graph.base_url}/users/{organizer.id}/events/{organizer.id_of(master)}")).json()
        theirs = (await client.get(f"{graph.base_url}/users/{assistant.id}/events/{assistant.id_of(copy)}")).json()
        foreign = await client.get(f"{graph.base_url}/users/{assistant.id}/events/{organizer.id_of(master)}")
        delta, _, _ = await all_pages(client, f"{graph.base_url}/users/{assistant.id}/calendarView/delta", **WINDOW)
        instances = (await client.get(f"{graph.base_url}/users/{organizer.id}/events/{organizer.id_of(master)}"
                                      "/instances", params=WINDOW)).json()["value"]
        once = (await client.get(f"{graph.base_url}/users/{organizer.id}/events/{organizer.id_of(single)}")).json()
    assert mine["iCalUId"] == theirs["iCalUId"] == master.ical_uid and mine["type"] == theirs["type"] == "seriesMaster"
    assert foreign.status_code == 404
    assert len({i["iCalUId"] for i in instances} | {mine["iCalUId"]}) == 4  # one per occurrence, none the master's
    assert once["iCalUId"] != mine["iCalUId"]
    # Delta carries occurrences only as id/type/seriesMasterId/start/end; the master (read by GET) has the iCalUId.
    assert {i["seriesMasterId"] for i in delta} == {assistant.id_of(copy)} and "iCalUId" not in delta[0]


# ---- calendarView delta ------------------------------------------------------------------------------------------

def _by_id(items: list[dict]) -> dict[str, dict]:
    return {i["id"]: i for i in items}


async def test_delta_pages_to_a_delta_link_then_reports_changes_and_removals(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    kept = mailbox.create_event("Kept", "2026-01-05T09:00", "2026-01-05T10:00")
    leaving = mailbox.create_event("Leaving", "2026-01-06T09:00", "2026-01-06T10:00")
    deleted = mailbox.create_event("Deleted", "2026-01-07T09:00", "2026-01-07T10:00")
    master = mailbox.create_series("Series", "2026-01-05T12:00", "2026-01-05T13:00", pattern={"type": "daily"},
                                   count=3)
    async with graph_client(graph, odata_maxpagesize="2") as client:
        first, delta_link, pages = await all_pages(client, f"{graph.base_url}/users/{mailbox.upn}/calendarView/delta",
                                                   **WINDOW)
        assert pages == 3 and len(first) == 6 and "$deltatoken=" in delta_link
        occurrences = [i for i in first if i["type"] == "occurrence"]
        assert len(occurrences) == 3 and all(set(i) == {"@odata.type", "id", "type", "seriesMasterId", "start", "end"}
                                             for i in occurrences)
        assert not any(i["type"] == "seriesMaster" for i in first) and _by_id(first)[mailbox.id_of(kept)]["subject"]
        mailbox.update_event(kept, subject="Kept, renamed")
        mailbox.update_event(leaving, start="2026-06-01T09:00", end="2026-06-01T10:00")
        mailbox.delete_event(deleted)
        new = mailbox.create_event("New", "2026-01-08T09:00", "2026-01-08T10:00")
        outside = mailbox.create_event("Outside", "2027-01-08T09:00", "2027-01-08T10:00")
        exception = mailbox.edit_occurrence(master, datetime(2026, 1, 6, 12, tzinfo=LA), subject="Changed")
        second, delta_link, _ = await all_pages(client, delta_link)
        third, _, _ = await all_pages(client, delta_link)
    changes = _by_id(second)
    assert changes[mailbox.id_of(kept)]["subject"] == "Kept, renamed"
    assert changes[mailbox.id_of(new)]["subject"] == "New"
    assert changes[mailbox.id_of(exception)]["type"] == "exception" and changes[mailbox.id_of(exception)]["subject"]
    for gone in (leaving, deleted, outside):  # left the window, deleted, made outside it: all `@removed` deleted
        assert changes[mailbox.id_of(gone)]["@removed"] == {"reason": "deleted"}
    assert len(second) == 6 and third == []


async def test_an_occurrence_deleted_silently_shows_only_through_instances(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    master = mailbox.create_series("Series", "2026-01-05T12:00", "2026-01-05T13:00", pattern={"type": "daily"},
                                   count=3)
    victim = mailbox.occurrence(master, datetime(2026, 1, 6, 12, tzinfo=LA))
    delta = f"{graph.base_url}/users/{mailbox.id}/calendarView/delta"
    async with graph_client(graph) as client:
        _, delta_link, _ = await all_pages(client, delta, **WINDOW)
        mailbox.delete_occurrence(master, victim.original_start)
        after, _, _ = await all_pages(client, delta_link)
        instances, _, _ = await all_pages(
            client, f"{graph.base_url}/users/{mailbox.id}/events/{mailbox.id_of(master)}/instances", **WINDOW)
        gone = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/{mailbox.id_of(victim)}")
    assert after == []
    assert len(instances) == 2 and mailbox.id_of(victim) not in _by_id(instances)
    assert gone.status_code == 404


async def test_a_change_of_the_master_alone_is_not_in_delta(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    master = mailbox.create_series("Series", "2026-01-05T12:00", "2026-01-05T13:00", pattern={"type": "daily"},
                                   count=3)
    async with graph_client(graph) as client:
        _, delta_link, _ = await all_pages(client, f"{graph.base_url}/users/{mailbox.id}/calendarView/delta",
                                           **WINDOW)
        mailbox.update_event(master, subject="Renamed", location="Room 2")
        after, _, _ = await all_pages(client, delta_link)
        read = await client.get(f"{graph.base_url}/users/{mailbox.id}/events/{mailbox.id_of(master)}")
    assert after == [] and read.json()["subject"] == "Renamed"
    assert read.json()["location"]["displayName"] == "Room 2"


@pytest.mark.parametrize("code", ["SyncStateNotFound", "syncStateNotFound"])
async def test_a_reset_answers_410_with_the_initial_query_in_location(graph, code):
    mailbox = graph.add_mailbox("room@contoso.com")
    mailbox.create_event("One", "2026-01-05T09:00", "2026-01-05T10:00")
    async with graph_client(graph) as client:
        _, delta_link, _ = await all_pages(client, f"{graph.base_url}/users/{mailbox.id}/calendarView/delta",
                                           **WINDOW)
        graph.reset_delta(mailbox, code=code)
        refused = await client.get(delta_link)
        again, _, _ = await all_pages(client, refused.headers["Location"])
    assert refused.status_code == 410 and refused.json()["error"]["code"] == code
    query = parse_qs(urlparse(refused.headers["Location"]).query, keep_blank_values=True)
    assert query == {"startDateTime": ["2026-01-01T00:00:00Z"], "endDateTime": ["2026-04-01T00:00:00Z"],
                     "$deltatoken": [""]}
    assert [i["subject"] for i in again] == ["One"]


async def test_skip_tokens_can_expire_mid_round(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    for n in range(3):
        mailbox.create_event(f"E{n}", f"2026-01-0{n + 5}T09:00", f"2026-01-0{n + 5}T10:00")
    async with graph_client(graph, odata_maxpagesize="1") as client:
        first = await client.get(f"{graph.base_url}/users/{mailbox.id}/calendarView/delta", params=WINDOW)
        graph.expire_skip_tokens(mailbox)
        refused = await client.get(first.json()["@odata.nextLink"])
    assert first.headers["Preference-Applied"].endswith("odata.maxpagesize=1")
    assert refused.status_code == 410 and refused.json()["error"]["code"] == "SyncStateNotFound"


async def test_replays_and_duplicates(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    event = mailbox.create_event("One", "2026-01-05T09:00", "2026-01-05T10:00")
    delta = f"{graph.base_url}/users/{mailbox.id}/calendarView/delta"
    async with graph_client(graph) as client:
        _, link, _ = await all_pages(client, delta, **WINDOW)
        mailbox.update_event(event, subject="Two")
        changed, link, _ = await all_pages(client, link)
        graph.replay_next_delta_round(mailbox)
        replayed, link, _ = await all_pages(client, link)
        mailbox.delta_duplicates = True
        mailbox.update_event(event, subject="Three")
        doubled, _, _ = await all_pages(client, link)
    assert [i["subject"] for i in changed] == ["Two"] and [i["subject"] for i in replayed] == ["Two"]
    assert [i["subject"] for i in doubled] == ["Three", "Three"]


async def test_a_mailbox_of_ten_thousand_events_syncs_in_pages(graph):
    mailbox = graph.add_mailbox("big@contoso.com")
    mailbox.fill(10_000, start=datetime(2026, 1, 1, tzinfo=UTC), spacing=timedelta(minutes=10))
    async with graph_client(graph, odata_maxpagesize="1000") as client:
        items, link, pages = await all_pages(client, f"{graph.base_url}/users/{mailbox.id}/calendarView/delta",
                                             **WINDOW)
        mailbox.update_event(next(iter(mailbox.events.values())), subject="Changed")
        changed, _, _ = await all_pages(client, link)
    assert len(items) == 10_000 and len({i["id"] for i in items}) == 10_000 and pages == 10
    assert [i["subject"] for i in changed] == ["Changed"]
    assert len(graph.requests(route="delta")) == 11


# ---- limits and faults -------------------------------------------------------------------------------------------

async def test_more_than_four_concurrent_requests_on_a_mailbox_get_429_mailbox_concurrency(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    held = graph.hold(mailbox=mailbox, route="events")
    url = f"{graph.base_url}/users/{mailbox.id}/events"
    async with graph_client(graph) as client:
        first_four = [asyncio.create_task(client.get(url)) for _ in range(4)]
        await graph.wait_in_flight(mailbox, 4)
        over = await asyncio.gather(client.get(url), client.get(url))
        held.release()
        served = await asyncio.gather(*first_four)
    assert [r.status_code for r in over] == [429, 429] and [r.status_code for r in served] == [200] * 4
    assert over[0].json()["error"]["code"] == "ApplicationThrottled"
    assert over[0].json()["error"]["message"] == "Application is over its MailboxConcurrency limit."
    assert over[0].headers["Retry-After"] == "1" and graph.peak_concurrency(mailbox) == 4


async def test_throttling_and_unavailability_carry_retry_after_then_pass(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    graph.throttle(mailbox, retry_after=7, route="delta")
    graph.unavailable(mailbox, retry_after=3, route="delta")
    url = f"{graph.base_url}/users/{mailbox.id}/calendarView/delta"
    async with graph_client(graph) as client:
        answers = [await client.get(url, params=WINDOW) for _ in range(3)]
    assert [(r.status_code, r.headers.get("Retry-After")) for r in answers] == [(429, "7"), (503, "3"), (200, None)]


async def test_a_denied_mailbox_and_an_unknown_one(graph):
    mailbox = graph.add_mailbox("denied@contoso.com")
    graph.deny(mailbox)
    async with graph_client(graph) as client:
        user = await client.get(f"{graph.base_url}/users/denied@contoso.com")
        events = await client.get(f"{graph.base_url}/users/denied@contoso.com/events", params={"$top": "1"})
        unknown_user = await client.get(f"{graph.base_url}/users/nobody@contoso.com")
        unknown_events = await client.get(f"{graph.base_url}/users/nobody@contoso.com/events")
    assert user.status_code == 200 and user.json()["id"] == mailbox.id  # the directory is not what RBAC guards
    assert events.status_code == 403
    assert events.json()["error"]["code"] == "ErrorAccessDenied"
    assert events.json()["error"]["message"] == "Access to OData is disabled."
    assert events.json()["error"]["innerError"]["request-id"] == events.headers["request-id"]
    assert unknown_user.status_code == 404 and unknown_user.json()["error"]["code"] == "Request_ResourceNotFound"
    assert unknown_events.status_code == 404 and unknown_events.json()["error"]["code"] == "ErrorInvalidUser"


async def test_writes_to_a_mailbox_are_refused_and_logged(graph):
    mailbox = graph.add_mailbox("room@contoso.com")
    event = mailbox.create_event("One", "2026-01-05T09:00", "2026-01-05T10:00")
    async with graph_client(graph) as client:
        await client.get(f"{graph.base_url}/users/{mailbox.id}/events")
        assert graph.writes_to_events() == []
        patch = await client.patch(f"{graph.base_url}/users/{mailbox.id}/events/{mailbox.id_of(event)}",
                                   json={"subject": "x"})
        cancel = await client.post(f"{graph.base_url}/users/{mailbox.id}/events/{mailbox.id_of(event)}/cancel")
    assert patch.status_code == 403 and cancel.status_code == 403
    assert [(r.method, r.status) for r in graph.writes_to_events()] == [("PATCH", 403), ("POST", 403)]


# ---- subscriptions ------------------------------------------------------------------------------------------------

async def test_a_subscription_is_validated_renewed_reauthorized_and_deleted(graph, receiver):
    mailbox = graph.add_mailbox("room@contoso.com")
    async with graph_client(graph) as client:
        made = await client.post(f"{graph.base_url}/subscriptions", json=subscription_body(graph, receiver, mailbox))
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        url = f"{graph.base_url}/subscriptions/{sid}"
        renewed = await client.patch(url, json={
            "expirationDateTime": (datetime.now(UTC) + timedelta(minutes=60)).isoformat()})
        no_lifecycle_change = await client.patch(url, json={"lifecycleNotificationUrl": f"{receiver.url}/other"})
        reauthorized = await client.post(f"{url}/reauthorize")
        listed = await client.get(f"{graph.base_url}/subscriptions")
        deleted = await client.delete(url)
        gone = await client.patch(url, json={"expirationDateTime": datetime.now(UTC).isoformat()})
    tokens = [token for path, _body, token in receiver.posts]
    assert [p for p, _b, _t in receiver.posts] == ["/notifications", "/lifecycle"]
    assert all(t.startswith("Validation: Testing client application reachability") for t in tokens)
    assert made.json()["resource"] == f"/users/{mailbox.id}/events"
    assert made.json()["clientState"] == "the-client-state"
    assert renewed.status_code == 200 and no_lifecycle_change.status_code == 400
    assert reauthorized.status_code == 204 and [s["id"] for s in listed.json()["value"]] == [sid]
    assert deleted.status_code == 204 and gone.status_code == 404


@pytest.mark.parametrize(("override", "code"), [
    # A lifetime, not an instant: computed when the request is made (the suite may run long after collection).
    ({"expirationDateTime": timedelta(minutes=10081)}, "ExtensionError"),
    ({"clientState": "x" * 129}, "InvalidRequest"),
    ({"notificationUrl": "http://127.0.0.1:1/plain-http"}, "InvalidRequest"),
    ({"resource": "/me/events"}, "InvalidRequest"),
])
async def test_a_subscription_outside_the_documented_limits_is_refused(graph, receiver, override, code):
    mailbox = graph.add_mailbox("room@contoso.com")
    override = {key: (datetime.now(UTC) + value).isoformat() if isinstance(value, timedelta) else value
                for key, value in override.items()}
    async with graph_client(graph) as client:
        refused = await client.post(f"{graph.base_url}/subscriptions",
                                    json=subscription_body(graph, receiver, mailbox, **override))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == code
    assert graph.subscriptions() == []


async def test_a_short_lifetime_is_raised_to_45_minutes_and_a_longer_one_can_expire(graph, receiver):
    mailbox = graph.add_mailbox("room@contoso.com")
    soon = datetime.now(UTC) + timedelta(minutes=5)
    async with graph_client(graph) as client:
        made = await client.post(f"{graph.base_url}/subscriptions",
                                 json=subscription_body(graph, receiver, mailbox, expirationDateTime=soon.isoformat()))
        graph.state.advance(timedelta(minutes=46))
        expired = await client.get(f"{graph.base_url}/subscriptions/{made.json()['id']}")
    expiry = datetime.fromisoformat(made.json()["expirationDateTime"])
    assert expiry - soon >= timedelta(minutes=39) and expired.status_code == 404


@pytest.mark.parametrize("mode", ["wrong", "hang"])
async def test_an_endpoint_that_does_not_echo_the_token_in_time_fails_validation(graph, receiver, mode):
    mailbox = graph.add_mailbox("room@contoso.com")
    receiver.mode = mode
    graph.settings.validation_timeout = 0.5
    async with graph_client(graph) as client:
        refused = await client.post(f"{graph.base_url}/subscriptions",
                                    json=subscription_body(graph, receiver, mailbox))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "ValidationError"
    assert graph.subscriptions() == []


async def test_a_denied_mailbox_cannot_be_subscribed(graph, receiver):
    mailbox = graph.add_mailbox("room@contoso.com")
    graph.deny(mailbox)
    async with graph_client(graph) as client:
        refused = await client.post(f"{graph.base_url}/subscriptions",
                                    json=subscription_body(graph, receiver, mailbox))
    assert refused.status_code == 403 and "Access to OData is disabled" in refused.json()["error"]["message"]
    assert receiver.posts == []


# ---- notifications -------------------------------------------------------------------------------------------------

async def _subscribe(graph, client, receiver, mailbox, **overrides) -> str:
    made = await client.post(f"{graph.base_url}/subscriptions",
                             json=subscription_body(graph, receiver, mailbox, **overrides))
    assert made.status_code == 201, made.text
    return made.json()["id"]


async def test_notifications_are_batched_duplicated_reordered_and_some_spoilt(graph, receiver):
    first, second = graph.add_mailbox("a@contoso.com"), graph.add_mailbox("b@contoso.com")
    async with graph_client(graph) as client:
        sid_a = await _subscribe(graph, client, receiver, first)
        sid_b = await _subscribe(graph, client, receiver, second, clientState="other-state")
    a = first.create_event("A", "2026-01-05T09:00", "2026-01-05T10:00")
    first.update_event(a, subject="A2")
    b = second.create_event("B", "2026-01-05T09:00", "2026-01-05T10:00")
    deliveries = await graph.deliver_notifications(duplicate=True, out_of_order=True, wrong_client_state=[0])
    assert [d.status for d in deliveries] == [202] and graph.pending_notifications() == 0
    (batch,) = receiver.notifications("/notifications")
    assert [(n["subscriptionId"], n["changeType"]) for n in batch] == [
        (sid_b, "created"), (sid_b, "created"), (sid_a, "updated"), (sid_a, "updated"), (sid_a, "created"),
        (sid_a, "created")]
    assert [n["clientState"] for n in batch][:2] == ["not-the-subscription-client-state", "other-state"]
    item = batch[-1]
    assert item["resource"] == f"Users/{first.id}/Events/{first.id_of(a)}" == item["resourceData"]["@odata.id"]
    assert item["resourceData"]["id"] == first.id_of(a) and item["resourceData"]["@odata.type"] == \
        "#Microsoft.Graph.Event"
    assert item["tenantId"] == graph.tenant_id and item["subscriptionExpirationDateTime"].endswith("Z")
    assert batch[0]["resourceData"]["id"] == second.id_of(b)


async def test_lifecycle_notifications_are_batched_and_take_effect(graph, receiver):
    mailbox = graph.add_mailbox("room@contoso.com")
    async with graph_client(graph) as client:
        sid = await _subscribe(graph, client, receiver, mailbox)
        other = await _subscribe(graph, client, receiver, mailbox)
        subscription, removed = (next(s for s in graph.subscriptions() if s.id == i) for i in (sid, other))
        mailbox.create_event("Lost", "2026-01-05T09:00", "2026-01-05T10:00")
        await graph.send_lifecycle((subscription, "reauthorizationRequired"), (subscription, "missed"),
                                   (removed, "subscriptionRemoved"))
        assert subscription.reauthorization_required and graph.pending_notifications() == 1  # `other`'s only
        assert (await client.post(f"{graph.base_url}/subscriptions/{sid}/reauthorize")).status_code == 204
        renew_removed = await client.patch(f"{graph.base_url}/subscriptions/{other}",
                                           json={"expirationDateTime": datetime.now(UTC).isoformat()})
    (batch,) = receiver.notifications("/lifecycle")
    assert [(n["subscriptionId"], n["lifecycleEvent"]) for n in batch] == [
        (sid, "reauthorizationRequired"), (sid, "missed"), (other, "subscriptionRemoved")]
    assert set(batch[0]) == {"subscriptionId", "subscriptionExpirationDateTime", "tenantId", "clientState",
                             "lifecycleEvent"}
    assert not subscription.reauthorization_required and renew_removed.status_code == 404


async def test_a_mounted_app_gets_the_call_backs_and_notifications_in_process(graph):
    received: list[dict] = []

    async def webhook(request: Request) -> Response:
        if "validationToken" in request.query_params:
            return PlainTextResponse(request.query_params["validationToken"])
        received.append(await request.json())
        return Response(status_code=202)

    app = Starlette(routes=[Route("/hooks/{kind}", webhook, methods=["POST"])])
    mailbox = graph.add_mailbox("room@contoso.com")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://tenet.test") as hooks:
        graph.mount("https://tenet.test", hooks)
        async with graph_client(graph) as client:
            made = await client.post(f"{graph.base_url}/subscriptions", json={
                "changeType": "created,updated,deleted", "notificationUrl": "https://tenet.test/hooks/n",
                "lifecycleNotificationUrl": "https://tenet.test/hooks/l", "resource": f"users/{mailbox.upn}/events",
                "expirationDateTime": (datetime.now(UTC) + timedelta(days=2)).isoformat(), "clientState": "s"})
        event = mailbox.create_event("One", "2026-01-05T09:00", "2026-01-05T10:00")
        mailbox.delete_event(event)
        await graph.deliver_notifications()
    assert made.status_code == 201, made.text
    assert [[n["changeType"] for n in batch["value"]] for batch in received] == [["created", "deleted"]]
    assert received[0]["value"][0]["resourceData"]["id"] == mailbox.id_of(event)
