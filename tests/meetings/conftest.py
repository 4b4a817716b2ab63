"""Fixtures of the meeting-attendance tests: the routes as calls, people of each role, the MA detectors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.iam.permissions import Role
from tenet.kernel.invariants import all_invariants, check
from tenet.kernel.jobs import JobRuntime
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings.codes import CheckInCodes
from tests.support.users import TestUser, UserFactory

BASE = "/api/v1/meeting-attendance"
MA_RULES = [i for i in all_invariants() if i.id.startswith("MA-")]


class MeetingApi:
    """The meeting routes as calls answering raw httpx responses. Each call signs a fresh token at the frozen
    clock's time, so tests may move the clock by days."""

    def __init__(self, client: httpx.AsyncClient, app, clock) -> None:
        self.client = client
        self.app = app
        self.clock = clock

    def headers(self, user: TestUser | None, **extra: str) -> dict[str, str]:
        if user is None:
            return dict(extra)
        token = self.app.state.access_tokens.issue(subject=user.id, kind="user", now=self.clock.now())
        return {"Authorization": f"Bearer {token}", **extra}

    async def call(self, method: str, path: str, user: TestUser | None, *, json: Any = None,
                   params: dict | None = None, headers: dict | None = None) -> httpx.Response:
        return await self.client.request(method, BASE + path, json=json, params=params,
                                         headers=self.headers(user, **(headers or {})))

    def window(self, *, starts_in: timedelta = timedelta(hours=1), minutes: int = 60) -> dict[str, str]:
        start = self.clock.now() + starts_in
        return {"start_time": start.isoformat(), "end_time": (start + timedelta(minutes=minutes)).isoformat()}

    async def create(self, user: TestUser, **body: Any) -> httpx.Response:
        payload = {"title": "Weekly sync", **self.window(), **body}
        return await self.call("POST", "/meetings", user, json=payload)

    async def create_ok(self, user: TestUser, **body: Any) -> dict[str, Any]:
        response = await self.create(user, **body)
        assert response.status_code == 201, response.text
        return response.json()

    async def get(self, user: TestUser | None, meeting_id: str) -> httpx.Response:
        return await self.call("GET", f"/meetings/{meeting_id}", user)

    def offline_code(self, meeting_id: str) -> str:
        """The meeting's offline code, as its printed QR code's address carries it."""
        return CheckInCodes(section(self.app.state.settings, KernelSettings).signing_key(), 30).offline_code(
            meeting_id)

    def _scanned(self, meeting_id: str, mode: str, extra: dict[str, Any]) -> dict[str, Any]:
        """An offline scan carries the offline code unless the test says which code (or None) to send."""
        return {"code": self.offline_code(meeting_id), **extra} if mode == "offline" else extra

    async def check_in(self, user: TestUser, meeting_id: str, device: str | None = None, mode: str = "offline",
                       **extra: Any) -> httpx.Response:
        body = {"mode": mode, "device_id": device or f"dev-{user.id.hex[:12]}",
                **self._scanned(meeting_id, mode, extra)}
        return await self.call("POST", f"/meetings/{meeting_id}/check-in", user, json=body)

    async def guest_check_in(self, meeting_id: str, name: str = "Gwen Guest", device: str | None = None,
                             mode: str = "offline", **extra: Any) -> httpx.Response:
        body = {"mode": mode, "device_id": device or f"dev-{uuid.uuid4().hex[:12]}", "name": name,
                **self._scanned(meeting_id, mode, extra)}
        return await self.call("POST", f"/public/meetings/{meeting_id}/check-in", None, json=body)


def code(response: httpx.Response) -> str:
    return response.json().get("code", "")


async def ma_rules_hold(db: Database, now: datetime | None = None) -> None:
    """Every MA detector finds nothing, judged at the test's clock when given (tenet.now)."""
    async with db.read_only() as session:
        if now is not None:
            await session.execute(text("SELECT set_config('tenet.now', :now, true)"), {"now": now.isoformat()})
        violations = await check(await session.connection(), MA_RULES)
    assert not violations, "invariants violated: " + "; ".join(
        f"{v.invariant.id} ({v.rows} rows, e.g. {v.sample[:2]}{' ' + v.error if v.error else ''})" for v in violations)


@pytest.fixture
def ma(client: httpx.AsyncClient, app, clock) -> MeetingApi:
    return MeetingApi(client, app, clock)


@pytest.fixture
async def manager(users: UserFactory) -> TestUser:
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mina Manager")


@pytest.fixture
async def employee(users: UserFactory) -> TestUser:
    return await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")


@pytest.fixture
async def leader(users: UserFactory) -> TestUser:
    return await users.make(roles=[Role.LEADER], display_name="Leo Leader")


@pytest.fixture
def job_runtime(settings, db: Database, clock) -> Iterator[JobRuntime]:
    yield JobRuntime(db=db, clock=clock, settings=settings)
