"""Make users (and their access tokens) without going through the HTTP sign-in each time."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass

from tenet.db.database import Database
from tenet.iam import service as iam_service
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.kernel.clock import FrozenClock
from tests.support.api import bearer

PASSWORD = "a-long-test-password"
_counter = itertools.count(1)


@dataclass(frozen=True)
class TestUser:
    id: uuid.UUID
    email: str
    token: str

    __test__ = False

    @property
    def headers(self) -> dict[str, str]:
        """The token signed when the user was made, at the clock's time then (`Api` signs a fresh one per call)."""
        return bearer(self.token)


class UserFactory:
    def __init__(self, app, db: Database, clock: FrozenClock) -> None:
        self.app = app
        self.db = db
        self.clock = clock

    async def make(self, *, email: str | None = None, roles: list[Role] | None = None,
                   display_name: str = "Test User") -> TestUser:
        email = email or f"user{next(_counter)}-{uuid.uuid4().hex[:6]}@example.com"
        async with self.db.unit_of_work() as session:
            user = await iam_service.create_user(
                session, passwords=self.app.state.passwords, email=email, password=PASSWORD,
                display_name=display_name, now=self.clock.now(), actor=Actor.system(),
                roles=roles if roles is not None else [Role.EMPLOYEE],
            )
        token = self.app.state.access_tokens.issue(subject=user.id, kind="user", now=self.clock.now())
        return TestUser(user.id, email, token)

    async def admin(self) -> TestUser:
        return await self.make(roles=[Role.ADMINISTRATOR], display_name="Admin")
