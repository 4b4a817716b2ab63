"""The one way to Microsoft Graph (docs/design/outlook.md §1; GRAPH.md): tokens from MSAL's confidential client
(client credentials, its token cache), calls through httpx. Every other module talks to a `GraphClient` and never
builds a URL.

What every request does:
- carries `Prefer: IdType="ImmutableId"` (subscriptions included), so ids survive moves between folders;
- waits for a slot of the mailbox's semaphore: at most `max_concurrent_requests` in flight per mailbox (Graph's
  MailboxConcurrency limit is 4);
- on 429 / 503 honours `Retry-After` (sleeping up to `max_retry_sleep`, else raising `GraphError` with
  `retry_after` so the job is retried later), at most `max_attempts` tries;
- on 401 drops the cached token and retries once with a new one.

MA-INV-38: Tenet never writes to a mailbox. The public methods read; the only writes are to `/subscriptions`, and
`_send` refuses any other non-GET before anything leaves the process (`ReadOnlyViolation`).

TLS: `GRAPH_CA_BUNDLE`, when set, is the only CA file trusted, for MSAL (a requests session with `trust_env =
False`, so REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE cannot override it) and httpx (`trust_env=False`) alike.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import logging
import re
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx
import msal  # type: ignore[import-untyped]
import requests

from tenet.meetings.settings import MeetingSettings

log = logging.getLogger(__name__)

SCOPE = "https://graph.microsoft.com/.default"
IMMUTABLE_ID = 'IdType="ImmutableId"'
READ_METHODS = frozenset({"GET"})
_SUBSCRIPTIONS_PATH = re.compile(r"^/subscriptions(/[^/]+(/reauthorize)?)?\Z")
_USER_PATH = re.compile(r"^/users/([^/]+)(/|$)", re.IGNORECASE)
TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class ReadOnlyViolation(RuntimeError):
    """A write to anything but Tenet's own subscriptions was about to be sent (MA-INV-38): a bug, never sent."""


@dataclass
class GraphError(Exception):
    """Graph answered an error (or could not be reached: status 0). `code` is Graph's (`ErrorAccessDenied`,
    `syncStateNotFound`, ...), `request_id` the one Microsoft support asks for."""

    status: int
    code: str
    message: str
    request_id: str | None = None
    retry_after: float | None = None
    location: str | None = None

    def __str__(self) -> str:
        return f"Graph {self.status} {self.code}: {self.message} (request-id {self.request_id})"

    @property
    def access_denied(self) -> bool:
        return self.status == 403 and self.code.lower() == "erroraccessdenied"

    @property
    def mailbox_missing(self) -> bool:
        return self.status == 404 or self.code.lower() in {"mailboxnotenabledforrestapi", "resourcenotfound",
                                                           "erroritemnotfound", "request_resourcenotfound"}

    @property
    def sync_reset(self) -> bool:
        """410 Gone or `syncStateNotFound` in any case: the delta state is gone, a full resync follows."""
        return self.status == 410 or self.code.lower() in {"syncstatenotfound", "syncstateinvalid"}


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]
    request_id: str | None


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error(response: httpx.Response) -> GraphError:
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    inner = error.get("innerError") or error.get("innererror") or {}
    return GraphError(
        status=response.status_code, code=str(error.get("code") or f"HTTP{response.status_code}"),
        message=str(error.get("message") or response.reason_phrase)[:500],
        request_id=response.headers.get("request-id") or inner.get("request-id"),
        retry_after=_parse_retry_after(response.headers.get("Retry-After")),
        location=response.headers.get("Location"))


def ssl_context(settings: MeetingSettings) -> ssl.SSLContext:
    if settings.graph_ca_bundle is not None:
        return ssl.create_default_context(cafile=str(settings.graph_ca_bundle))
    return ssl.create_default_context()


# --- tokens: one MSAL application per credentials, per process (its token cache is in memory) --------------------

_APPS: dict[str, msal.ConfidentialClientApplication] = {}
_APPS_LOCK = threading.Lock()


def _app_key(settings: MeetingSettings) -> str:
    secret = settings.graph_client_secret.get_secret_value() if settings.graph_client_secret else ""
    parts = [settings.graph_authority_url, settings.graph_tenant_id or "", settings.graph_client_id or "",
             hashlib.sha256(secret.encode()).hexdigest(), str(settings.graph_ca_bundle or "")]
    return "|".join(parts)


