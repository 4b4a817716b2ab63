"""POST/GET /subscriptions, GET/PATCH/DELETE /subscriptions/{id}, POST /subscriptions/{id}/reauthorize.

Creating validates both URLs with Graph's call-back before answering (400 ValidationError when an endpoint does not
echo the token in time); lifetimes are checked against the documented limits (`Settings.subscription_max_minutes`,
under 45 minutes raised to 45)."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from starlette.responses import Response

from tests.support.graph.routes import Ctx, GraphError, graph_json
from tests.support.graph.subscriptions import CHANGE_TYPES, Subscription, validate_url

_RESOURCE = re.compile(r"^/?(?:v1\.0/)?users/([^/]+)/events/?$", re.IGNORECASE)


def _expiration(ctx: Ctx, text: Any) -> datetime:
    settings, now = ctx.emulator.state.settings, ctx.emulator.state.now()
    if not isinstance(text, str) or not text:
        raise GraphError(400, "InvalidRequest", "expirationDateTime is a required property for subscription "
                         "creation.")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise GraphError(400, "InvalidRequest", f"Invalid expirationDateTime '{text}'.") from None
    if moment.tzinfo is None:
        raise GraphError(400, "InvalidRequest", "expirationDateTime must carry an offset (UTC).")
    if moment <= now:
        raise GraphError(400, "ExtensionError", "Subscription expiration date must be in the future.")
    if moment - now > timedelta(minutes=settings.subscription_max_minutes):
        raise GraphError(400, "ExtensionError", "Subscription expiration can only be "
                         f"{settings.subscription_max_minutes} minutes in the future.")
    return max(moment, now + timedelta(minutes=settings.subscription_min_minutes))


def _url(ctx: Ctx, value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphError(400, "InvalidRequest", f"{name} is a required property for subscription creation.")
    if ctx.emulator.state.settings.require_https_notification_url and not value.lower().startswith("https://"):
        raise GraphError(400, "InvalidRequest", f"The {name} must use the HTTPS protocol.")
    return value


def _parse_create(ctx: Ctx) -> dict[str, Any]:
    body = ctx.body if isinstance(ctx.body, dict) else {}
    change_types = frozenset(p.strip() for p in str(body.get("changeType") or "").split(",") if p.strip())
    if not change_types or not change_types <= CHANGE_TYPES:
        raise GraphError(400, "InvalidRequest", f"Invalid changeType '{body.get('changeType')}'; allowed values "
                         "are created, updated, deleted.")
    client_state = body.get("clientState")
    if client_state is not None and (not isinstance(client_state, str) or len(client_state) > 128):
        raise GraphError(400, "InvalidRequest", "clientState must be a string of at most 128 characters.")
    resource = str(body.get("resource") or "")
    match = _RESOURCE.match(resource)
    if match is None:
        raise GraphError(400, "InvalidRequest", f"The resource '{resource}' is not supported; expected "
                         "/users/{id}/events.")
    lifecycle = body.get("lifecycleNotificationUrl")
    return {"change_types": change_types, "client_state": client_state, "resource": resource,
            "segment": match.group(1), "notification_url": _url(ctx, body.get("notificationUrl"), "notificationUrl"),
            "lifecycle_url": _url(ctx, lifecycle, "lifecycleNotificationUrl") if lifecycle else None,
            "expiration": _expiration(ctx, body.get("expirationDateTime"))}


async def create_subscription(ctx: Ctx) -> Response:
    state = ctx.emulator.state
    fields = _parse_create(ctx)
    segment = fields.pop("segment")
    with state.lock:
        mailbox = state.mailbox(segment)
    if mailbox is None:
        raise GraphError(404, "ExtensionError", "Operation: Create; Exception: [Status Code: NotFound; Reason: The "
                         f"requested user '{segment}' is invalid.]")
    ctx.entry.mailbox = mailbox.id
    if mailbox.denied:
        raise GraphError(403, "ExtensionError", "Operation: Create; Exception: [Status Code: Forbidden; Reason: "
                         "Access to OData is disabled.]")
    for url in filter(None, (fields["notification_url"], fields["lifecycle_url"])):
        problem, delivery = await validate_url(ctx.emulator.transport, url, state.settings.validation_timeout)
        with state.lock:
            state.deliveries.append(delivery)
        if problem:
            raise GraphError(400, "ValidationError", problem)
    subscription = Subscription(id=str(uuid.uuid4()), mailbox=mailbox, immutable_ids=ctx.entry.immutable_id,
                                application_id=state.client_id, tenant_id=state.tenant_id, **fields)
    with state.lock:
        state.subscriptions[subscription.id] = subscription
    return graph_json(subscription.json(f"{ctx.emulator.base_url}/$metadata#subscriptions/$entity"), status=201)


def _live(ctx: Ctx) -> Subscription:
    subscription_id = ctx.request.path_params["subscription_id"]
    subscription = ctx.emulator.state.live_subscription(subscription_id)
    if subscription is None:
        raise GraphError(404, "ResourceNotFound", f"The object '{subscription_id}' was not found.")
    ctx.entry.mailbox = subscription.mailbox.id
    return subscription


def get_subscription(ctx: Ctx) -> Response:
    with ctx.emulator.state.lock:
        subscription = _live(ctx)
        return graph_json(subscription.json(f"{ctx.emulator.base_url}/$metadata#subscriptions/$entity"))


def list_subscriptions(ctx: Ctx) -> Response:
    state = ctx.emulator.state
    with state.lock:
        live = [s for s in (state.live_subscription(i) for i in list(state.subscriptions)) if s is not None]
        context = f"{ctx.emulator.base_url}/$metadata#subscriptions"
        return graph_json({"@odata.context": context,
                           "value": [{k: v for k, v in s.json(context).items() if k != "@odata.context"}
                                     for s in live]})


def renew_subscription(ctx: Ctx) -> Response:
    """PATCH: renew (and so reauthorize). The lifecycle URL cannot be added or changed: recreate instead."""
    body = ctx.body if isinstance(ctx.body, dict) else {}
    with ctx.emulator.state.lock:
        subscription = _live(ctx)
        if "lifecycleNotificationUrl" in body:
            raise GraphError(400, "InvalidRequest", "lifecycleNotificationUrl cannot be updated; delete the "
                             "subscription and create a new one.")
        unknown = set(body) - {"expirationDateTime", "notificationUrl"}
        if unknown:
            raise GraphError(400, "InvalidRequest", f"Properties {sorted(unknown)} cannot be updated.")
        if "expirationDateTime" in body:
            subscription.expiration = _expiration(ctx, body["expirationDateTime"])
        if "notificationUrl" in body:
            subscription.notification_url = _url(ctx, body["notificationUrl"], "notificationUrl")
        subscription.reauthorization_required = False
        return graph_json(subscription.json(f"{ctx.emulator.base_url}/$metadata#subscriptions/$entity"))


def delete_subscription(ctx: Ctx) -> Response:
    with ctx.emulator.state.lock:
        subscription = _live(ctx)
        del ctx.emulator.state.subscriptions[subscription.id]
    return Response(status_code=204)


def reauthorize_subscription(ctx: Ctx) -> Response:
    with ctx.emulator.state.lock:
        subscription = _live(ctx)
        subscription.reauthorization_required = False
        subscription.reauthorizations += 1
    return Response(status_code=204)
