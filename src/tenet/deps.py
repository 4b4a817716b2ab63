"""What every domain's routes take from the request: the unit of work (writes: `SessionDep`, or `StatementsDep`
for a command in plain statements only), the read path (reads), the clock and the settings.

The request path is lean on purpose (issue 8): no synchronous dependency anywhere (FastAPI runs those in a
thread pool, which cost more than the work), the caller resolved by one dependency (tenet.iam.auth), and
what a handler can take straight from the request (the read path, the clock) taken without a dependency
at all: `reads(request)`, `now(request)`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.clock import Clock
from tenet.kernel.reads import Reads
from tenet.kernel.settings import KernelSettings
from tenet.kernel.statements import Statements


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    # The request is the boundary: this dependency commits (or rolls back) once, before the response
    # is sent (`scope="function"`), so a client never sees a success that was not committed.
    async with request.app.state.db.unit_of_work() as session:
        yield session


async def _transaction(request: Request) -> AsyncIterator[Statements]:
    # The plain unit of work (Database.transaction): for commands whose every change is a plain statement.
    async with request.app.state.db.transaction() as sql:
        yield sql


async def _now(request: Request) -> datetime:
    clock: Clock = request.app.state.clock
    return clock.now()


async def _settings(request: Request) -> KernelSettings:
    settings: KernelSettings = request.app.state.settings
    return settings


SessionDep = Annotated[AsyncSession, Depends(_session, scope="function")]
# The same boundary without the ORM session, for commands written in plain statements only (the check-ins, the
# Outlook webhook, the invitation).
StatementsDep = Annotated[Statements, Depends(_transaction, scope="function")]
NowDep = Annotated[datetime, Depends(_now)]
# The composed settings object; a domain reads its own section with tenet.kernel.settings.section().
SettingsDep = Annotated[KernelSettings, Depends(_settings)]


def reads(request: Request) -> Reads:
    """The transaction-free read path (tenet.kernel.reads) for GET routes."""
    handle: Reads = request.app.state.db.reads
    return handle


def now(request: Request) -> datetime:
    clock: Clock = request.app.state.clock
    return clock.now()


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"