def _msal_app(settings: MeetingSettings) -> msal.ConfidentialClientApplication:
    key = _app_key(settings)
    with _APPS_LOCK:
        app = _APPS.get(key)
        if app is None:
            session = requests.Session()
            session.trust_env = False  # REQUESTS_CA_BUNDLE / proxies from the environment never override
            session.verify = str(settings.graph_ca_bundle) if settings.graph_ca_bundle else True
            secret = settings.graph_client_secret.get_secret_value() if settings.graph_client_secret else ""
            authority = f"{settings.graph_authority_url.rstrip('/')}/{settings.graph_tenant_id}"
            app = msal.ConfidentialClientApplication(
                settings.graph_client_id, client_credential=secret, authority=authority, http_client=session,
                instance_discovery=False, token_cache=msal.TokenCache())
            _APPS[key] = app
        return app


class TokenSource:
    """Access tokens for Graph: MSAL's cache first, the authority when it has none (in a worker thread: MSAL is
    synchronous). `drop()` forgets the cached token (after a 401)."""

    def __init__(self, settings: MeetingSettings) -> None:
        self._settings = settings
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        async with self._lock:
            app = _msal_app(self._settings)
            try:
                result = await anyio.to_thread.run_sync(lambda: app.acquire_token_for_client(scopes=[SCOPE]))
            except requests.RequestException as exc:
                raise GraphError(0, "AuthorityUnreachable", type(exc).__name__) from exc
            except ValueError as exc:  # MSAL refuses the authority (not https, unknown tenant document)
                raise GraphError(0, "AuthorityInvalid", str(exc)[:200]) from exc
        if "access_token" not in result:
            raise GraphError(401, str(result.get("error") or "invalid_client"),
                             str(result.get("error_description") or "")[:300].splitlines()[0] if
                             result.get("error_description") else "no token",
                             request_id=result.get("correlation_id"))
        return str(result["access_token"])

    async def drop(self) -> None:
        async with self._lock:
            app = _msal_app(self._settings)
            await anyio.to_thread.run_sync(app.remove_tokens_for_client)


# --- the client -------------------------------------------------------------------------------------------------

