"""Forged cursors: every list route of the OpenAPI document answers 400 INVALID_CURSOR to a cursor it did not
issue, whatever JSON the cursor holds: a boolean where an integer belongs (`true` is an `int` to Python, a
`boolean` to PostgreSQL), a string PostgreSQL cannot hold (a lone surrogate, a NUL), an integer past 64 bits,
a datetime or UUID marker around something that is not text. Never a database error, never a 500."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from tenet.app import create_app
from tenet.kernel.pagination import decode_cursor, encode_cursor
from tests.conftest import test_settings

_DOCUMENT = create_app(test_settings()).openapi()
LIST_ROUTES = sorted(path for path, operations in _DOCUMENT["paths"].items()
                     if any(p.get("name") == "cursor" for p in operations.get("get", {}).get("parameters", [])))
# What a forged cursor may hold in one position of the sort key, none of which a list ever issued.
FORGED = [True, False, "\ud800", "a\x00b", 2**64, -(2**63) - 1, {"u": 1}, {"u": ["x"]}, {"t": 5}, {"t": None},
          None, 1.5, [], {}]


def forged(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).rstrip(b"=").decode()


@pytest.fixture
async def paths(client, users, db, clock) -> tuple[dict[str, str], dict[str, str]]:
    """An administrator who can see one of every listed thing: path values, and the query each list requires."""
    admin = await users.admin()
    headers = admin.headers
    api = "/api/v1"

    async def made(path: str, body: dict[str, Any]) -> str:
        response = await client.post(api + path, json=body, headers=headers)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    start = clock.now() + timedelta(hours=1)
    async with db.unit_of_work() as session:
        await session.execute(text("INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) "
                                   "VALUES ('H1', :n, :n)"), {"n": clock.now()})
    values = {
        "workspace_id": await made("/workspaces", {"name": "Listed"}),
        "group_id": await made("/social/groups", {"name": "Listed"}),
        "job_id": await made("/social/automations", {"name": "Digest", "job_type": "todo_digest",
                                                     "schedule_type": "daily", "schedule_time": "09:00"}),
        "meeting_id": await made("/meeting-attendance/meetings", {
            "title": "Listed", "start_time": start.isoformat(), "end_time": (start + timedelta(hours=1)).isoformat()}),
        "hotel_id": "H1",
    }
    return headers, values


HOTEL_QUERY = ("/reservations/orders", "/reservations/audit-logs")  # lists that require `hotel_id`


def _url(path: str, values: dict[str, str]) -> str:
    filled = path.format(**values)
    return filled + ("?hotel_id=H1&" if path.endswith(HOTEL_QUERY) else "?")


def test_every_list_route_is_covered():
    assert len(LIST_ROUTES) >= 25  # the lists of the five domains when this test was written


@pytest.mark.parametrize("path", LIST_ROUTES)
async def test_a_forged_cursor_is_400_invalid_cursor_on_every_list(client, paths, path):
    headers, values = paths
    url = _url(path, values)
    wrong = []
    for width in (1, 2, 3):
        for value in FORGED:
            for position in range(width):
                key: list[Any] = [{"t": "2026-01-05T09:00:00+00:00"}] * width
                key[position] = value
                response = await client.get(f"{url}cursor={forged(key)}", headers=headers)
                if (response.status_code, response.json().get("code")) != (400, "INVALID_CURSOR"):
                    wrong.append((key, response.status_code, response.text[:200]))
    assert wrong == []


def test_cursors_round_trip_their_own_kinds():
    import uuid
    from datetime import UTC, datetime

    key = [datetime(2026, 1, 5, 9, tzinfo=UTC), uuid.UUID(int=7), 2**63 - 1, "Zoë"]
    assert decode_cursor(encode_cursor(key), (datetime, uuid.UUID, int, str)) == key
