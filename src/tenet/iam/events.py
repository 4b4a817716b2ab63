"""Events identity publishes (handled in the same unit of work; see tenet.kernel.events).

Identity publishes while it holds the account's row lock (FOR UPDATE), the first lock in the global
order; handlers of later domains lock their own rows after it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from tenet.kernel.audit import Actor
from tenet.kernel.events import Event


@dataclass(frozen=True)
class AccountCreated(Event):
    """A new account exists (registration, an administrator, create-admin). Domains that keep something for
    every account (social: a profile and an agent) create it here, in the same transaction."""

    user_id: uuid.UUID
    actor: Actor
    now: datetime


@dataclass(frozen=True)
class AccountDeleted(Event):
    """An account is being deleted (its row is locked; the transition to `deleted` follows). Handlers end
    what the account held, or refuse the deletion with a DomainError (workspaces: the last owner)."""

    user_id: uuid.UUID
    actor: Actor
    now: datetime


@dataclass(frozen=True)
class AccountRolesChanged(Event):
    """An account's system roles changed (the account row is locked). Domains that audit role changes in their
    own log (spec 001: meeting attendance) record it here."""

    user_id: uuid.UUID
    before: tuple[str, ...]
    after: tuple[str, ...]
    actor: Actor
    now: datetime
