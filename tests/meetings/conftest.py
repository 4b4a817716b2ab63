"""Fixtures of the meeting-attendance tests: the API client over the meeting routes (tests/support/api.py) and
people of each role."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tenet.iam.permissions import Role
from tenet.kernel.settings import KernelSettings, section
from tenet.meetings.codes import CheckInCodes
from tests.support.api import Api
from tests.support.users import TestUser, UserFactory

BASE = "/api/v1/meeting-attendance"


class MeetingApi(Api):
    """The meeting routes as calls answering raw httpx responses (`call`, `headers` from `Api`; `None` for
    the anonymous guest routes)."""

    base = BASE

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

    async def meeting(self, user: TestUser | None, meeting_id: str) -> httpx.Response:
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
