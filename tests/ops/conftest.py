from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live import EmbeddedPostgres, fresh_embedded_data_dir


@pytest.fixture
def embedded() -> Iterator[EmbeddedPostgres]:
    """A fresh TENET_DATA_DIR (no DATABASE_URL: the embedded server) whose server never outlives the test."""
    with fresh_embedded_data_dir() as embedded:
        yield embedded


@pytest.fixture
def private_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL of this test's own (the embedded server on a fresh data dir, started in this process),
    migrated, which the test may stop and start again; `url` is its `tenet` database."""
    from tenet.db import migrate
    from tenet.db.embedded import EMBEDDED_DATABASE, ensure_database, release_embedded_server, start_embedded_server

    with fresh_embedded_data_dir() as embedded:
        embedded.url = ensure_database(start_embedded_server(embedded.pgdata), EMBEDDED_DATABASE)
        migrate.upgrade(embedded.url)
        try:
            yield embedded
        finally:
            release_embedded_server(embedded.pgdata)
