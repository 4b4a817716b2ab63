"""Fixtures of the race tests: the app and people on a database that really commits (`committed_db`).

Every race file uses these: `committed_app` is the application on the committed database (requests through it
run on real parallel connections), `people` makes users on it. A race that needs other settings builds its own
app with `create_app(test_settings(...), database=committed_db, ...)` in the test.
"""

from __future__ import annotations

import pytest

from tenet.app import create_app
from tenet.workspaces import invitations
from tests.conftest import test_settings
from tests.support.users import UserFactory


@pytest.fixture
def committed_app(committed_db, clock, tmp_path):
    return create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)


@pytest.fixture
def people(committed_app, committed_db, clock) -> UserFactory:
    return UserFactory(committed_app, committed_db, clock)


@pytest.fixture
def policy(committed_app) -> invitations.InvitationPolicy:
    return invitations.InvitationPolicy.from_settings(committed_app.state.settings)
