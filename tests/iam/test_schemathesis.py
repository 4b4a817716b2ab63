"""Property-based fuzzing of the identity routes from the service's own OpenAPI document: no 5xx, and
every answer is one the document describes. Runs against the real server process over HTTP."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tenet.app import create_app
from tests.conftest import test_settings

pytestmark = pytest.mark.live_server

# The document the live server serves is the one this app builds; reading it here (no database needed)
# lets pytest collect one test per operation.
schema = schemathesis.openapi.from_dict(create_app(test_settings()).openapi()).include(
    path_regex=r"^/api/v1/(auth|iam)/"
)


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_identity_routes_never_answer_5xx(case, live_server, live_admin_token):
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {live_admin_token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
