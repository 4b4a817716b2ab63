"""FastAPI dependencies shared by every domain's routes: the unit of work, the clock, the settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.clock import Clock
from tenet.settings import Settings


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    # The request is the boundary: this dependency commits (or rolls back) once, before the response
    # is sent (`scope="function"`), so a client never sees a success that was not committed.
    async with request.app.state.db.unit_of_work() as session:
        yield session


def _now(request: Request) -> datetime:
    clock: Clock = request.app.state.clock
    return clock.now()


def _settings(request: Request) -> Settings:
    return request.app.state.settings


SessionDep = Annotated[AsyncSession, Depends(_session, scope="function")]
NowDep = Annotated[datetime, Depends(_now)]
SettingsDep = Annotated[Settings, Depends(_settings)]


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"
