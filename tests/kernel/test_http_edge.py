"""The HTTP edge every domain inherits (issue 7): body limits per route (Starlette's), routes that stream
their body honour Idempotency-Key without buffering it, idempotency leases renewed while a request runs, and one
writer of problem+json (with the request id) for every error path."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import date, timedelta

import httpx
import pytest
from fastapi import APIRouter, Request
from sqlalchemy import text

from tenet.app import create_app
from tenet.kernel import idempotency
from tenet.kernel.http import API_PREFIX, TenetRoute
from tenet.kernel.idempotency import streams_body
from tenet.observability import _RequestIdFilter
from tests.conftest import test_settings

BIG = 3 * 1024 * 1024  # over the default 1 MiB JSON limit, under the upload route's 5 MiB

router = APIRouter(prefix=f"{API_PREFIX}/edge-test", route_class=TenetRoute)
calls: list[str] = []


@router.post("/upload", max_body_size=5 * 1024 * 1024)
@streams_body
async def upload(request: Request) -> dict[str, int]:
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
    calls.append("upload")
    return {"size": size}


release = asyncio.Event()


@router.post("/slow", status_code=201)
async def slow(request: Request) -> dict[str, str]:
    calls.append("slow")
    await release.wait()  # the test decides when the long request ends
    return {"id": uuid.uuid4().hex}


@router.get("/day-after")
async def day_after(day: date) -> dict[str, str]:
    return {"day": (day + timedelta(days=1)).isoformat()}


@router.post("/day-before", status_code=201)
async def day_before(request: Request) -> dict[str, str]:
    day = date.fromisoformat((await request.json())["day"])
    return {"day": (day - timedelta(days=1)).isoformat()}


@router.get("/explode")
async def explode() -> dict[str, str]:
    calls.append("explode")
    raise RuntimeError("kaboom")


@router.post("/explode", status_code=201)
async def explode_post() -> dict[str, str]:
    calls.append("explode")
    raise RuntimeError("kaboom")


@pytest.fixture
async def edge_client(db, clock, tmp_path):
    app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
    app.include_router(router)
    calls.clear()
    release.clear()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


@pytest.fixture
async def committed_edge_client(committed_db, clock, tmp_path):
    """The same app on a database that really commits: concurrent requests on their own connections."""
    app = create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)
    app.include_router(router)
    calls.clear()
    release.clear()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


def _chunks(size: int, piece: int = 64 * 1024):
    async def generate():
        sent = 0
        while sent < size:
            step = min(piece, size - sent)
            sent += step
            yield b"x" * step
    return generate()


class TestBodyLimits:
    async def test_a_declared_body_over_the_default_limit_is_a_413_problem_with_the_request_id(self, edge_client):
        response = await edge_client.post("/api/v1/auth/register", content=b"{" + b" " * BIG + b"}",
                                          headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["code"] == "PAYLOAD_TOO_LARGE" and problem["request_id"] == response.headers["x-request-id"]

    async def test_a_streamed_body_over_the_limit_is_refused_while_it_arrives(self, edge_client):
        response = await edge_client.post("/api/v1/auth/register", content=_chunks(BIG),
                                          headers={"content-type": "application/json"})
        assert response.status_code == 413 and response.json()["code"] == "PAYLOAD_TOO_LARGE"

    async def test_a_route_that_takes_more_says_so_and_only_it_does(self, edge_client):
        accepted = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=_chunks(BIG))
        assert accepted.status_code == 200 and accepted.json() == {"size": BIG}
        declared = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=b"y" * BIG)
        assert declared.status_code == 200
        too_big = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=_chunks(6 * 1024 * 1024))
        assert too_big.status_code == 413 and too_big.json()["code"] == "PAYLOAD_TOO_LARGE"


class TestValuesOutOfRange:
    """Review item 1: date arithmetic that overflows (9999-12-31 plus a day, year 1 minus one) raised
    OverflowError deep in a handler and answered 500; it is the request's value that is out of range."""

    async def test_a_date_past_the_calendar_is_a_422_problem_with_a_stable_code(self, edge_client):
        fine = await edge_client.get(f"{API_PREFIX}/edge-test/day-after", params={"day": "2026-01-05"})
        assert fine.status_code == 200 and fine.json() == {"day": "2026-01-06"}
        response = await edge_client.get(f"{API_PREFIX}/edge-test/day-after", params={"day": "9999-12-31"})
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["code"] == "VALUE_OUT_OF_RANGE" and problem["status"] == 422
        assert problem["request_id"] == response.headers["x-request-id"]

    async def test_behind_an_idempotency_key_too(self, edge_client):
        headers = {"Idempotency-Key": "year-one"}
        first = await edge_client.post(f"{API_PREFIX}/edge-test/day-before", json={"day": "0001-01-01"},
                                       headers=headers)
        again = await edge_client.post(f"{API_PREFIX}/edge-test/day-before", json={"day": "0001-01-01"},
                                       headers=headers)
        assert first.status_code == again.status_code == 422, first.text
        assert first.json()["code"] == again.json()["code"] == "VALUE_OUT_OF_RANGE"
        assert again.headers["idempotent-replayed"] == "true"


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(_RequestIdFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured_logs(edge_client):
    """Every record logged while the test runs (after the app configured logging), with its request id."""
    handler = _Captured()
    root, requests = logging.getLogger(), logging.getLogger("tenet.http")
    root.addHandler(handler)
    requests.setLevel(logging.INFO)  # the one line per request
    yield handler.records
    requests.setLevel(logging.NOTSET)
    root.removeHandler(handler)


class TestUnexpectedErrors:
    """Review item 2: Starlette answers the handler of `Exception` in its outermost layer, outside the request
    id and the request log, then re-raises for the server to log again."""

    async def test_an_unhandled_exception_is_a_500_problem_with_the_request_id(self, edge_client, captured_logs):
        # The test transport re-raises whatever escapes the app (as the server would log it): nothing may.
        response = await edge_client.get(f"{API_PREFIX}/edge-test/explode", headers={"X-Request-ID": "req-500"})
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["x-request-id"] == "req-500"
        problem = response.json()
        assert problem["code"] == "INTERNAL_ERROR" and problem["status"] == 500
        assert problem["request_id"] == "req-500"
        assert "kaboom" not in response.text and "Traceback" not in response.text
        tracebacks = [r for r in captured_logs if r.exc_info and isinstance(r.exc_info[1], RuntimeError)]
        assert len(tracebacks) == 1, [r.getMessage() for r in captured_logs]
        assert tracebacks[0].request_id == "req-500"  # type: ignore[attr-defined]
        [line] = [r for r in captured_logs if r.getMessage() == "request"]
        assert line.status == 500 and line.request_id == "req-500"  # type: ignore[attr-defined]

    async def test_behind_an_idempotency_key_too_and_the_key_is_released(self, edge_client, captured_logs):
        headers = {"Idempotency-Key": "explodes"}
        first = await edge_client.post(f"{API_PREFIX}/edge-test/explode", headers=headers)
        again = await edge_client.post(f"{API_PREFIX}/edge-test/explode", headers=headers)
        assert first.status_code == again.status_code == 500
        assert first.json()["request_id"] == first.headers["x-request-id"]
        assert calls == ["explode", "explode"]  # a 5xx is not stored: the retry ran again


async def cut_short(app, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """One ASGI exchange whose client sends half of its declared body and goes away: (status, problem)."""
    messages = [{"type": "http.request", "body": body[: len(body) // 2], "more_body": True}]
    sent: list[dict] = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    headers = {**headers, "Content-Type": "application/json", "Content-Length": str(len(body))}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": b"", "query_string": b"", "root_path": "", "server": ("t", 80),
             "client": ("127.0.0.1", 1), "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


class TestBodiesCutShort:
    async def test_under_an_idempotency_key_a_cut_body_is_400_and_no_error(self, app, users, captured_logs):
        """The idempotency layer reads the body itself (to fingerprint it): a client gone before the end of it
        raised ClientDisconnect through every handler, a 500 logged as unhandled."""
        user = await users.make()
        status, problem = await cut_short(app, "/api/v1/workspaces", {**user.headers, "Idempotency-Key": "cut-1"},
                                          b'{"name": "Half a workspace"}')
        assert (status, problem["code"]) == (400, "MALFORMED_REQUEST_BODY")
        assert [r.getMessage() for r in captured_logs if r.levelno >= logging.ERROR] == []


class TestStreamingRoutesUnderAnIdempotencyKey:
    async def test_an_upload_under_a_key_runs_once_and_its_retry_is_replayed_unread(self, edge_client, db):
        headers = {"Idempotency-Key": "upload-1"}
        first = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=_chunks(BIG), headers=headers)
        # The retry's body is not read nor compared (it is never buffered): the key names the request.
        second = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=b"another body", headers=headers)
        assert first.status_code == second.status_code == 200
        assert first.json() == second.json() == {"size": BIG}
        assert second.headers["idempotent-replayed"] == "true" and calls == ["upload"]
        async with db.read_only() as session:
            state = (await session.execute(text("SELECT state FROM kernel.idempotency_key "
                                                "WHERE key = 'upload-1'"))).scalar_one()
        assert state == "completed"

    async def test_an_upload_cut_short_under_a_key_is_not_remembered(self, edge_client, db, clock, tmp_path):
        """Nobody heard the answer to a client that went away mid-body: its retry with the key must run."""
        app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
        app.include_router(router)
        status, problem = await cut_short(app, f"{API_PREFIX}/edge-test/upload", {"Idempotency-Key": "upload-2"},
                                          b"x" * 4096)
        assert (status, problem["code"]) == (400, "MALFORMED_REQUEST_BODY") and calls == []
        retry = await edge_client.post(f"{API_PREFIX}/edge-test/upload", content=b"y" * 4096,
                                       headers={"Idempotency-Key": "upload-2"})
        assert retry.status_code == 200 and retry.json() == {"size": 4096}
        assert "idempotent-replayed" not in retry.headers and calls == ["upload"]

    def test_the_openapi_document_offers_the_header_on_streaming_routes(self, db, clock, tmp_path):
        app = create_app(test_settings(data_dir=tmp_path), database=db, clock=clock, run_background_tasks=False)
        app.include_router(router)
        paths = app.openapi()["paths"]

        def names(path):
            return {p["name"] for p in paths[path]["post"].get("parameters", [])}

        assert "Idempotency-Key" in names(f"{API_PREFIX}/edge-test/upload")
        assert "Idempotency-Key" in names(f"{API_PREFIX}/edge-test/slow")
        assert "Idempotency-Key" not in names(f"{API_PREFIX}/auth/token")


async def _until(condition) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out waiting")


class TestLeases:
    async def _duplicate_after_the_first_lease_ran_out(self, edge_client, clock, key: str) -> httpx.Response:
        headers = {"Idempotency-Key": key}
        first = asyncio.create_task(edge_client.post(f"{API_PREFIX}/edge-test/slow", json={}, headers=headers))
        await _until(lambda: calls)  # the first request holds its claim and runs
        clock.advance(idempotency.LEASE + timedelta(seconds=1))  # its first lease is over ...
        await asyncio.sleep(0.25)  # ... unless it renewed it meanwhile (every 0.05 s in the first test)
        duplicate = asyncio.create_task(edge_client.post(f"{API_PREFIX}/edge-test/slow", json={}, headers=headers))
        await asyncio.wait({duplicate}, timeout=0.5)
        release.set()
        self.first = await first
        return await duplicate

    async def test_a_long_request_keeps_its_claim_so_a_duplicate_never_runs_it_twice(self, committed_edge_client,
                                                                                   clock, monkeypatch):
        edge_client = committed_edge_client
        monkeypatch.setattr(idempotency, "RENEW_EVERY", 0.05)
        duplicate = await self._duplicate_after_the_first_lease_ran_out(edge_client, clock, "slow-1")
        assert self.first.status_code == 201
        assert duplicate.status_code == 409 and duplicate.json()["code"] == "IDEMPOTENCY_REQUEST_IN_PROGRESS"
        assert duplicate.json()["request_id"] == duplicate.headers["x-request-id"]
        assert calls == ["slow"]
        replay = await edge_client.post(f"{API_PREFIX}/edge-test/slow", json={}, headers={"Idempotency-Key": "slow-1"})
        assert replay.headers["idempotent-replayed"] == "true" and replay.json() == self.first.json()

    async def test_without_renewal_the_duplicate_would_take_the_claim_over(self, committed_edge_client, clock,
                                                                          monkeypatch):
        """The control: with renewal effectively off, the same timing runs the handler twice."""
        monkeypatch.setattr(idempotency, "RENEW_EVERY", 60)
        await self._duplicate_after_the_first_lease_ran_out(committed_edge_client, clock, "slow-2")
        assert calls == ["slow", "slow"]
