"""The series recurrence builder (issue 18): the choices become the RRULE shown with its dates (the series commands'
own expansion), and the series is created through the API's model and command; refusals next to their field; no
builder and a refused forgery without meeting:series:manage."""

from __future__ import annotations

import re

import pytest

from tenet.iam.permissions import Role
from tenet.meetings.pages.series_form import FormProblems, rrule
from tests.web.test_console_http import BASE, page_csrf, sign_in


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


def _form(csrf: str, intent: str = "preview", **overrides) -> dict:
    return {"csrf_token": csrf, "intent": intent, "title": "Stand-up", "timezone": "Europe/Berlin",
            "location": "Room 1", "city": "", "start_date": "2026-01-12", "start_local_time": "09:30",
            "duration_minutes": "15", "days": ["MO", "WE"], "interval": "2", "ends": "count", "count": "4",
            "until": "", **overrides}


def _values(**overrides) -> dict:
    return {"days": ["WE", "MO"], "interval": "1", "ends": "count", "count": "3", "until": "", **overrides}


def test_the_builder_writes_the_rule():
    assert rrule(_values()) == "FREQ=WEEKLY;BYDAY=MO,WE;COUNT=3"
    assert rrule(_values(interval="3", ends="until", until="2026-03-31")) == \
        "FREQ=WEEKLY;INTERVAL=3;BYDAY=MO,WE;UNTIL=20260331"
    for bad, field in ((_values(days=[]), "days"), (_values(interval="0"), "interval"),
                       (_values(count="x"), "count"), (_values(ends="until", until="soon"), "until")):
        with pytest.raises(FormProblems) as refused:
            rrule(bad)
        assert list(refused.value.problems) == [field]


async def test_a_manager_previews_the_rule_then_creates_the_series(client, manager):
    await sign_in(client, manager.email)
    assert 'id="new-series"' in (await client.get("/console/meetings")).text
    csrf = await page_csrf(client, "/console/series/new")
    preview = await client.post("/console/series/new", data=_form(csrf))
    assert preview.status_code == 200
    assert '<code id="rrule">FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=4</code>' in preview.text
    # Every other week, Mondays and Wednesdays, four times.
    assert preview.text.count("<li>", preview.text.index('id="preview-dates"')) >= 4
    assert "Monday, January 12, 2026" in preview.text and "Wednesday, January 28, 2026" in preview.text
    assert (await client.get(f"{BASE}/series", headers=manager.headers)).json()["items"] == []

    created = await client.post("/console/series/new", data=_form(csrf, "create"))
    assert created.status_code == 303, created.text
    series_id = re.search(r"series=([0-9a-f-]{36})", created.headers["location"]).group(1)
    listed = await client.get(created.headers["location"])
    assert listed.text.count('data-meeting="') == 4
    made = (await client.get(f"{BASE}/series/{series_id}", headers=manager.headers)).json()
    assert made["rrule"] == "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=4" and made["timezone"] == "Europe/Berlin"


@pytest.mark.parametrize(("overrides", "field", "code"), [
    ({"days": []}, "days", "RECURRENCE_INVALID"),
    ({"count": "5000"}, "ends", "RECURRENCE_TOO_LONG"),
    ({"ends": "until", "until": "2025-01-01"}, "days", "RECURRENCE_INVALID"),
    ({"duration_minutes": "0"}, "duration_minutes", "VALIDATION_FAILED"),
    ({"start_local_time": "25:00"}, "start_local_time", "VALIDATION_FAILED"),
])
async def test_a_refused_rule_is_said_next_to_its_field(client, manager, overrides, field, code):
    await sign_in(client, manager.email)
    csrf = await page_csrf(client, "/console/series/new")
    refused = await client.post("/console/series/new", data=_form(csrf, "create", **overrides))
    assert refused.status_code == 422, refused.text
    assert f'id="e-{field}" class="error field-error" data-code="{code}"' in refused.text
    assert (await client.get(f"{BASE}/series", headers=manager.headers)).json()["items"] == []


async def test_a_leader_gets_no_builder_and_a_forged_one_is_refused(client, users, manager):
    leader = await users.make(roles=[Role.LEADER])
    await sign_in(client, leader.email)
    assert 'id="new-series"' not in (await client.get("/console/meetings")).text
    assert (await client.get("/console/series/new")).status_code == 403
    forged = await client.post("/console/series/new", data=_form(await page_csrf(client), "create"))
    assert forged.status_code == 403
    assert (await client.get(f"{BASE}/series", headers=manager.headers)).json()["items"] == []
