"""Who is calling: a signed-in user or an API client, with what they may do."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from tenet.kernel.audit import Actor


@dataclass(frozen=True)
class UserProfile:
    """What the principal query already knows about a signed-in user (saves /auth/me a round trip)."""

    email: str
    display_name: str
    status: str
    created_at: datetime


@dataclass(frozen=True)
class Principal:
    kind: Literal["user", "client"]
    id: uuid.UUID
    roles: frozenset[str] = frozenset()
    permissions: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()
    hotel_ids: frozenset[str] = frozenset()
    profile: UserProfile | None = None

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    @property
    def actor(self) -> Actor:
        return Actor.user(self.id) if self.kind == "user" else Actor.client(self.id)

    def can(self, permission: str) -> bool:
        return permission in self.permissions

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes
