"""JSON logs with a request id, Prometheus metrics, and the middleware that feeds both."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import uuid

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from pythonjsonlogger.json import JsonFormatter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.kernel.context import request_id_var

log = logging.getLogger("tenet.http")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}\Z")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# --- logging -----------------------------------------------------------------------------------------


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """One handler on the root logger; uvicorn's loggers propagate into it. Idempotent."""
    handler = logging.StreamHandler(sys.stdout)
    handler.addFilter(_RequestIdFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter(
            "{asctime}{levelname}{name}{message}{request_id}", style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        ))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s [%(request_id)s] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # We log every request ourselves, with its id and route; uvicorn's access line would duplicate it.
    logging.getLogger("uvicorn.access").disabled = True


# --- metrics -----------------------------------------------------------------------------------------

HTTP_REQUESTS = Counter("tenet_http_requests_total", "HTTP requests answered", ["method", "route", "status"])
HTTP_LATENCY = Histogram(
    "tenet_http_request_duration_seconds", "Time to answer an HTTP request", ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# Counted by `tenet serve` itself (its watchdog), summed with its API processes' metrics (cli._serve).
EMBEDDED_DATABASE_RESTARTS = Counter(
    "tenet_embedded_database_restarts", "Times tenet serve restarted the embedded PostgreSQL after it died")


def render_metrics(extra: dict[str, tuple[str, list[tuple[dict[str, str], float]]]]) -> bytes:
    """The Prometheus text of this process (or of all workers, in multi-process mode) plus `extra`
    gauges computed at scrape time: name -> (help, [(labels, value)])."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        from prometheus_client import REGISTRY

        text = generate_latest(REGISTRY)
    scrape = CollectorRegistry()
    for name, (help_text, samples) in extra.items():
        labels = sorted({key for sample_labels, _ in samples for key in sample_labels})
        gauge = Gauge(name, help_text, labels, registry=scrape)
        for sample_labels, value in samples:
            (gauge.labels(**sample_labels) if labels else gauge).set(value)
    return text + generate_latest(scrape)


# --- middleware --------------------------------------------------------------------------------------


class ObservabilityMiddleware:
    """Outermost middleware: assigns the request id (or keeps a sane incoming X-Request-ID), echoes it,
    logs one line per request and records the metrics by route template (never the raw path, which
    would explode label cardinality)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"x-request-id"), None)
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or "<unmatched>"
            method = scope["method"]
            HTTP_REQUESTS.labels(method, template, str(status)).inc()
            HTTP_LATENCY.labels(method, template).observe(elapsed)
            log.info("request", extra={
                "method": method, "path": scope["path"], "route": template, "status": status,
                "duration_ms": round(elapsed * 1000, 2),
                "client": (scope.get("client") or ("?",))[0],
            })
            request_id_var.reset(token)
