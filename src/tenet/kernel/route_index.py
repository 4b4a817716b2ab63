"""Route matching by path prefix in front of FastAPI's router (issue 22): the same route, found without the scan.

FastAPI 0.165 matches a request by asking every included router in turn, and each router asks every one of its
routes (`_IncludedRouter._match`), at about 5-15 µs a route: the Outlook webhook sat behind some 190 routes, the
check-in behind some 120, and the scan cost more of their CPU than the handler did. Most of those routes cannot
match: their paths begin with other literal segments.

`install_route_index` builds, once, which of the application's top-level routes (included routers, mounts, plain
routes) *could* match a path: a route's path matches only paths that begin with its literal part (the text before
its first `{param}`; the whole path when it has none). The index keeps, for each top-level route, the first literal
segments of each of its routes (up to `DEPTH`), and a request looks up only the routes whose literal segments its
path begins with, **in the router's own order**. A route the index cannot read (a host route, anything without a
`path_format`) is kept for every path.

So the one answer it gives itself is the one Starlette's rule gives (the first route in order that matches fully):
the routes it skips cannot match at all. Everything else (no full match: a 405 from a partial match, a slash
redirect, the low-priority routes, the 404) goes to the router's own `app`, which scans every route as before, so
404 and 405 answers stay what they were. The routes themselves, their order and the OpenAPI document are untouched
(`app.routes` is never modified). Routes added after installing (tests do) rebuild the index.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.routing import APIRouter
from starlette import routing
from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

try:  # FastAPI's own dispatch steps, private: a FastAPI without them gets its plain router (the full scan)
    from fastapi.routing import (  # type: ignore[attr-defined,unused-ignore]
        _apply_router_form_limits,
        _IncludedRouter,
        _route_selected,
        _update_scope,
    )
    AVAILABLE = True
except ImportError:  # pragma: no cover - only on a FastAPI other than the one pyproject.toml tests with
    AVAILABLE = False

log = logging.getLogger(__name__)

DEPTH = 4  # literal segments looked at: /api/v1/<domain>/<collection> tells the routers apart
_MEMO_LIMIT = 4096  # distinct first segments remembered (paths with an id early make new ones)

Key = tuple[str, ...]


def _path_formats(route: BaseRoute, prefix: str = "") -> Iterator[str | None]:
    """The path templates a top-level route answers (None: one the index cannot read). An included router's
    are its include prefix + each route's own path, read from the routes themselves: FastAPI's effective
    route contexts give the same paths but build every route's dependency tree to do it (some 0.3 s for this
    application, paid again by each app a test builds), where FastAPI builds them only for routes it tries."""
    if isinstance(route, _IncludedRouter):
        prefix += route.include_context.prefix
        for inner in route.original_router.routes:
            yield from _path_formats(inner, prefix)
    else:
        path_format = getattr(route, "path_format", None)
        yield prefix + path_format if isinstance(path_format, str) and path_format else None


def literal_key(path_format: str | None) -> tuple[Key, str | None]:
    """(the complete literal segments a matching path must begin with, up to DEPTH; the exact path when the
    template has no parameter). `/api/v1/meetings/{id}/check-in` gives (("api", "v1", "meetings"), None),
    `/healthz` gives ((), "/healthz")."""
    if path_format is None:
        return (), None
    literal, brace, _ = path_format.partition("{")
    if not brace:
        return (), path_format
    # The text after the last "/" of the literal is only the start of a segment ("/files/f{n}"): not a key.
    segments = literal.split("/")[1:-1]
    return tuple(segments[:DEPTH]), None


class RouteIndex:
    """Which top-level routes of `router` could match a path; and the ASGI app that dispatches through it."""

    def __init__(self, router: APIRouter) -> None:
        self.router = router
        self._build()

    def _build(self) -> None:
        routes = self.router.routes
        by_prefix: dict[Key, set[int]] = {}
        by_path: dict[str, set[int]] = {}
        for position, route in enumerate(routes):
            for path_format in _path_formats(route):
                key, exact = literal_key(path_format)
                if exact is not None:
                    by_path.setdefault(exact, set()).add(position)
                else:
                    by_prefix.setdefault(key, set()).add(position)
        self._routes = list(routes)
        self._version = self.router._routes_version
        self._by_prefix = by_prefix
        self._memo: dict[Key, tuple[BaseRoute, ...]] = {}
        # An exact path's candidates: its own routes with those of the prefixes it begins with.
        self._by_path = {path: self._select(positions | self._prefix_positions(self._key_of(path)))
                         for path, positions in by_path.items()}

    @staticmethod
    def _key_of(path: str) -> Key:
        return tuple(path.split("/", DEPTH + 1)[1:DEPTH + 1])

    def _prefix_positions(self, key: Key) -> set[int]:
        positions: set[int] = set()
        for length in range(len(key) + 1):
            positions |= self._by_prefix.get(key[:length], set())
        return positions

    def _select(self, positions: set[int]) -> tuple[BaseRoute, ...]:
        return tuple(self._routes[p] for p in sorted(positions))

    def candidates(self, path: str) -> tuple[BaseRoute, ...]:
        """The top-level routes that could match `path`, in the router's order."""
        if len(self.router.routes) != len(self._routes) or self.router._routes_version != self._version:
            self._build()
        exact = self._by_path.get(path)
        if exact is not None:
            return exact
        key = self._key_of(path)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[key] = self._select(self._prefix_positions(key))
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # What APIRouter.app does for the first full match, over the candidates only.
            for route in self.candidates(get_route_path(scope)):
                match, child_scope = route.matches(scope)
                if match == Match.FULL:
                    router = self.router
                    _apply_router_form_limits(scope, router.form_limits)
                    if "router" not in scope:
                        scope["router"] = router
                    _update_scope(scope, child_scope)
                    _route_selected(scope=scope, path=getattr(route, "path_format", None),
                                    mount=isinstance(route, routing.Mount))
                    await route.handle(scope, receive, send)
                    return
        await self.router.app(scope, receive, send)


def install_route_index(app: FastAPI) -> RouteIndex | None:
    """Dispatch `app`'s requests through a RouteIndex (after every router is included). None, and the router
    left as FastAPI built it, when this FastAPI lacks the dispatch steps the index repeats."""
    if not AVAILABLE or not hasattr(app.router, "_routes_version"):
        log.warning("route index off: this FastAPI's router has other internals; routes are matched by scan")
        return None
    router = app.router
    if router.middleware_stack != router.app:  # a router-level middleware would be bypassed
        raise RuntimeError("the router has its own middleware; the route index would bypass it")
    index = RouteIndex(router)
    router.middleware_stack = index
    return index
