"""Fixtures of the social legacy cut-over tests: a fresh migrated database per test (the tools commit batch by
batch, so the rolled-back `db` fixture cannot hold them), the generator's legacy schema in it, and the
connections the tools take."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

import psycopg
import pytest
from tests.conftest import test_settings

from tenet.db.database import Database, libpq_url
from tenet.iam.passwords import Passwords
from tenet.social.legacy import sample
from tenet.social.legacy.engine import Context

NOW_ISO = "2026-03-10T08:00:00+00:00"


@dataclass
class Setup:
    url: str
    db: Database
    legacy: psycopg.AsyncConnection

    async def context(self) -> Context:
        hashed = await Passwords(time_cost=1, memory_kib=1024).hash("a secret nobody keeps")
        return Context(now=datetime.fromisoformat(NOW_ISO), password_hash=hashed, default_timezone="UTC")

    async def scalar(self, statement: str, params: dict | None = None):
        cursor = await self.legacy.execute(statement, params)
        row = await cursor.fetchone()
        return None if row is None else row[0]

    async def rows(self, statement: str, params: dict | None = None) -> list[tuple]:
        cursor = await self.legacy.execute(statement, params)
        return await cursor.fetchall()


@pytest.fixture
def tenet_url(migrated_database, request) -> str:
    name = re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    url = migrated_database(f"sl_{name}")
    return url


async def _setup(url: str, *, size: int | None, dirty: bool) -> AsyncIterator[Setup]:
    legacy = await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True)
    if size is not None:
        await sample.create(legacy, "legacy", sample.generate(size, dirty=dirty), replace=True)
    db = Database.from_url(url, pool_size=2, max_overflow=0, watch_outages=False)
    try:
        yield Setup(url, db, legacy)
    finally:
        await legacy.close()
        await db.dispose()


@pytest.fixture
async def clean(tenet_url: str) -> AsyncIterator[Setup]:
    async for setup in _setup(tenet_url, size=12, dirty=False):
        yield setup


@pytest.fixture
async def dirty(tenet_url: str) -> AsyncIterator[Setup]:
    async for setup in _setup(tenet_url, size=12, dirty=True):
        yield setup


@pytest.fixture
async def bare(tenet_url: str) -> AsyncIterator[Setup]:
    async for setup in _setup(tenet_url, size=None, dirty=False):
        yield setup


@pytest.fixture
def cli_env(tenet_url: str, tmp_path) -> dict[str, str]:
    settings = test_settings(data_dir=tmp_path)
    return {"DATABASE_URL": tenet_url, "TENET_SECRET_KEY": settings.secret_key.get_secret_value(),
            "TENET_PASSWORD_HASH_TIME_COST": "1", "TENET_PASSWORD_HASH_MEMORY_KIB": "1024"}
