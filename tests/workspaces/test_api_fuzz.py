"""Property-based fuzzing of the workspace routes from the service's own OpenAPI document: no 5xx, and every
answer (status, content type, body) is one the document describes. Runs against the real server process, as
the owner of a real workspace with members and pending invitations, with real ids fed into the calls (see
tests/support/fuzz.py) — a stranger's calls would all stop at the membership check's 404."""

from __future__ import annotations

import pytest
from schemathesis.generation import GenerationMode

from tests.support import widefuzz
from tests.support.fuzz import app_schema, fuzz, operations, workspace_world

pytestmark = pytest.mark.live_server

schema = app_schema(r"^/api/v1/(workspaces|invitations)")
OPERATIONS = operations(schema)
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 10}
# Removing a member makes its id answer 404 MEMBER_NOT_FOUND from then on: the right answer.
CONSUMES_IDS = {"DELETE /api/v1/workspaces/{workspace_id}/members/{user_id}"}


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_workspace_routes_never_answer_5xx(operation, live_server, live_database_url):
    world = workspace_world(live_server.url, live_database_url)
    tally = fuzz(operation, base_url=live_server.url, world=world, examples=EXAMPLES)
    tally.assert_calls_reached_the_service(consumes_ids=operation.label in CONSUMES_IDS)


@pytest.mark.parametrize("operation", widefuzz.operations("workspaces"), ids=lambda operation: operation.label)
def test_workspace_routes_with_widened_values_never_answer_5xx(operation, live_server, live_database_url):
    """Issue 24: huge exponents, long digit strings, lone surrogates and forged cursors, as the owner of a world
    of its own (a deletion would leave the next operations nothing but WORKSPACE_NOT_ACTIVE)."""
    world = workspace_world(live_server.url, live_database_url)
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
