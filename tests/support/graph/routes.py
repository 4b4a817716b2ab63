"""The Graph v1.0 routes the Outlook sync uses, behind one guard that does what Graph does before a handler runs:
the bearer token, the mailbox (unknown, denied, without a REST mailbox), the per-mailbox concurrency limit, injected
latency and faults; and after: request-id / client-request-id headers, Graph's error body, the request log.

Route names (for faults, latency and the log): user, calendar, events, event, instances, calendarView, delta,
event_write, subscriptions, subscription, reauthorize, unknown.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.support.graph.calendar import Event, zone_info
from tests.support.graph.delta import DeltaReset, UnknownToken, public_id
from tests.support.graph.mailbox import Mailbox
from tests.support.graph.render import View, delta_json, event_json, removed_json
from tests.support.graph.state import LoggedRequest

if TYPE_CHECKING:
    from tests.support.graph.server import GraphEmulator

ODATA_JSON = "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8"
MAX_TOP = 1000


class GraphError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


@dataclass
class Ctx:
    """One request as the handlers see it."""

    emulator: GraphEmulator
    request: Request
    entry: LoggedRequest
    prefer: dict[str, str]
    body: Any
    mailbox: Mailbox | None
    segment: str | None

    @property
    def query(self) -> dict[str, str]:
        return self.entry.query

    def param(self, name: str) -> str | None:
        """A query parameter by name in any case ($top, startDateTime / startdatetime...)."""
        wanted = name.lower()
        return next((v for k, v in self.query.items() if k.lower() == wanted), None)

    def view(self) -> View:
        zone_name = self.prefer.get("outlook.timezone")
        zone = zone_info(zone_name) if zone_name else None
        select = self.param("$select")
        return View(immutable_ids=self.entry.immutable_id, zone_name=zone_name if zone_name and zone else "UTC",
                    zone=zone or View().zone,
                    select=frozenset(s.strip() for s in select.split(",")) if select else None,
                    original_start_requires_select=self.emulator.state.settings.original_start_requires_select)

    def url(self, path: str, **params: str) -> str:
        query = f"?{urlencode(params, safe='$')}" if params else ""
        return f"{self.emulator.origin}{path}{query}"


def parse_prefer(values: list[str]) -> dict[str, str]:
    """Prefer preferences by lower-cased name: outlook.timezone, idtype, odata.maxpagesize (quotes removed)."""
    prefs: dict[str, str] = {}
    for value in values:
        for part in re.findall(r'(?:[^,"]|"[^"]*")+', value):
            name, _, setting = part.strip().partition("=")
            if name:
                prefs[name.strip().lower()] = setting.strip().strip('"')
    return prefs


def error_body(status: int, code: str, message: str, request_id: str, client_request_id: str | None) -> JSONResponse:
    inner = {"date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"), "request-id": request_id,
             "client-request-id": client_request_id or request_id}
    return JSONResponse({"error": {"code": code, "message": message, "innerError": inner}}, status_code=status)


def graph_json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(data), status_code=status, media_type=ODATA_JSON, headers=headers)


Handler = Callable[[Ctx], Response | Awaitable[Response]]


def endpoint(route: str, handler: Handler, *, names_mailbox: bool = True) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        emulator: GraphEmulator = request.app.state.emulator
        state = emulator.state
        request_id = str(uuid.uuid4())
        client_request_id = request.headers.get("client-request-id")
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        segment = request.path_params.get("user") if names_mailbox else None
        with state.lock:
            mailbox = state.mailbox(segment) if segment else None
            entry = LoggedRequest(api="graph", method=request.method, path=request.url.path, route=route,
                                  query=dict(request.query_params), mailbox=mailbox.id if mailbox else None,
                                  prefer=parse_prefer(request.headers.getlist("prefer")),
                                  client_request_id=client_request_id, request_id=request_id,
                                  authorized=False, body=body)
            state.log.append(entry)
        ctx = Ctx(emulator, request, entry, entry.prefer, body, mailbox, segment)
        try:
            response = await _guarded(ctx, route, handler)
        except GraphError as error:
            response = error_body(error.status, error.code, error.message, request_id, client_request_id)
            response.headers.update(error.headers)
        response.headers["request-id"] = request_id
        response.headers["client-request-id"] = client_request_id or request_id
        entry.status, entry.ended = response.status_code, time.monotonic()
        return response

    return serve


def _authorize(ctx: Ctx) -> None:
    state = ctx.emulator.state
    header = ctx.request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    challenge = {"WWW-Authenticate": 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/'
                                    'oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000"'}
    if scheme.lower() != "bearer" or not token.strip():
        raise GraphError(401, "InvalidAuthenticationToken", "Access token is empty.", challenge)
    with state.lock:
        known = state.tokens.get(token.strip())
    if known is None:
        raise GraphError(401, "InvalidAuthenticationToken", "IDX14100: JWT is not well formed.", challenge)
    if known.revoked or known.expires_at <= time.time():
        raise GraphError(401, "InvalidAuthenticationToken", "Lifetime validation failed, the token is expired.",
                         challenge)
    ctx.entry.authorized = True


async def _guarded(ctx: Ctx, route: str, handler: Handler) -> Response:
    state = ctx.emulator.state
    _authorize(ctx)
    if ctx.segment is not None and ctx.mailbox is None:
        if route == "user":
            raise GraphError(404, "Request_ResourceNotFound", f"Resource '{ctx.segment}' does not exist or one of its "
                             "queried reference-property objects are not present.")
        raise GraphError(404, "ErrorInvalidUser", f"The requested user '{ctx.segment}' is invalid.")
    mailbox_id = ctx.mailbox.id if ctx.mailbox else None
    if mailbox_id is not None:
        with state.lock:
            if state.in_flight.get(mailbox_id, 0) >= state.settings.concurrency_limit:
                raise GraphError(429, "ApplicationThrottled", "Application is over its MailboxConcurrency limit.",
                                 {"Retry-After": str(state.settings.concurrency_retry_after)})
            state.in_flight[mailbox_id] = state.in_flight.get(mailbox_id, 0) + 1
            state.peak_in_flight[mailbox_id] = max(state.peak_in_flight.get(mailbox_id, 0),
                                                   state.in_flight[mailbox_id])
    try:
        return await _faulted(ctx, route, mailbox_id, handler)
    finally:
        if mailbox_id is not None:
            with state.lock:
                state.in_flight[mailbox_id] -= 1


async def _faulted(ctx: Ctx, route: str, mailbox_id: str | None, handler: Handler) -> Response:
    state = ctx.emulator.state
    method = ctx.request.method
    with state.lock:
        delay, gates = state.latency_for(route, mailbox_id, method)
    if delay:
        await asyncio.sleep(delay)
    for gate in gates:
        await asyncio.to_thread(gate.wait)
    with state.lock:
        fault = state.take_fault(route, mailbox_id, method)
    if fault is not None:
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        raise GraphError(fault.status, fault.code, fault.message, headers)
    if ctx.mailbox is not None and route != "user":
        if ctx.mailbox.denied:
            raise GraphError(403, "ErrorAccessDenied", "Access to OData is disabled.")
        if not ctx.mailbox.rest_enabled:
            raise GraphError(404, "MailboxNotEnabledForRESTAPI", "REST API is not yet supported for this mailbox.")
    result = handler(ctx)
    if not isinstance(result, Response):
        result = await result
    return result


# ---- mailbox routes ----------------------------------------------------------------------------------------------

def get_user(ctx: Ctx) -> Response:
    mailbox = ctx.mailbox
    assert mailbox is not None
    return graph_json({"@odata.context": f"{ctx.emulator.base_url}/$metadata#users/$entity", "businessPhones": [],
                       "displayName": mailbox.display_name, "givenName": None, "jobTitle": None, "mail": mailbox.upn,
                       "mobilePhone": None, "officeLocation": None, "preferredLanguage": None, "surname": None,
                       "userPrincipalName": mailbox.upn, "id": mailbox.id})


def get_calendar(ctx: Ctx) -> Response:
    mailbox = ctx.mailbox
    assert mailbox is not None
    return graph_json({"@odata.context": f"{ctx.emulator.base_url}/$metadata#users('{ctx.segment}')/calendar/$entity",
                       "id": "AAMkAGI2TGuLAAA=", "name": "Calendar", "color": "auto", "isDefaultCalendar": True,
                       "canEdit": False, "canShare": False, "canViewPrivateItems": True,
                       "owner": {"name": mailbox.display_name, "address": mailbox.upn}})


def write_denied(ctx: Ctx) -> Response:
    """The app holds Calendars.Read only: any write to a mailbox is refused (and logged, for the tests)."""
    raise GraphError(403, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")


def _paged(ctx: Ctx, items: list[Any], render: Callable[[Any], dict[str, Any]], context: str) -> Response:
    try:
        top = min(int(ctx.param("$top") or ctx.emulator.state.settings.default_page_size), MAX_TOP)
        skip = int(ctx.param("$skip") or 0)
    except ValueError as error:
        raise GraphError(400, "BadRequest", f"Invalid value for $top or $skip: {error}") from None
    chunk = items[skip:skip + top]
    data: dict[str, Any] = {"@odata.context": context, "value": [render(item) for item in chunk]}
    if skip + top < len(items):
        params = {k: v for k, v in ctx.query.items() if k.lower() != "$skip"}
        data["@odata.nextLink"] = ctx.url(ctx.request.url.path, **params, **{"$skip": str(skip + top)})
    return graph_json(data, headers=_preference_applied(ctx))


def _preference_applied(ctx: Ctx) -> dict[str, str]:
    view = ctx.view()
    applied = []
    if view.zone_name != "UTC" or "outlook.timezone" in ctx.prefer:
        applied.append(f'outlook.timezone="{view.zone_name}"')
    if ctx.entry.immutable_id:
        applied.append('IdType="ImmutableId"')
    return {"Preference-Applied": ", ".join(applied)} if applied else {}


_FILTER_TERM = re.compile(r"^\s*(type|subject|isCancelled|start/dateTime|end/dateTime|seriesMasterId)\s+"
                          r"(eq|ne|ge|gt|le|lt)\s+(?:'((?:[^']|'')*)'|(true|false|null))\s*$", re.IGNORECASE)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "ge": lambda a, b: a >= b, "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b, "lt": lambda a, b: a < b}


def event_filter(text: str | None) -> Callable[[dict[str, Any]], bool]:
    """The small part of OData $filter the sync may use on events: `field op 'value'` terms joined by `and` / `or`
    (and binds tighter), on type, subject, isCancelled, start/dateTime, end/dateTime, seriesMasterId."""
    if not text:
        return lambda _event: True
    alternatives = [[_term(t) for t in re.split(r"\s+and\s+", part, flags=re.IGNORECASE)]
                    for part in re.split(r"\s+or\s+", text, flags=re.IGNORECASE)]
    return lambda event: any(all(term(event) for term in terms) for terms in alternatives)


def _term(text: str) -> Callable[[dict[str, Any]], bool]:
    match = _FILTER_TERM.match(text)
    if match is None:
        raise GraphError(400, "ErrorInvalidUrlQueryFilter", f"The query filter '{text}' is not supported here.")
    field_name, op, quoted, literal = match.groups()
    wanted: Any = quoted.replace("''", "'") if quoted is not None else {"true": True, "false": False}.get(
        literal.lower())
    path = field_name.split("/")

    def value_of(event: dict[str, Any]) -> Any:
        value: Any = event
        for part in path:
            key = next((k for k in value if k.lower() == part.lower()), part) if isinstance(value, dict) else part
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def test(event: dict[str, Any]) -> bool:
        value = value_of(event)
        if field_name.lower().endswith("/datetime") and isinstance(value, str) and isinstance(wanted, str):
            return _OPS[op.lower()](value[:19], wanted.rstrip("Z")[:19])
        try:
            return _OPS[op.lower()](value, wanted)
        except TypeError:
            return False

    return test


def list_events(ctx: Ctx) -> Response:
    mailbox = ctx.mailbox
    assert mailbox is not None
    view = ctx.view()
    full = View(view.immutable_ids, view.zone_name, view.zone)
    keep = event_filter(ctx.param("$filter"))
    with ctx.emulator.state.lock:
        chosen = [event for event in mailbox.listing() if keep(event_json(mailbox, event, full))]
        return _paged(ctx, chosen, lambda e: event_json(mailbox, e, view),
                      f"{ctx.emulator.base_url}/$metadata#users('{ctx.segment}')/events")


def _item(ctx: Ctx) -> Any:
    assert ctx.mailbox is not None
    item = ctx.mailbox.find(ctx.request.path_params["event_id"])
    if item is None:
        raise GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")
    return item


def get_event(ctx: Ctx) -> Response:
    with ctx.emulator.state.lock:
        item = _item(ctx)
        data = event_json(ctx.mailbox, item, ctx.view())  # type: ignore[arg-type]
        data = {"@odata.context": f"{ctx.emulator.base_url}/$metadata#users('{ctx.segment}')/events/$entity", **data}
        return graph_json(data, headers=_preference_applied(ctx))


def parse_instant(text: str | None, name: str) -> datetime:
    if not text:
        raise GraphError(400, "ErrorInvalidParameter", "This request requires a time window specified by the query "
                         "string parameters StartDateTime and EndDateTime.")
    try:
        moment = datetime.fromisoformat(text.replace(" ", "+"))
    except ValueError:
        message = f"The value '{text}' of parameter '{name}' is invalid."
        raise GraphError(400, "ErrorInvalidParameter", message) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def window_of(ctx: Ctx) -> tuple[datetime, datetime]:
    start = parse_instant(ctx.param("startDateTime"), "StartDateTime")
    end = parse_instant(ctx.param("endDateTime"), "EndDateTime")
    if end <= start:
        raise GraphError(400, "ErrorInvalidParameter", "The parameter 'EndDateTime' must be after 'StartDateTime'.")
    return start, end


def list_instances(ctx: Ctx) -> Response:
    start, end = window_of(ctx)
    view = ctx.view()
    with ctx.emulator.state.lock:
        item = _item(ctx)
        mailbox = ctx.mailbox
        assert mailbox is not None
        instances = mailbox.instances(item, start, end) if isinstance(item, Event) and item.is_series else []
        return _paged(ctx, instances, lambda i: event_json(mailbox, i, view),
                      f"{ctx.emulator.base_url}/$metadata#Collection(event)")


def calendar_view(ctx: Ctx) -> Response:
    start, end = window_of(ctx)
    view = ctx.view()
    with ctx.emulator.state.lock:
        mailbox = ctx.mailbox
        assert mailbox is not None
        return _paged(ctx, mailbox.window(start, end), lambda i: event_json(mailbox, i, view),
                      f"{ctx.emulator.base_url}/$metadata#users('{ctx.segment}')/calendarView")


def unknown_segment(ctx: Ctx) -> Response:
    segment = ctx.request.url.path.rstrip("/").rsplit("/", 1)[-1]
    raise GraphError(400, "BadRequest", f"Resource not found for the segment '{segment}'.")


def calendar_view_delta(ctx: Ctx) -> Response:
    """calendarView/delta: the first request names the window; later ones only carry $skiptoken or $deltatoken."""
    mailbox = ctx.mailbox
    assert mailbox is not None
    if ctx.param("$select"):
        raise GraphError(400, "ErrorInvalidUrlQuery", "$select is not supported on calendarView delta.")
    state = ctx.emulator.state
    skip_token, delta_token = ctx.param("$skiptoken"), ctx.param("$deltatoken")
    try:
        size = max(1, int(ctx.prefer.get("odata.maxpagesize") or state.settings.default_page_size))
    except ValueError:
        size = state.settings.default_page_size
    path = ctx.request.url.path
    with state.lock:
        engine = state.delta
        token_window = engine.window_of(skip_token or delta_token or "")
        try:
            if not skip_token:
                window = None if delta_token else window_of(ctx)
                skip_token = engine.begin(mailbox, window, delta_token or None)
            elif engine.round_mailbox(skip_token, skip=True) not in (None, mailbox.id):
                raise UnknownToken(mailbox.id, engine.resets.get(mailbox.id) or DeltaReset())
            entries, next_token, final_token = engine.page(skip_token, size)
        except UnknownToken as unknown:
            headers = {}
            if unknown.reset.location and token_window is not None:
                start, end = (moment.strftime("%Y-%m-%dT%H:%M:%SZ") for moment in token_window)
                headers["Location"] = ctx.url(path, startDateTime=start, endDateTime=end, **{"$deltatoken": ""})
            raise GraphError(unknown.reset.status, unknown.reset.code, unknown.reset.message, headers) from None
        view = ctx.view()
        value = [delta_json(mailbox, item, view) if item is not None
                 else removed_json(public_id(mailbox, key, immutable=view.immutable_ids)) for key, item in entries]
    data: dict[str, Any] = {"@odata.context": f"{ctx.emulator.base_url}/$metadata#Collection(event)"}
    if next_token:
        data["@odata.nextLink"] = ctx.url(path, **{"$skiptoken": next_token})
    else:
        data["@odata.deltaLink"] = ctx.url(path, **{"$deltatoken": final_token or ""})
    data["value"] = value
    headers = _preference_applied(ctx)
    preference = f"odata.maxpagesize={size}" if "odata.maxpagesize" in ctx.prefer else ""
    if preference:
        headers["Preference-Applied"] = ", ".join(filter(None, [headers.get("Preference-Applied"), preference]))
    return graph_json(data, headers=headers)
