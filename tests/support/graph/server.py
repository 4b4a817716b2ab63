"""The emulator as a real HTTPS server on 127.0.0.1 (uvicorn in a thread, a trustme CA made at start), and the
test API on `GraphEmulator`. The manual is the package docstring (tests/support/graph/__init__.py)."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import trustme
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from tests.support.graph import identity, routes
from tests.support.graph import subscription_routes as subs
from tests.support.graph.delta import DeltaReset
from tests.support.graph.mailbox import Mailbox
from tests.support.graph.state import Fault, Latency, LoggedRequest, Settings, State
from tests.support.graph.subscriptions import (
    LIFECYCLE_EVENTS,
    Delivery,
    Subscription,
    Transport,
    arrange,
    batches,
    change_item,
    lifecycle_item,
)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_EVENTS_PATH = re.compile(r"^/v1\.0/users/[^/]+/events(/|$)", re.IGNORECASE)


def _app() -> Starlette:
    e = routes.endpoint
    user = "/v1.0/users/{user}"
    event = user + "/events/{event_id}"
    any_method = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(routes=[
        Route("/common/discovery/instance", identity.instance_discovery, methods=["GET"]),
        Route("/{tenant}/v2.0/.well-known/openid-configuration", identity.discovery, methods=["GET"]),
        Route("/{tenant}/oauth2/v2.0/token", identity.token, methods=["POST"]),
        Route(user, e("user", routes.get_user), methods=["GET"]),
        Route(user + "/calendar", e("calendar", routes.get_calendar), methods=["GET"]),
        Route(user + "/events", e("events", routes.list_events), methods=["GET"]),
        Route(user + "/events", e("event_write", routes.write_denied), methods=["POST", "PUT", "PATCH", "DELETE"]),
        Route(event, e("event", routes.get_event), methods=["GET"]),
        Route(event, e("event_write", routes.write_denied), methods=["POST", "PUT", "PATCH", "DELETE"]),
        Route(event + "/instances", e("instances", routes.list_instances), methods=["GET"]),
        Route(event + "/{rest:path}", e("event_write", routes.write_denied), methods=["POST", "PUT", "PATCH",
                                                                                      "DELETE"]),
        Route(user + "/calendarView", e("calendarView", routes.calendar_view), methods=["GET"]),
        Route(user + "/calendarView/delta", e("delta", routes.calendar_view_delta), methods=["GET"]),
        Route("/v1.0/subscriptions", e("subscriptions", subs.list_subscriptions, names_mailbox=False),
              methods=["GET"]),
        Route("/v1.0/subscriptions", e("subscriptions", subs.create_subscription, names_mailbox=False),
              methods=["POST"]),
        Route("/v1.0/subscriptions/{subscription_id}", e("subscription", subs.get_subscription, names_mailbox=False),
              methods=["GET"]),
        Route("/v1.0/subscriptions/{subscription_id}",
              e("subscription", subs.renew_subscription, names_mailbox=False), methods=["PATCH"]),
        Route("/v1.0/subscriptions/{subscription_id}",
              e("subscription", subs.delete_subscription, names_mailbox=False), methods=["DELETE"]),
        Route("/v1.0/subscriptions/{subscription_id}/reauthorize",
              e("reauthorize", subs.reauthorize_subscription, names_mailbox=False), methods=["POST"]),
        Route("/v1.0/{rest:path}", e("unknown", routes.unknown_segment, names_mailbox=False), methods=any_method),
    ])


def serve_in_thread(app: Any, certfile: str, name: str) -> tuple[uvicorn.Server, threading.Thread, int]:
    """Serve an ASGI app over TLS on 127.0.0.1 at a free port from a daemon thread; returns once it listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, ssl_certfile=certfile, log_level="error", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.01)
    return server, thread, port


