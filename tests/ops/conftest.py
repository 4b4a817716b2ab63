from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live import EmbeddedPostgres, fresh_embedded_data_dir


@pytest.fixture
def embedded() -> Iterator[EmbeddedPostgres]:
    """A fresh TENET_DATA_DIR (no DATABASE_URL: the embedded server) whose server never outlives the test."""
    with fresh_embedded_data_dir() as embedded:
        yield embedded
