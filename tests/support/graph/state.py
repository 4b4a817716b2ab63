"""Everything one emulator run holds (replaced whole by `GraphEmulator.reset`): the app registration, mailboxes,
tokens, delta states, subscriptions, pending notifications, faults and the request log."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.graph.delta import DeltaEngine
from tests.support.graph.mailbox import Mailbox
from tests.support.graph.subscriptions import Delivery, Pending, Subscription


@dataclass
class Fault:
    """An error answered instead of the real one while `times` lasts (None: until cleared). Matches on the route
    name (see `ROUTES` in routes.py), the mailbox (id) and the method when given."""

    status: int
    code: str
    message: str
    retry_after: int | None = None
    route: str | None = None
    mailbox: str | None = None
    method: str | None = None
    times: int | None = 1

    def matches(self, route: str, mailbox: str | None, method: str) -> bool:
        return _rule_matches(self, route, mailbox, method)


@dataclass
class Latency:
    """Seconds added to matching requests, or with `gate`: matching requests wait (in flight, counted against the
    mailbox's concurrency) until the test sets the gate, so a race can be staged without timing."""

    seconds: float
    route: str | None = None
    mailbox: str | None = None
    method: str | None = None
    times: int | None = None
    gate: threading.Event | None = None

    def release(self) -> None:
        if self.gate is not None:
            self.gate.set()

    def matches(self, route: str, mailbox: str | None, method: str) -> bool:
        return _rule_matches(self, route, mailbox, method)


def _rule_matches(rule: Fault | Latency, route: str, mailbox: str | None, method: str) -> bool:
    return ((rule.route is None or rule.route == route) and (rule.mailbox is None or rule.mailbox == mailbox)
            and (rule.method is None or rule.method == method) and (rule.times is None or rule.times > 0))


@dataclass
class LoggedRequest:
    """One request the emulator received. `path` is as sent (under /v1.0 for Graph); `route` its name; `mailbox`
    the mailbox's id when the path names one; `prefer` the Prefer preferences (lower-case names)."""

    api: str  # "graph" or "identity"
    method: str
    path: str
    route: str
    query: dict[str, str]
    mailbox: str | None
    prefer: dict[str, str]
    client_request_id: str | None
    request_id: str
    authorized: bool
    body: Any = None
    status: int = 0
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def immutable_id(self) -> bool:
        return self.prefer.get("idtype", "").lower() == "immutableid"


@dataclass
class Token:
    expires_at: float  # time.time(): what MSAL measures its cache against
    scope: str
    revoked: bool = False


@dataclass
class Settings:
    """Knobs a test may turn (`graph.settings.x = ...`)."""

    concurrency_limit: int = 4  # concurrent requests per mailbox (Outlook's limit), beyond: 429 MailboxConcurrency
    concurrency_retry_after: int = 1
    subscription_max_minutes: int = 10080  # Outlook events, current docs (4,230 in older ones)
    subscription_min_minutes: int = 45  # shorter lifetimes are raised to this
    validation_timeout: float = 10.0
    require_https_notification_url: bool = True
    token_lifetime: int = 3599
    default_page_size: int = 10
    original_start_requires_select: bool = False  # Graph sometimes returns originalStart only when $select'ed


class State:
    def __init__(self, *, tenant_id: str | None = None, client_id: str | None = None,
                 client_secret: str = "emulator-client-secret") -> None:
        self.lock = threading.RLock()
        self.tenant_id = tenant_id or str(uuid.uuid4())
        self.tenant_domain = "contoso.onmicrosoft.com"
        self.client_id = client_id or str(uuid.uuid4())
        self.client_secret = client_secret
        self.settings = Settings()
        self.mailboxes: dict[str, Mailbox] = {}
        self.tokens: dict[str, Token] = {}
        self.delta = DeltaEngine()
        self.subscriptions: dict[str, Subscription] = {}
        self.pending: list[Pending] = []
        self.faults: list[Fault] = []
        self.latencies: list[Latency] = []
        self.in_flight: dict[str, int] = {}
        self.peak_in_flight: dict[str, int] = {}
        self.log: list[LoggedRequest] = []
        self.deliveries: list[Delivery] = []
        self._frozen: datetime | None = None
        self._offset = timedelta()

    # ---- time: subscriptions' lifetimes and lastModifiedDateTime follow this clock ------------------------------

    def now(self) -> datetime:
        return self._frozen if self._frozen is not None else datetime.now(UTC) + self._offset

    def set_now(self, moment: datetime) -> None:
        self._frozen = moment.astimezone(UTC)

    def advance(self, delta: timedelta) -> None:
        if self._frozen is not None:
            self._frozen += delta
        else:
            self._offset += delta

    # ---- look-ups ---------------------------------------------------------------------------------------------

    def mailbox(self, segment: str) -> Mailbox | None:
        """The mailbox a path segment names: its id or its UPN, in any case."""
        wanted = segment.lower()
        for mailbox in self.mailboxes.values():
            if mailbox.id.lower() == wanted or mailbox.upn.lower() == wanted:
                return mailbox
        return None

    def live_subscription(self, subscription_id: str) -> Subscription | None:
        """The subscription unless it expired (Graph deletes an unrenewed subscription at its expiry)."""
        subscription = self.subscriptions.get(subscription_id)
        if subscription is not None and subscription.expiration <= self.now():
            del self.subscriptions[subscription_id]
            return None
        return subscription

    def queue_change(self, mailbox: Mailbox, change_type: str, item_id: str) -> None:
        for subscription in list(self.subscriptions.values()):
            if subscription.mailbox is mailbox and change_type in subscription.change_types:
                self.pending.append(Pending(subscription.id, change_type, item_id))

    def take_fault(self, route: str, mailbox: str | None, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(route, mailbox, method):
                if fault.times is not None:
                    fault.times -= 1
                return fault
        return None

    def latency_for(self, route: str, mailbox: str | None, method: str) -> tuple[float, list[threading.Event]]:
        total, gates = 0.0, []
        for rule in self.latencies:
            if rule.matches(route, mailbox, method):
                if rule.times is not None:
                    rule.times -= 1
                total += rule.seconds
                if rule.gate is not None:
                    gates.append(rule.gate)
        return total, gates

    def in_flight_for(self, mailbox_id: str) -> int:
        with self.lock:
            return self.in_flight.get(mailbox_id, 0)
