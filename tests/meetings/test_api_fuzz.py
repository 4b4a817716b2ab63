"""Property-based fuzzing of the meeting-attendance routes from the service's own OpenAPI document: no 5xx, and
every answer (status, content type, body) is one the document describes. Runs against the real server process,
as an administrator who owns real meetings (so ids in paths are sometimes real ones)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import widefuzz
from tests.support.fuzz import World, app_schema

pytestmark = pytest.mark.live_server

schema = app_schema(r"^/api/v1/meeting-attendance/")


@pytest.fixture(scope="module")
def real_meeting(live_server, live_admin_token) -> str:
    """A meeting of the administrator, open for check-in now."""
    start = datetime.now(UTC) - timedelta(minutes=5)
    response = httpx.post(f"{live_server.url}/api/v1/meeting-attendance/meetings",
                          headers={"Authorization": f"Bearer {live_admin_token}"},
                          json={"title": "Fuzzed", "start_time": start.isoformat(),
                                "end_time": (start + timedelta(hours=2)).isoformat()})
    response.raise_for_status()
    return response.json()["id"]


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_meeting_routes_never_answer_5xx(case, live_server, live_admin_token, real_meeting):
    if "meeting_id" in (case.path_parameters or {}) and case.path_parameters["meeting_id"][:1] in "0123456789abcdef":
        case.path_parameters["meeting_id"] = real_meeting  # half of the cases hit a real meeting
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {live_admin_token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )



@pytest.fixture
def meeting_rows(live_server, live_admin_token) -> dict[str, list[str]]:
    """Real ids for the widened pass, made for each operation (a deletion does not carry over): a meeting open
    for check-in, its attendances, a series and a template."""
    base = f"{live_server.url}/api/v1/meeting-attendance"
    headers = {"Authorization": f"Bearer {live_admin_token}"}
    start = datetime.now(UTC) - timedelta(minutes=5)
    with httpx.Client(base_url=base, headers=headers) as client:
        real_meeting = client.post("/meetings", json={
            "title": "Fuzzed", "start_time": start.isoformat(),
            "end_time": (start + timedelta(hours=2)).isoformat()}).raise_for_status().json()["id"]
        template = client.post("/templates", json={"label": "Fuzz template", "title": "Fuzzed", "duration_minutes": 30})
        series = client.post("/series", json={"title": "Fuzz series", "timezone": "UTC", "start_date": "2026-03-02",
                                              "start_local_time": "09:00", "duration_minutes": 30,
                                              "rrule": "FREQ=WEEKLY;COUNT=3"})
        attendances = client.get(f"/meetings/{real_meeting}/attendances")
        for answer in (template, series, attendances):
            answer.raise_for_status()
    return {"meeting_id": [real_meeting], "template_id": [template.json()["id"]],
            "series_id": [series.json()["series"]["id"]],
            "attendance_id": [a["id"] for a in attendances.json()["items"] if a.get("id")] or [real_meeting]}


@pytest.mark.parametrize("operation", widefuzz.operations("meetings"), ids=lambda operation: operation.label)
def test_meeting_routes_with_widened_values_never_answer_5xx(operation, live_server, live_admin_token, meeting_rows):
    """Issue 24: huge exponents, long digit strings, lone surrogates and forged cursors, on real rows."""
    world = World(headers={"Authorization": f"Bearer {live_admin_token}"}, path=meeting_rows)
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