class GraphClient:
    """Graph for one job run or request (`async with GraphClient(settings, ...) as graph:`). `requests` counts the
    Graph requests sent (retries included), for the run's record."""

    def __init__(self, settings: MeetingSettings, *, max_concurrent: int = 4, max_attempts: int = 5,
                 max_retry_sleep: float = 30.0, retry_base_seconds: float = 2.0,
                 sleep: Callable[[float], Any] = asyncio.sleep, transport: httpx.AsyncBaseTransport | None = None
                 ) -> None:
        self.base_url = settings.graph_base_url.rstrip("/")
        self._tokens = TokenSource(settings)
        self._max_concurrent = max(1, max_concurrent)
        self._max_attempts = max(1, max_attempts)
        self._max_retry_sleep = max_retry_sleep
        self._retry_base = retry_base_seconds
        self._sleep = sleep
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._http = httpx.AsyncClient(verify=ssl_context(settings), trust_env=False, timeout=TIMEOUT,
                                       transport=transport, follow_redirects=False)
        self.requests = 0

    async def __aenter__(self) -> GraphClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the only way out ---------------------------------------------------------------------------------------

    def _url(self, path_or_url: str) -> tuple[str, str]:
        """(absolute URL, path relative to the base) for a path (`/users/...`) or a link Graph gave (nextLink)."""
        if path_or_url.startswith(("https://", "http://")):
            if not path_or_url.startswith(self.base_url + "/"):
                raise ValueError("a Graph link outside GRAPH_BASE_URL")
            return path_or_url, urlsplit(path_or_url).path[len(urlsplit(self.base_url).path):]
        return self.base_url + path_or_url, urlsplit(path_or_url).path

    def _slot(self, path: str) -> asyncio.Semaphore:
        match = _USER_PATH.match(path)
        key = match.group(1).lower() if match else "-"
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = asyncio.Semaphore(self._max_concurrent)
        return slot

    async def _send(self, method: str, path_or_url: str, *, params: Mapping[str, Any] | None = None,
                    json: Any = None, prefer: tuple[str, ...] = ()) -> Response:
        url, path = self._url(path_or_url)
        if method not in READ_METHODS and not _SUBSCRIPTIONS_PATH.match(path):
            raise ReadOnlyViolation(f"{method} {path}: Tenet never writes to a mailbox (MA-INV-38)")
        headers = {"Prefer": ", ".join((IMMUTABLE_ID, *prefer)), "Accept": "application/json"}
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            headers["Authorization"] = f"Bearer {await self._tokens.token()}"
            async with self._slot(path):
                self.requests += 1
                try:
                    response = await self._http.request(method, url, params=params, json=json, headers=headers)
                except httpx.HTTPError as exc:
                    if attempt >= self._max_attempts:
                        raise GraphError(0, "GraphUnreachable", type(exc).__name__) from exc
                    await self._sleep(min(self._max_retry_sleep, self._retry_base * 2 ** (attempt - 1)))
                    continue
            if response.status_code < 400:
                body = response.json() if response.content else {}
                return Response(response.status_code, body, response.headers.get("request-id"))
            error = _error(response)
            if response.status_code == 401 and not refreshed:
                refreshed = True
                await self._tokens.drop()
                continue
            if response.status_code in (429, 503) and attempt < self._max_attempts:
                wait = error.retry_after if error.retry_after is not None else self._retry_base * 2 ** (attempt - 1)
                if wait <= self._max_retry_sleep:
                    log.info("graph throttled", extra={"status": error.status, "retry_after": wait})
                    await self._sleep(wait)
                    continue
            raise error

    # --- reads -----------------------------------------------------------------------------------------------

    async def get(self, path_or_url: str, *, params: Mapping[str, Any] | None = None,
                  prefer: tuple[str, ...] = ()) -> Response:
        return await self._send("GET", path_or_url, params=params, prefer=prefer)

    async def user(self, address: str) -> dict[str, Any]:
        return (await self.get(f"/users/{_segment(address)}")).body

    async def first_event(self, user: str) -> Response:
        """The access check's second step: Exchange refuses mailbox data (403 ErrorAccessDenied), not the directory."""
        return await self.get(f"/users/{_segment(user)}/events", params={"$top": "1", "$select": "id"})

    async def event(self, user: str, event_id: str, *, select: str | None = None) -> dict[str, Any]:
        params = {"$select": select} if select else None
        return (await self.get(f"/users/{_segment(user)}/events/{_segment(event_id)}", params=params)).body

    async def pages(self, path: str, *, params: Mapping[str, Any] | None = None,
                    page_size: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Each page of a collection, following @odata.nextLink (the link carries the query)."""
        prefer = (f"odata.maxpagesize={page_size}",) if page_size else ()
        response = await self.get(path, params=params, prefer=prefer)
        while True:
            yield response.body
            link = response.body.get("@odata.nextLink")
            if not link:
                return
            response = await self.get(link, prefer=prefer)

    async def instances(self, user: str, master_id: str, span: tuple[datetime, datetime], *,
                        page_size: int, select: str | None = None) -> list[dict[str, Any]]:
        """A series' occurrences and exceptions overlapping the span (`/events/{id}/instances`, every page): the
        only place an occurrence deleted in Outlook shows, by its absence (GRAPH.md "Delta")."""
        found: list[dict[str, Any]] = []
        params = {"startDateTime": span[0].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "endDateTime": span[1].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if select:
            params["$select"] = select
        async for page in self.pages(f"/users/{_segment(user)}/events/{_segment(master_id)}/instances",
                                     params=params, page_size=page_size):
            found.extend(i for i in page.get("value") or [] if isinstance(i, dict))
        return found

    async def delta_page(self, link_or_path: str, *, params: Mapping[str, Any] | None = None,
                         page_size: int) -> dict[str, Any]:
        """One page of calendarView/delta: a first call (path + window) or a stored next/delta link."""
        return (await self.get(link_or_path, params=params, prefer=(f"odata.maxpagesize={page_size}",))).body

    # --- Tenet's own subscriptions (the only writes) ------------------------------------------------------------

    async def create_subscription(self, *, resource: str, notification_url: str, lifecycle_url: str,
                                  expires_at: datetime, client_state: str) -> dict[str, Any]:
        body = {"changeType": "created,updated,deleted", "notificationUrl": notification_url,
                "lifecycleNotificationUrl": lifecycle_url, "resource": resource,
                "expirationDateTime": _iso(expires_at), "clientState": client_state}
        return (await self._send("POST", "/subscriptions", json=body)).body

    async def renew_subscription(self, subscription_id: str, *, expires_at: datetime) -> dict[str, Any]:
        return (await self._send("PATCH", f"/subscriptions/{_segment(subscription_id)}",
                                 json={"expirationDateTime": _iso(expires_at)})).body

    async def reauthorize_subscription(self, subscription_id: str) -> None:
        await self._send("POST", f"/subscriptions/{_segment(subscription_id)}/reauthorize")

    async def delete_subscription(self, subscription_id: str) -> None:
        await self._send("DELETE", f"/subscriptions/{_segment(subscription_id)}")


def _segment(value: str) -> str:
    """One path segment: ids and addresses are opaque (ImmutableIds hold '-' and '_'; never '/')."""
    return quote(value, safe="@.-_=")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


def client_for(settings: MeetingSettings, *, max_concurrent: int, max_attempts: int, retry_base_seconds: int,
               max_retry_sleep: float = 30.0) -> GraphClient:
    return GraphClient(settings, max_concurrent=max_concurrent, max_attempts=max_attempts,
                       retry_base_seconds=float(retry_base_seconds), max_retry_sleep=max_retry_sleep)
