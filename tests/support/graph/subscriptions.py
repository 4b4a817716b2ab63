"""Subscriptions, the validation call-backs, change and lifecycle notifications, and the HTTP transport that
carries them to the subscriber (a real HTTP(S) endpoint, or an in-process app mounted on a URL prefix)."""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from tests.support.graph.calendar import graph_timestamp
from tests.support.graph.delta import public_id
from tests.support.graph.mailbox import Mailbox

CHANGE_TYPES = frozenset({"created", "updated", "deleted"})
LIFECYCLE_EVENTS = frozenset({"reauthorizationRequired", "subscriptionRemoved", "missed"})
WRONG_CLIENT_STATE = "not-the-subscription-client-state"


@dataclass
class Subscription:
    id: str
    mailbox: Mailbox
    resource: str
    change_types: frozenset[str]
    notification_url: str
    lifecycle_url: str | None
    client_state: str | None
    expiration: datetime
    immutable_ids: bool  # created with Prefer: IdType="ImmutableId": notifications carry ImmutableIds
    application_id: str
    tenant_id: str
    reauthorization_required: bool = False
    reauthorizations: int = 0

    def json(self, context: str) -> dict[str, Any]:
        return {"@odata.context": context, "id": self.id, "resource": self.resource,
                "applicationId": self.application_id, "changeType": ",".join(sorted(self.change_types)),
                "clientState": self.client_state, "notificationUrl": self.notification_url,
                "notificationQueryOptions": None, "lifecycleNotificationUrl": self.lifecycle_url,
                "expirationDateTime": graph_timestamp(self.expiration), "creatorId": self.application_id,
                "includeResourceData": None, "latestSupportedTlsVersion": "v1_2", "encryptionCertificate": None,
                "encryptionCertificateId": None, "notificationUrlAppId": None}


@dataclass(frozen=True)
class Pending:
    subscription_id: str
    change_type: str
    item_id: str  # immutable id of the changed event


@dataclass
class Delivery:
    """One POST the emulator made to a subscriber, and what it answered."""

    url: str
    payload: dict[str, Any] | None  # None for a validation call-back
    status: int | None  # None: no answer (connection refused, timeout)
    body: str
    content_type: str
    seconds: float
    error: str | None = None


@dataclass
class Transport:
    """Posts to subscribers. URLs under a mounted prefix go to that in-process client (on the loop it was mounted
    from, so an app bound to the test's event loop is called there); others over the network, trusting `ca_file`."""

    ca_file: str
    mounts: list[tuple[str, httpx.AsyncClient, asyncio.AbstractEventLoop]] = field(default_factory=list)
    _ssl: ssl.SSLContext | None = None

    def mount(self, prefix: str, client: httpx.AsyncClient) -> None:
        self.mounts.insert(0, (prefix.rstrip("/"), client, asyncio.get_running_loop()))

    async def post(self, url: str, *, content: bytes, content_type: str, within: float) -> Delivery:
        started = time.monotonic()
        headers = {"Content-Type": content_type}
        try:
            response = await asyncio.wait_for(self._post(url, content, headers, within), within)
        except (TimeoutError, httpx.HTTPError, OSError) as error:
            return Delivery(url, None, None, "", "", time.monotonic() - started, f"{type(error).__name__}: {error}")
        return Delivery(url, None, response.status_code, response.text, response.headers.get("content-type", ""),
                        time.monotonic() - started)

    async def _post(self, url: str, content: bytes, headers: dict[str, str], within: float) -> httpx.Response:
        for prefix, client, loop in self.mounts:
            if url == prefix or url.startswith(prefix + "/") or url.startswith(prefix + "?"):
                call = client.post(url, content=content, headers=headers)
                if loop is asyncio.get_running_loop():
                    return await call
                return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, loop))
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=self.ca_file)
        async with httpx.AsyncClient(verify=self._ssl, timeout=within) as client:
            return await client.post(url, content=content, headers=headers)


def with_query(url: str, name: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{name}={quote(value, safe='')}"


async def validate_url(transport: Transport, url: str, within: float) -> tuple[str | None, Delivery]:
    """Graph's validation call-back: POST ?validationToken=... and require 200, text/plain, the decoded token."""
    token = f"Validation: Testing client application reachability for subscription Request-Id: {uuid.uuid4()}"
    delivery = await transport.post(with_query(url, "validationToken", token), content=b"",
                                    content_type="text/plain; charset=utf-8", within=within)
    if delivery.status != 200:
        return ("Subscription validation request failed. Notification endpoint must respond with 200 OK to "
                "validation request."), delivery
    if not delivery.content_type.startswith("text/plain") or delivery.body != token:
        return ("Subscription validation request failed. Response must exactly match validationToken query "
                "parameter."), delivery
    return None, delivery


def change_item(subscription: Subscription, pending: Pending) -> dict[str, Any]:
    """One changeNotification of an Outlook event, as Graph sends it (resource data without the event itself)."""
    mailbox = subscription.mailbox
    event_id = public_id(mailbox, pending.item_id, immutable=subscription.immutable_ids)
    odata_id = f"Users/{mailbox.id}/Events/{event_id}"
    resource_data: dict[str, Any] = {"@odata.type": "#Microsoft.Graph.Event", "@odata.id": odata_id, "id": event_id}
    if pending.change_type != "deleted":
        item = mailbox.find(pending.item_id)
        if item is not None:
            resource_data["@odata.etag"] = f'W/"{getattr(item, "change_key", "") or "AAAA"}"'
    return {"subscriptionId": subscription.id,
            "subscriptionExpirationDateTime": graph_timestamp(subscription.expiration),
            "changeType": pending.change_type, "resource": odata_id, "resourceData": resource_data,
            "clientState": subscription.client_state, "tenantId": subscription.tenant_id}


def lifecycle_item(subscription: Subscription, event: str) -> dict[str, Any]:
    return {"subscriptionId": subscription.id,
            "subscriptionExpirationDateTime": graph_timestamp(subscription.expiration),
            "tenantId": subscription.tenant_id, "clientState": subscription.client_state, "lifecycleEvent": event}


def arrange(items: list[tuple[str, dict[str, Any]]], *, duplicate: bool, out_of_order: bool,
            wrong_client_state: Iterable[int] | Callable[[int, dict[str, Any]], bool]) -> list[tuple[str, dict]]:
    """Apply the delivery options: every item twice, the order reversed, clientState spoilt for some positions
    (indexes into the final list, or a predicate of (index, item))."""
    arranged = [pair for pair in items for _ in range(2 if duplicate else 1)]
    if out_of_order:
        arranged.reverse()
    spoil = wrong_client_state if callable(wrong_client_state) else (
        lambda index, _item, chosen=frozenset(wrong_client_state): index in chosen)
    return [(url, {**item, "clientState": WRONG_CLIENT_STATE} if spoil(index, item) else item)
            for index, (url, item) in enumerate(arranged)]


def batches(items: list[tuple[str, dict[str, Any]]], size: int | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """One POST per notification URL (carrying items of every subscription on it, in order), split every `size`."""
    by_url: dict[str, list[dict[str, Any]]] = {}
    for url, item in items:
        by_url.setdefault(url, []).append(item)
    step = size or max(1, len(items))
    return [(url, group[i:i + step]) for url, group in by_url.items() for i in range(0, len(group), step)]
