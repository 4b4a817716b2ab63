"""The route index (issue 22) picks the route FastAPI's full scan picks, for every route of the application, and
leaves the routes and the OpenAPI document as they were; 404 and 405 answers are still the router's own
(tests/kernel/test_bad_input.py)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import _IncludedRouter
from starlette.routing import BaseRoute, Match

from tenet.app import create_app
from tenet.kernel.route_index import RouteIndex, literal_key
from tests.conftest import test_settings

ID = "0b7c1e2a-0000-4000-8000-000000000000"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(test_settings(), run_background_tasks=False)


def _scope(path: str, method: str) -> dict:
    return {"type": "http", "path": path, "root_path": "", "method": method, "path_params": {},
            "query_string": b"", "headers": []}


def _first_full(routes: tuple[BaseRoute, ...] | list[BaseRoute], path: str, method: str) -> BaseRoute | None:
    scope = _scope(path, method)
    for route in routes:
        if route.matches(scope)[0] == Match.FULL:
            return route
    return None


def _concrete_paths(app: FastAPI) -> list[str]:
    """A path for every route template of the application, and near misses of it."""
    index: RouteIndex = app.router.middleware_stack
    paths = set()
    for position in range(len(app.router.routes)):
        for path_format in _formats(app, position):
            path = re.sub(r"\{path\}", "a/b.css", path_format)
            path = re.sub(r"\{[^}]+\}", ID, path)
            paths |= {path, path + "/", path.rstrip("/") + "/x", path[:-1] or "/", path.upper()}
    assert index.candidates("/") is not None
    return sorted(paths)


def _formats(app: FastAPI, position: int) -> list[str]:
    """FastAPI's own view of a top-level route's paths (its effective routes): the oracle the index is held to."""
    route = app.router.routes[position]
    if isinstance(route, _IncludedRouter):
        return [f for c in route.effective_route_contexts() if (f := getattr(c.starlette_route or c, "path_format",
                                                                              None))]
    return [route.path_format] if getattr(route, "path_format", None) else []


def test_the_index_reads_the_paths_fastapi_builds_without_building_them(app):
    from tenet.kernel.route_index import _path_formats

    for position, route in enumerate(app.router.routes):
        assert [f for f in _path_formats(route) if f] == _formats(app, position), route


def test_literal_key_reads_the_segments_before_the_first_parameter():
    assert literal_key("/api/v1/meeting-attendance/meetings/{meeting_id}/check-in") == (
        ("api", "v1", "meeting-attendance", "meetings"), None)
    assert literal_key("/console/meetings/{meeting_id}") == (("console", "meetings"), None)
    assert literal_key("/static/{path}") == (("static",), None)
    assert literal_key("/files/f{n}") == (("files",), None)  # "f" only begins a segment
    assert literal_key("/console/{rest}") == (("console",), None)
    assert literal_key("/healthz") == ((), "/healthz")
    assert literal_key(None) == ((), None)


def test_the_index_finds_the_route_the_full_scan_finds_for_every_route_and_method(app):
    index: RouteIndex = app.router.middleware_stack
    assert isinstance(index, RouteIndex)
    routes = app.router.routes
    checked = skipped = 0
    for path in _concrete_paths(app):
        candidates = index.candidates(path)
        assert list(candidates) == sorted(candidates, key=routes.index), path  # the router's order
        for method in METHODS:
            expected = _first_full(routes, path, method)
            assert _first_full(candidates, path, method) is expected, (method, path)
            checked += 1
        skipped += len(routes) - len(candidates)
    assert checked > 1000 and skipped > checked  # it does skip routes: most paths need a few of 48


def test_hot_paths_are_matched_against_few_routes(app):
    index: RouteIndex = app.router.middleware_stack
    assert len(index.candidates("/api/v1/meeting-attendance/outlook/notifications")) == 1
    assert len(index.candidates(f"/api/v1/meeting-attendance/meetings/{ID}/check-in")) <= 5
    assert len(index.candidates(f"/api/v1/meeting-attendance/public/meetings/{ID}/check-in")) == 1


def test_the_index_leaves_routes_and_the_openapi_document_unchanged(app):
    routes = list(app.router.routes)
    indexed = json.dumps(app.openapi(), sort_keys=True)
    plain = create_app(test_settings(), run_background_tasks=False)
    plain.router.middleware_stack = plain.router.app  # without the index
    assert json.dumps(plain.openapi(), sort_keys=True) == indexed
    assert [(type(r), getattr(r, "path", None)) for r in plain.router.routes] == [
        (type(r), getattr(r, "path", None)) for r in routes]
    assert app.router.routes == routes


async def test_a_route_added_after_the_index_is_served():
    app = create_app(test_settings(), run_background_tasks=False)

    @app.get("/api/v1/added-late")
    async def added_late() -> dict[str, str]:
        return {"late": "yes"}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/api/v1/added-late")
        assert response.status_code == 200 and response.json() == {"late": "yes"}
        assert (await client.post("/api/v1/added-late")).status_code == 405
        assert (await client.get("/api/v1/added-later")).status_code == 404
