"""Fixtures of the race tests: the app and people on a database that really commits."""

from __future__ import annotations

import pytest

from tenet.app import create_app
from tenet.workspaces import invitations
from tests.conftest import test_settings
from tests.support.users import UserFactory


@pytest.fixture
def ws_app(committed_db, clock, tmp_path):
    return create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)


@pytest.fixture
def people(ws_app, committed_db, clock) -> UserFactory:
    return UserFactory(ws_app, committed_db, clock)


@pytest.fixture
def policy(ws_app) -> invitations.InvitationPolicy:
    return invitations.InvitationPolicy.from_settings(ws_app.state.settings)


