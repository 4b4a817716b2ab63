"""The two public webhook routes (`/outlook/notifications`, `/outlook/lifecycle`) with the sync ON (credentials and
clientState configured), against bodies no Graph sends (issue 17, the outside audit's third and fourth findings; the
API fuzz suites miss these routes: their server runs with the sync off, so every item is dropped unread).

Promises: never a 5xx; a body that is not Graph's `{"value": [...]}` collection (deep nesting included) is 400 like
any malformed body; inside a collection, an item Tenet cannot use (a wrong clientState, a field PostgreSQL cannot hold:
a lone surrogate, a NUL; a field of the wrong type) is dropped and counted, and the batch's good items are kept: the
answer is 202, or Graph would retry the whole batch for hours."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.meetings.outlook import tasks
from tests.meetings.conftest import BASE
from tests.meetings.outlook.conftest import CLIENT_STATE
from tests.support.widefuzz import KEYS, NUMBERS, STRINGS, Raw, encode_json

ROUTES = {"notifications": "CHANGE", "lifecycle": "LIFECYCLE"}
MAX_ITEMS = 1000


def good(route: str, marker: str) -> dict[str, Any]:
    """An item as Graph sends it, its subscriptionId naming the batch (so the test finds what was kept)."""
    if route == "lifecycle":
        return {"subscriptionId": marker, "subscriptionExpirationDateTime": "2026-01-08T09:00:00Z",
                "lifecycleEvent": "missed", "clientState": CLIENT_STATE, "tenantId": "t", "resource": "Users/u/Events"}
    return {"subscriptionId": marker, "subscriptionExpirationDateTime": "2026-01-08T09:00:00Z",
            "changeType": "updated", "clientState": CLIENT_STATE, "tenantId": "t",
            "resource": "Users/u/Events/AAkALgAA", "resourceData": {
                "@odata.type": "#Microsoft.Graph.Event", "@odata.id": "Users/u/Events/AAkALgAA",
                "@odata.etag": 'W/"1"', "id": "AAkALgAA"}}


async def _kept(db, marker: str) -> int:
    async with db.read_only() as session:
        return (await session.execute(text(
            "SELECT count(*) FROM meeting_attendance.outlook_notifications WHERE graph_subscription_id = :m"),
            {"m": marker})).scalar_one()


async def _post(client, route: str, body: bytes):
    return await client.post(f"{BASE}/outlook/{route}", content=body, headers={"Content-Type": "application/json"})


# --- the audit's reproductions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
async def test_a_lone_surrogate_anywhere_drops_that_item_only(client, db, route):
    marker = f"good-{route}"
    spoilt: list[dict[str, Any]] = [{"clientState": "\ud800"}, {**good(route, "bad-1"), "clientState": "\ud800x"},
                                    {**good(route, "\ud800")}, {**good(route, "bad-2"), "subscriptionId": "a\udfffb"}]
    if route == "notifications":
        spoilt += [{**good(route, "bad-3"), "resourceData": {"id": "\ud800"}},
                   {**good(route, "bad-4"), "resource": "Users/u/Events/\ud83d"},
                   {**good(route, "bad-5"), "changeType": "\ud800"}]
    else:
        spoilt += [{**good(route, "bad-3"), "lifecycleEvent": "\ud800"}]
    only = await _post(client, route, encode_json({"value": [{"clientState": "\ud800"}]}))
    assert only.status_code == 202, only.text
    mixed = await _post(client, route, encode_json({"value": [good(route, marker), *spoilt, good(route, marker)]}))
    assert mixed.status_code == 202, mixed.text
    assert await _kept(db, marker) == 2
    async with db.read_only() as session:
        assert (await session.execute(text("SELECT count(*) FROM meeting_attendance.outlook_notifications"))
                ).scalar_one() == 2


@pytest.mark.parametrize("route", ROUTES)
async def test_a_nul_in_a_field_drops_that_item_not_the_batch(client, db, route):
    field = "changeType" if route == "notifications" else "lifecycleEvent"
    body = {"value": [good(route, "good"), {**good(route, "bad"), field: "upd\x00ated"},
                      {**good(route, "bad"), "subscriptionId": "s\x00"}, good(route, "good")]}
    response = await _post(client, route, encode_json(body))
    assert response.status_code == 202, response.text
    assert await _kept(db, "good") == 2 and await _kept(db, "bad") == 0


@pytest.mark.parametrize("route", ROUTES)
async def test_deep_nesting_is_a_400_like_any_malformed_body(client, route):
    depth = 100_000
    response = await _post(client, route, b'{"value":' + b"[" * depth + b"]" * depth + b"}")
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/problem+json")
    inside = await _post(client, route, b'{"value": [{"clientState": ' + b"[" * depth + b"]" * depth + b"}]}")
    assert inside.status_code == 400


# --- the widened fuzz over both routes, sync on -----------------------------------------------------------------

def _hostile_values() -> list[Any]:
    deep: Any = []
    for _ in range(50):
        deep = [deep]
    return [*NUMBERS, *STRINGS, None, True, False, 0, -1, 1.5, [], {}, [CLIENT_STATE], {"id": CLIENT_STATE}, deep,
            "x" * 10_000]


def _spoilt_items(route: str) -> list[dict[str, Any]]:
    """The good item with one of its members (or a member of resourceData) replaced by a hostile value, or a hostile
    member name added; some keep the right clientState, so they reach the code past the check."""
    base = good(route, "hostile")
    items: list[dict[str, Any]] = []
    for name, value in itertools.product([*base, "resourceData.id"], _hostile_values()):
        item = json.loads(json.dumps(base))
        if name == "resourceData.id":
            if route != "notifications":
                continue
            item["resourceData"]["id"] = value
        else:
            item[name] = value
        items.append(item)
    for key, value in itertools.product(KEYS, ["\ud800", Raw("1e400000"), "a\x00b", {"\ud800": "\x00"}]):
        items.append({**base, key: value})
    return items


def _batches(route: str) -> list[tuple[str, bytes]]:
    """(marker, body): each batch holds spoilt items and two good ones named by the marker."""
    found = []
    items = _spoilt_items(route)
    for n in range(0, len(items), 40):
        marker = f"good-{route}-{n}"
        found.append((marker, encode_json({"value": [good(route, marker), *items[n:n + 40],
                                                     good(route, marker)]})))
    # 1,000 items (the most a batch may hold): hostile ones with the right clientState, two good ones.
    small = [item for item in items if len(encode_json(item)) < 700]
    marker = f"good-{route}-full"
    crowd = list(itertools.islice(itertools.cycle(small), MAX_ITEMS - 2))
    found.append((marker, encode_json({"value": [good(route, marker), *crowd, good(route, marker)]})))
    return found


BODIES = [b"", b"null", b"[]", b"{}", b'{"value": null}', b'{"value": 3}', b'{"value": "x"}', b'{"value": [1]}',
          b'{"value": [[]]}', b'{"value": [null]}', b'{"value": {}}', b"\xff\xfe", b'{"value": [\x00]}',
          b'{"\\ud800": []}', b'{"value": [' + b"{}, " * MAX_ITEMS + b"{}]}", b"1e400000", b"9" * 5000,
          b'{"value": [], "value": 1}', b'{"value": [{"clientState": "' + CLIENT_STATE.encode() + b'"}]',
          b"[" * 100_000, b'{"value": [' + b'{"a":' * 30_000 + b"1" + b"}" * 30_000 + b"]}"]


@pytest.mark.parametrize("route", ROUTES)
async def test_hostile_bodies_never_get_a_5xx_and_good_items_beside_them_are_kept(client, db, route,
                                                                                  job_runtime):
    seen: dict[int, int] = {}
    for marker, body in _batches(route):
        response = await _post(client, route, body)
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert response.status_code == 202, (response.status_code, response.text[:300], body[:300])
        assert await _kept(db, marker) == 2, marker
    for body in BODIES:
        response = await _post(client, route, body)
        assert response.status_code < 500, (response.status_code, response.text[:300], body[:100])
        if response.status_code >= 400:
            assert response.headers["content-type"].startswith("application/problem+json"), body[:100]
    # What was stored (good items, and items spoilt only where Tenet reads nothing) is work the worker can do.
    result = await run_now(tasks.outlook_process_notifications, job_runtime)
    assert result["notifications"] > 0
    async with db.read_only() as session:
        assert (await session.execute(text("SELECT count(*) FROM meeting_attendance.outlook_notifications "
                                           "WHERE status = 'PENDING'"))).scalar_one() == 0
