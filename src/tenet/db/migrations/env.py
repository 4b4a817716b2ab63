"""Alembic environment: async engine on psycopg 3, every Tenet schema, procrastinate's tables left alone."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from tenet.db.base import Base
from tenet.db.database import async_url
from tenet.domains import load_all, schemas

load_all()  # every domain's tables on the metadata
APP_SCHEMAS = schemas()

config = context.config
target_metadata = Base.metadata


def include_name(name, type_, parent_names):
    # Autogenerate compares only our schemas; procrastinate's objects live in `public` and are
    # installed verbatim from its own SQL.
    if type_ == "schema":
        return name in APP_SCHEMAS
    return True


def run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_schemas=True,
        include_name=include_name,
        compare_type=True,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL for the migrations")
    # Through a transaction pooler (TENET_DATABASE_PGBOUNCER) nothing may be prepared on the server.
    connect_args = {} if config.attributes.get("prepare", True) else {"prepare_threshold": None}
    engine = create_async_engine(async_url(url), poolclass=pool.NullPool, connect_args=connect_args)
    async with engine.connect() as async_connection:
        await async_connection.run_sync(run_with)
        await async_connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.attributes.get("url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(run_online())