def stop_thread(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(10)


class GraphEmulator:
    """See the package docstring. `start()` once (a session fixture does), `reset()` between tests."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca = trustme.CA()
        self.ca_bundle = str(directory / "graph-emulator-ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_bundle)
        self._server_pem = str(directory / "graph-emulator-server.pem")
        self.ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(self._server_pem)
        self.signing_key = secrets.token_hex(32)
        self.state = State()
        self.transport = Transport(self.ca_bundle)
        self.app = _app()
        self.app.state.emulator = self
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # ---- running --------------------------------------------------------------------------------------------

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """GRAPH_BASE_URL."""
        return f"{self.origin}/v1.0"

    @property
    def authority_url(self) -> str:
        """GRAPH_AUTHORITY_URL (the tenant is appended: `f"{authority_url}/{tenant_id}"`)."""
        return self.origin

    @property
    def authority(self) -> str:
        return f"{self.authority_url}/{self.state.tenant_id}"

    @property
    def tenant_id(self) -> str:
        return self.state.tenant_id

    @property
    def client_id(self) -> str:
        return self.state.client_id

    @property
    def client_secret(self) -> str:
        return self.state.client_secret

    @property
    def settings(self) -> Settings:
        return self.state.settings

    def env(self) -> dict[str, str]:
        """The sync's environment for this emulator (GRAPH_NOTIFICATION_CLIENT_STATE is the test's to choose)."""
        return {"GRAPH_TENANT_ID": self.tenant_id, "GRAPH_CLIENT_ID": self.client_id,
                "GRAPH_CLIENT_SECRET": self.client_secret, "GRAPH_AUTHORITY_URL": self.authority_url,
                "GRAPH_BASE_URL": self.base_url, "GRAPH_CA_BUNDLE": self.ca_bundle}

    def start(self) -> GraphEmulator:
        self._server, self._thread, self.port = serve_in_thread(self.app, self._server_pem, "graph-emulator")
        return self

    def stop(self) -> None:
        self.clear_faults()
        if self._server is not None and self._thread is not None:
            stop_thread(self._server, self._thread)

    def reset(self) -> None:
        """A fresh tenant, app registration, mailboxes, log...: what a new test expects. The server keeps running."""
        self.clear_faults()  # releases held requests of the previous test
        self.state = State()
        self.transport = Transport(self.ca_bundle)

    def issue_certificate(self, *hosts: str) -> str:
        """A PEM (key and chain) for a receiver the emulator should trust, e.g. a test's webhook over HTTPS."""
        path = self.directory / f"receiver-{uuid.uuid4().hex[:8]}.pem"
        self.ca.issue_cert(*(hosts or ("127.0.0.1",))).private_key_and_cert_chain_pem.write_to_path(str(path))
        return str(path)

    def mount(self, prefix: str, client: httpx.AsyncClient) -> None:
        """Deliver call-backs and notifications for URLs under `prefix` through `client` (e.g. an ASGITransport on
        Tenet's app), on the event loop this is called from. Call it from async code (a test or async fixture)."""
        self.transport.mount(prefix, client)

    # ---- mailboxes --------------------------------------------------------------------------------------------

    def add_mailbox(self, upn: str, *, display_name: str | None = None, user_id: str | None = None) -> Mailbox:
        with self.state.lock:
            mailbox = Mailbox(user_id=user_id or str(uuid.uuid4()), upn=upn, display_name=display_name or upn,
                              lock=self.state.lock, clock=self.state.now, on_change=self._queue)
            self.state.mailboxes[mailbox.id] = mailbox
            return mailbox

    def _queue(self, mailbox: Mailbox, change_type: str, item_id: str) -> None:
        self.state.queue_change(mailbox, change_type, item_id)

    def deny(self, mailbox: Mailbox) -> None:
        """Exchange RBAC for Applications refuses the mailbox: 403 ErrorAccessDenied on its mailbox routes."""
        mailbox.denied = True

    def allow(self, mailbox: Mailbox) -> None:
        mailbox.denied = False

    # ---- faults -------------------------------------------------------------------------------------------------

    def fail(self, status: int, code: str, message: str, *, retry_after: int | None = None, route: str | None = None,
             mailbox: Mailbox | None = None, method: str | None = None, times: int | None = 1) -> Fault:
        fault = Fault(status, code, message, retry_after, route, mailbox.id if mailbox else None, method, times)
        with self.state.lock:
            self.state.faults.append(fault)
        return fault

    def throttle(self, mailbox: Mailbox | None = None, *, retry_after: int = 1, times: int | None = 1,
                 route: str | None = None) -> Fault:
        """429 ApplicationThrottled with Retry-After (Outlook's per-app, per-mailbox request limit)."""
        return self.fail(429, "ApplicationThrottled", "Application is over its MailboxConcurrency limit.",
                         retry_after=retry_after, route=route, mailbox=mailbox, times=times)

    def unavailable(self, mailbox: Mailbox | None = None, *, retry_after: int = 1, times: int | None = 1,
                    route: str | None = None) -> Fault:
        return self.fail(503, "ServiceNotAvailable", "The service is temporarily unavailable. Please retry later.",
                         retry_after=retry_after, route=route, mailbox=mailbox, times=times)

    def add_latency(self, seconds: float, *, route: str | None = None, mailbox: Mailbox | None = None,
                    method: str | None = None, times: int | None = None) -> Latency:
        rule = Latency(seconds, route, mailbox.id if mailbox else None, method, times)
        with self.state.lock:
            self.state.latencies.append(rule)
        return rule

    def hold(self, *, route: str | None = None, mailbox: Mailbox | None = None, method: str | None = None,
             times: int | None = None) -> Latency:
        """Matching requests wait, in flight, until `.release()` of the returned rule (stage races and the
        concurrency limit without timing); see `in_flight`."""
        rule = Latency(0.0, route, mailbox.id if mailbox else None, method, times, gate=threading.Event())
        with self.state.lock:
            self.state.latencies.append(rule)
        return rule

    def in_flight(self, mailbox: Mailbox) -> int:
        """Requests of the mailbox being served right now (what the concurrency limit counts)."""
        return self.state.in_flight_for(mailbox.id)

    async def wait_in_flight(self, mailbox: Mailbox, count: int, *, within: float = 10.0) -> None:
        """Return once `count` requests of the mailbox are being served (e.g. held by `hold`)."""
        await asyncio.to_thread(self._wait_in_flight, mailbox, count, within)

    def _wait_in_flight(self, mailbox: Mailbox, count: int, within: float) -> None:
        deadline = time.monotonic() + within
        while self.in_flight(mailbox) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.in_flight(mailbox)} of {count} requests in flight")
            time.sleep(0.005)

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()
            for rule in self.state.latencies:
                rule.release()
            self.state.latencies.clear()

    def revoke_tokens(self) -> None:
        """Every access token issued so far now gets 401 InvalidAuthenticationToken (MSAL's cache still holds it)."""
        with self.state.lock:
            for token in self.state.tokens.values():
                token.revoked = True

    def reset_delta(self, mailbox: Mailbox, *, status: int = 410, code: str = "SyncStateNotFound",
                    location: bool = True) -> None:
        """Every delta and skip token of the mailbox handed out so far fails with `status` / `code` (and a Location
        header naming the initial query when `location`)."""
        with self.state.lock:
            self.state.delta.invalidate(mailbox, DeltaReset(status=status, code=code, location=location))

    def expire_skip_tokens(self, mailbox: Mailbox) -> None:
        with self.state.lock:
            self.state.delta.expire_skip_tokens(mailbox)

    def replay_next_delta_round(self, mailbox: Mailbox) -> None:
        """The mailbox's next incremental round repeats the previous round's items before its own (a replay)."""
        with self.state.lock:
            self.state.delta.replay_next.add(mailbox.id)

    # ---- subscriptions and notifications ------------------------------------------------------------------------

    def subscriptions(self, mailbox: Mailbox | None = None) -> list[Subscription]:
        with self.state.lock:
            live = [self.state.live_subscription(i) for i in list(self.state.subscriptions)]
            return [s for s in live if s is not None and (mailbox is None or s.mailbox is mailbox)]

    def expire_subscription(self, subscription: Subscription) -> None:
        """As if its expiry passed unrenewed: Graph deletes it (renewing it then answers 404)."""
        with self.state.lock:
            self.state.subscriptions.pop(subscription.id, None)

    def pending_notifications(self) -> int:
        with self.state.lock:
            return len(self.state.pending)

    def drop_notifications(self) -> None:
        with self.state.lock:
            self.state.pending.clear()

    async def deliver_notifications(self, *, duplicate: bool = False, out_of_order: bool = False,
                                    wrong_client_state: Iterable[int] | Callable[[int, dict], bool] = (),
                                    delay: float = 0.0, batch_size: int | None = None,
                                    within: float = 3.0) -> list[Delivery]:
        """POST the queued change notifications, batched per notification URL ({"value": [...]}), with the options:
        every item twice, order reversed, clientState spoilt at these positions, a delay before each POST."""
        with self.state.lock:
            pending, self.state.pending = self.state.pending, []
            items = []
            for change in pending:
                subscription = self.state.live_subscription(change.subscription_id)
                if subscription is not None:
                    items.append((subscription.notification_url, change_item(subscription, change)))
        arranged = arrange(items, duplicate=duplicate, out_of_order=out_of_order,
                           wrong_client_state=wrong_client_state)
        return [await self._post(url, {"value": group}, delay, within) for url, group in batches(arranged,
                                                                                                   batch_size)]

    async def send_lifecycle(self, *events: tuple[Subscription, str], delay: float = 0.0,
                             within: float = 3.0) -> list[Delivery]:
        """Lifecycle notifications ((subscription, "reauthorizationRequired" | "subscriptionRemoved" | "missed"),
        ...), batched per lifecycle URL. subscriptionRemoved removes the subscription; missed drops its queued
        change notifications (they are the ones missed); reauthorizationRequired flags it until reauthorized or
        renewed."""
        items = []
        with self.state.lock:
            for subscription, event in events:
                if event not in LIFECYCLE_EVENTS:
                    raise ValueError(f"unknown lifecycle event {event!r}")
                if not subscription.lifecycle_url:
                    raise ValueError("the subscription has no lifecycleNotificationUrl")
                if event == "subscriptionRemoved":
                    self.state.subscriptions.pop(subscription.id, None)
                elif event == "missed":
                    self.state.pending = [p for p in self.state.pending if p.subscription_id != subscription.id]
                else:
                    subscription.reauthorization_required = True
                items.append((subscription.lifecycle_url, lifecycle_item(subscription, event)))
        return [await self._post(url, {"value": group}, delay, within) for url, group in batches(items, None)]

    async def _post(self, url: str, payload: dict[str, Any], delay: float, within: float) -> Delivery:
        if delay:
            await asyncio.sleep(delay)
        delivery = await self.transport.post(url, content=json.dumps(payload).encode(),
                                             content_type="application/json", within=within)
        delivery.payload = payload
        with self.state.lock:
            self.state.deliveries.append(delivery)
        return delivery

    # ---- the request log --------------------------------------------------------------------------------------

    def requests(self, *, api: str = "graph", route: str | None = None, method: str | None = None,
                 mailbox: Mailbox | None = None) -> list[LoggedRequest]:
        with self.state.lock:
            return [r for r in self.state.log if r.api == api and (route is None or r.route == route)
                    and (method is None or r.method == method) and (mailbox is None or r.mailbox == mailbox.id)]

    def writes_to_events(self) -> list[LoggedRequest]:
        """Every POST/PUT/PATCH/DELETE on /users/*/events* (Tenet must never make one)."""
        return [r for r in self.requests() if r.method in WRITE_METHODS and _EVENTS_PATH.match(r.path)]

    def requests_without_immutable_id(self) -> list[LoggedRequest]:
        """Graph requests that did not carry Prefer: IdType="ImmutableId"."""
        return [r for r in self.requests() if not r.immutable_id]

    def deliveries(self) -> list[Delivery]:
        with self.state.lock:
            return list(self.state.deliveries)

    def peak_concurrency(self, mailbox: Mailbox) -> int:
        with self.state.lock:
            return self.state.peak_in_flight.get(mailbox.id, 0)


def running_emulator(directory: Path) -> Iterator[GraphEmulator]:
    emulator = GraphEmulator(directory).start()
    try:
        yield emulator
    finally:
        emulator.stop()
