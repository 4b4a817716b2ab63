"""Property-based fuzzing of the agenda routes from the service's own OpenAPI document, against the real server
process as an administrator who owns a real agenda (a meeting, a section, an item, a task, files): path ids are
real half of the time. No 5xx, and every answer is one the document describes."""

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

from tests.meetings.agenda.conftest import BOUNDARY, PDF, multipart
from tests.support import widefuzz
from tests.support.fuzz import World, app_schema

pytestmark = pytest.mark.live_server

AGENDA = (r"^/api/v1/meeting-attendance/"
          r"(meetings/[^/]+/(agenda|attachments)|agenda|agenda-items|upload-tasks|me/upload-tasks|attachments)")
schema = app_schema(AGENDA)


@pytest.fixture(scope="module")
def real_agenda(live_server, live_admin_token) -> dict[str, str]:
    return make_agenda(live_server, live_admin_token)


def make_agenda(live_server, live_admin_token) -> dict[str, str]:
    """A meeting with a section, an item, an upload task and a file, by the path parameter names of each."""
    base = f"{live_server.url}/api/v1/meeting-attendance"
    headers = {"Authorization": f"Bearer {live_admin_token}"}
    start = datetime.now(UTC) + timedelta(hours=1)
    with httpx.Client(base_url=base, headers=headers) as client:
        me = httpx.get(f"{live_server.url}/api/v1/auth/me", headers=headers).json()
        meeting = client.post("/meetings", json={"title": "Fuzzed agenda", "start_time": start.isoformat(),
                                                 "end_time": (start + timedelta(hours=1)).isoformat()}).json()
        section = client.post(f"/meetings/{meeting['id']}/agenda/sections", json={"title": "S"}).json()
        item = client.post(f"/agenda/sections/{section['id']}/items", json={"title": "I"}).json()
        task = client.post(f"/agenda/items/{item['id']}/upload-tasks",
                           json={"assignee_user_ids": [me["user"]["id"]]}).json()["items"][0]
        upload = client.post(f"/agenda-items/{item['id']}/attachments",
                             content=multipart([("file", "a.pdf", "application/pdf", PDF)]),
                             headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
        upload.raise_for_status()
    return {"meeting_id": meeting["id"], "section_id": section["id"], "item_id": item["id"], "task_id": task["id"],
            "attachment_id": upload.json()["id"]}


@schema.parametrize()
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_agenda_routes_never_answer_5xx(case, live_server, live_admin_token, real_agenda):
    for name, value in (case.path_parameters or {}).items():
        if name in real_agenda and str(value)[:1] in "01234567":
            case.path_parameters[name] = real_agenda[name]  # half of the cases hit real rows
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {live_admin_token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


@pytest.mark.parametrize("operation", widefuzz.operations("agenda"), ids=lambda operation: operation.label)
def test_agenda_routes_with_widened_values_never_answer_5xx(operation, live_server, live_admin_token):
    """Issue 24: huge exponents, long digit strings (in Range headers too), lone surrogates and forged cursors,
    on an agenda of its own (a deletion does not carry over to the next operation)."""
    pools = {name: [value] for name, value in make_agenda(live_server, live_admin_token).items()}
    world = World(headers={"Authorization": f"Bearer {live_admin_token}"}, path=pools)
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
