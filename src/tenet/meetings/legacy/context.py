"""What one import run knows while it goes through the tables in order: the settings it fills gaps with and the
Tenet key each legacy row became (or why it has none), so later tables can map their foreign keys."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from tenet.meetings.legacy.engine import Refused
from tenet.meetings.service import MeetingPolicy


@dataclass(frozen=True)
class Defaults(MeetingPolicy):
    """The meeting commands' policy, plus how long guests' data is kept (imported guests past it are erased)."""

    guest_retention_days: int = 90


@dataclass
class MeetingFacts:
    id: str
    start: datetime
    end: datetime
    opens_minutes: int
    grace_minutes: int
    organizer: uuid.UUID
    tenet_status: str  # as it is in Tenet now (ACTIVE for a row this run inserts)
    wanted_status: str  # ACTIVE, CANCELLED or DELETED, as the legacy row says
    cancelled_at: datetime | None = None
    cancel_reason: str | None = None
    deleted_at: datetime | None = None


@dataclass
class Context:
    now: datetime
    defaults: Defaults
    password_hash: str  # of a random secret nobody knows: created accounts have no usable password
    users: dict[str, uuid.UUID] = field(default_factory=dict)
    user_by_email: dict[str, uuid.UUID] = field(default_factory=dict)
    inactive_users: set[uuid.UUID] = field(default_factory=set)
    series: dict[str, tuple[uuid.UUID, str]] = field(default_factory=dict)
    meetings: dict[str, MeetingFacts] = field(default_factory=dict)
    templates: dict[str, uuid.UUID] = field(default_factory=dict)
    # Legacy ids of rows refused this run, so a dependent row says "refused" rather than "unknown".
    refused: dict[str, set[str]] = field(default_factory=dict)

    def user(self, legacy_id: object, role: str) -> uuid.UUID:
        """The account a legacy user id maps to, or Refused saying why there is none."""
        key = str(legacy_id).strip() if legacy_id is not None else ""
        if not key:
            raise Refused(f"no {role}")
        if key in self.users:
            return self.users[key]
        if key in self.refused.get("users", set()):
            raise Refused(f"{role} {key} was refused (see users)")
        raise Refused(f"{role} {key} is not a user of the file")

    def optional_user(self, legacy_id: object) -> uuid.UUID | None:
        return self.users.get(str(legacy_id).strip()) if legacy_id is not None else None

    def meeting(self, legacy_id: object) -> MeetingFacts:
        key = str(legacy_id) if legacy_id is not None else ""
        if key in self.meetings:
            return self.meetings[key]
        if key in self.refused.get("meetings", set()):
            raise Refused(f"its meeting {key} was refused (see meetings)")
        raise Refused(f"its meeting {key or '(none)'} is not in the file")
