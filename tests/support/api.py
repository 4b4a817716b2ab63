"""The one API client of the in-process tests: the routes under a base path as calls answering raw httpx
responses (tests assert on them), each signed for its caller at the frozen clock's time.

A fresh access token per call means a test may move the clock by days (invitation expiry, retention) without
the 15-minute tokens expiring under it. The caller is anything with an `id` (a `TestUser`), and a `kind` and
`scopes` when it is not a user (an API client with scopes, as the reservation ingest has). A domain's client
subclasses `Api` with its base path and its compound steps (`SocialApi.befriend`, `MeetingApi.check_in`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any, Protocol

import httpx


class Caller(Protocol):
    """Who calls: `kind` defaults to "user" and `scopes` to none when the object has neither."""

    @property
    def id(self) -> uuid.UUID: ...


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of a bearer token."""
    return {"Authorization": f"Bearer {token}"}


class Api:
    """The routes under `base` (e.g. "/api/v1/social") as calls; `call` is the one place a request is made."""

    base = ""

    def __init__(self, client: httpx.AsyncClient, app, clock, base: str | None = None) -> None:
        self.client = client
        self.app = app
        self.clock = clock
        if base is not None:
            self.base = base

    def token(self, who: Caller) -> str:
        """An access token for `who`, issued now by the frozen clock."""
        return self.app.state.access_tokens.issue(subject=who.id, kind=getattr(who, "kind", "user"),
                                                  now=self.clock.now(), scopes=tuple(getattr(who, "scopes", ())))

    def headers(self, who: Caller | None, **extra: str) -> dict[str, str]:
        """`extra` headers, with a fresh bearer token for `who` unless the call is anonymous (None)."""
        return dict(extra) if who is None else {**bearer(self.token(who)), **extra}

    async def call(self, method: str, path: str, who: Caller | None, *, json: Any = None, params: dict | None = None,
                   headers: dict | None = None, content: Any = None) -> httpx.Response:
        return await self.client.request(method, self.base + path, json=json, params=params, content=content,
                                         headers=self.headers(who, **(headers or {})))

    async def get(self, who: Caller | None, path: str, **params: Any) -> httpx.Response:
        return await self.call("GET", path, who, params=params)

    async def post(self, who: Caller | None, path: str, body: Any = None) -> httpx.Response:
        return await self.call("POST", path, who, json=body)

    async def patch(self, who: Caller | None, path: str, body: Any, **headers: str) -> httpx.Response:
        return await self.call("PATCH", path, who, json=body, headers=headers)

    async def put(self, who: Caller | None, path: str, body: Any = None, **headers: str) -> httpx.Response:
        return await self.call("PUT", path, who, json=body, headers=headers)

    async def delete(self, who: Caller | None, path: str, **headers: str) -> httpx.Response:
        return await self.call("DELETE", path, who, headers=headers)

    @staticmethod
    async def ok(response: Awaitable[httpx.Response], status: int = 200) -> Any:
        """The JSON body of the awaited response (None when empty), after asserting its status."""
        answered = await response
        assert answered.status_code == status, answered.text
        return answered.json() if answered.content else None
