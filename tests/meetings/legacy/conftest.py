"""Fixtures of the legacy import tests."""

from __future__ import annotations

import pytest

from tests.conftest import test_settings


@pytest.fixture(scope="session")
def settings_for_import(tmp_path_factory):
    """The test settings, session-wide (the property test's examples share them)."""
    return test_settings(data_dir=tmp_path_factory.mktemp("legacy-settings"))
