"""Property-based fuzzing of the identity routes from the service's own OpenAPI document: no 5xx, and
every answer is one the document describes. Runs against the real server process over HTTP, as an
administrator, with the ids, emails and refresh tokens of real users and API clients fed into the calls
(tests/support/fuzz.py) — random ids would only ever meet a 404."""

from __future__ import annotations

import pytest
from schemathesis.generation import GenerationMode

from tests.support import widefuzz
from tests.support.fuzz import app_schema, fuzz, identity_world, operations

pytestmark = pytest.mark.live_server

schema = app_schema(r"^/api/v1/(auth|iam)/")
OPERATIONS = operations(schema)
EXAMPLES = {GenerationMode.POSITIVE: 20, GenerationMode.NEGATIVE: 10}
# Deleting a user makes its id answer 404 USER_NOT_FOUND from then on: the right answer.
CONSUMES_IDS = {"DELETE /api/v1/iam/users/{user_id}"}


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_identity_routes_never_answer_5xx(operation, live_server, live_database_url, live_admin_token):
    world = identity_world(live_server.url, live_database_url, live_admin_token)
    tally = fuzz(operation, base_url=live_server.url, world=world, examples=EXAMPLES)
    tally.assert_calls_reached_the_service(consumes_ids=operation.label in CONSUMES_IDS)


@pytest.mark.parametrize("operation", widefuzz.operations("identity"), ids=lambda operation: operation.label)
def test_identity_routes_with_widened_values_never_answer_5xx(operation, live_server, live_database_url,
                                                               live_admin_token):
    """Issue 24: huge exponents, long digit strings, lone surrogates and forged cursors, as an administrator
    with a world of its own (deletions and disabled accounts do not carry over)."""
    world = identity_world(live_server.url, live_database_url, live_admin_token)
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
