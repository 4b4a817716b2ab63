"""Alembic, driven from code so `tenet migrate`, `tenet serve` and the tests share one path."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncConnection

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # File names are YYYY-MM-DD-HHMM_slug.py (ARCHITECTURE.md).
    config.set_main_option(
        "file_template", "%%(year)d-%%(month).2d-%%(day).2d-%%(hour).2d%%(minute).2d_%%(slug)s"
    )
    config.set_main_option("timezone", "UTC")
    if url is not None:
        config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head", *, prepare: bool = True) -> None:
    """`prepare=False` when `url` is a transaction pooler's (no statement prepared on the server)."""
    config = alembic_config(url)
    config.attributes["prepare"] = prepare
    command.upgrade(config, revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def heads() -> tuple[str, ...]:
    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


def head_revision() -> str:
    (head,) = heads()
    return head


async def current_revision(connection: AsyncConnection) -> str | None:
    return await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())
