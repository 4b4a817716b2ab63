"""Property-based fuzzing of the workspace routes from the service's own OpenAPI document: no 5xx, and every
answer (status, content type, body) is one the document describes. Runs against the real server process."""

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

schema = schemathesis.openapi.from_dict(create_app(test_settings()).openapi()).include(
    path_regex=r"^/api/v1/(workspaces|invitations)"
)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_workspace_routes_never_answer_5xx(case, live_server, live_admin_token):
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {live_admin_token}"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
