"""/healthz and /readyz for load balancers and orchestrators (no auth), and /metrics for Prometheus (only with
TENET_METRICS_TOKEN, to a scraper sending it as a bearer token)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from procrastinate.jobs import DEFAULT_QUEUE
from sqlalchemy import text

from tenet.db.migrate import current_revision, head_revision
from tenet.kernel import errors, outbox
from tenet.kernel.availability import unreachable_reason
from tenet.kernel.errors import ServiceUnavailable
from tenet.kernel.http import problem_responses
from tenet.kernel.jobs import count_jobs, ready_jobs
from tenet.kernel.problems import problem_response, request_id_of
from tenet.observability import render_metrics

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready: the database answers and its schema is at the migrations' head",
            responses={503: {"description": "Not ready (database unreachable or not migrated)"}})
async def readyz(request: Request) -> Response:
    db = request.app.state.db
    availability = db.availability
    if availability is not None and availability.down:
        # Known to be down: answer at once; the process's probe reopens when it is back.
        return _not_ready(request, "database unreachable", availability.reason or "the database did not answer")
    head = head_revision()
    try:
        async with db.engine.connect() as connection:
            current = await current_revision(connection)
    except Exception as exc:  # any failure to reach the database means "not ready", never a 500
        return _not_ready(request, "database unreachable",
                          unreachable_reason(exc) or "the database did not answer the readiness check")
    if current != head:
        return _not_ready(request, "database schema is not at head", f"current={current} head={head}")
    return JSONResponse({"status": "ready", "database": "ok", "revision": current})


def _not_ready(request: Request, detail: str, reason: str) -> Response:
    error = ServiceUnavailable(detail, headers={"Retry-After": "1"}, reason=reason)
    error.title = "Not ready"  # type: ignore[misc]  # the probe's own title, kept from the first release
    return problem_response(error, request_id_of(request.scope))


def _authorize_scrape(request: Request) -> None:
    """Metrics name the routes, pool sizes and job counts: only a scraper holding the token sees them."""
    token = request.app.state.settings.metrics_token
    if token is None:
        raise errors.RouteNotFound("Metrics are not served: set TENET_METRICS_TOKEN and scrape /metrics with "
                                   "Authorization: Bearer <that token>")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), expected):
        raise errors.NotAuthenticated("Scrape /metrics with Authorization: Bearer <TENET_METRICS_TOKEN>")


Samples = list[tuple[dict[str, str], float]]
Gauges = dict[str, tuple[str, Samples]]

# The scrape's database part is bounded: its connection and statements get this long in all (and each statement
# as long on the server), so a pool at its limit or a slow table costs one scrape `tenet_database_up 0` instead of
# holding a connection, or the scraper, for the pool timeout.
SCRAPE_DATABASE_SECONDS = 2.0
JOB_STATUSES = ("todo", "doing", "succeeded", "failed", "cancelled", "aborted")  # procrastinate's, less the legacy one
MAIL_STATUSES = ("pending", "sent", "failed")  # kernel.email_outbox's CHECK


@router.get("/metrics", summary="Prometheus metrics (bearer TENET_METRICS_TOKEN)", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}, **problem_responses(401, 404)})
async def metrics(request: Request) -> Response:
    _authorize_scrape(request)
    db = request.app.state.db
    gauges = {**_pool_gauges(db.engine.pool), **_standby_gauges(db)}
    gauges.update(await _database_gauges(db, request.app.state.clock.now()))
    return Response(render_metrics(gauges), media_type="text/plain; version=0.0.4; charset=utf-8")


def _pool_gauges(pool: Any) -> Gauges:
    """This process's unit-of-work pool now (its checkouts' waits are counted as they happen: tenet.kernel.metrics)."""
    return {
        "tenet_db_pool_connections": ("Connections of this process's unit-of-work pool by state", [
            ({"state": "checked_out"}, float(pool.checkedout())),
            ({"state": "idle"}, float(pool.checkedin())),
        ]),
        "tenet_db_pool_size": ("Configured pool size of this process", [({}, float(pool.size()))]),
        # SQLAlchemy counts overflow from -pool_size up: below zero the pool has not even opened pool_size yet.
        "tenet_db_pool_overflow_connections": (
            "Connections of this process's unit-of-work pool beyond its size (at most TENET_DB_MAX_OVERFLOW)", [
                ({}, float(max(0, pool.overflow())))]),
    }


def _standby_gauges(db: Any) -> Gauges:
    """The read path's standby (tenet.kernel.replica): what an operator alerts on when reads pile on the primary."""
    standby = getattr(db, "standby", None)
    if standby is None:
        return {}
    state = standby.state
    gauges: Gauges = {"tenet_db_standby_in_use": ("1 while this process sends reads to the standby", [
        ({}, 1.0 if state.usable else 0.0)])}
    if state.lag_seconds is not None:  # +Inf: behind every sample kept (at least the bound), or not yet known
        gauges["tenet_db_standby_lag_seconds"] = ("The standby's replay lag behind the primary, last sample", [
            ({}, float(state.lag_seconds))])
    return gauges  # where its reads went: tenet_db_reads_routed_total, counted as they run (tenet.kernel.metrics)


@dataclass
class _DatabaseScrape:
    """What the database told one scrape so far: whether it answered at all, and the gauges read before the bound."""

    answered: bool = False
    gauges: Gauges = field(default_factory=dict)


async def _database_gauges(db: Any, now: datetime) -> Gauges:
    """What only the database knows (jobs, mail), and whether it answered; never waits for a database known down.
    The statements run cheapest first, and what they found within the bound is kept: a slow count (`tenet_jobs` reads
    every job of the last 30 days, finished ones included) costs its own gauge, not the database's `up`."""
    scrape = _DatabaseScrape()
    if db.availability is None or not db.availability.down:
        try:
            async with asyncio.timeout(SCRAPE_DATABASE_SECONDS):
                await _read_backlogs(db, now, scrape)
        except Exception as exc:  # metrics must answer while the database is down: that is when they matter
            reason = "no answer within the scrape's bound" if isinstance(exc, TimeoutError) else (
                unreachable_reason(exc) or "error")
            log.info("metrics: the database did not answer the whole scrape (%s)", reason)
    return {**scrape.gauges, "tenet_database_up": ("1 when the database answered this scrape", [
        ({}, 1.0 if scrape.answered else 0.0)])}


async def _read_backlogs(db: Any, now: datetime, scrape: _DatabaseScrape) -> None:
    gauges = scrape.gauges
    async with db.engine.connect() as connection:
        await connection.execute(text("SELECT set_config('statement_timeout', :ms, true)"),
                                 {"ms": str(int(SCRAPE_DATABASE_SECONDS * 1000))})
        scrape.answered = True
        ready = await ready_jobs(connection)
        gauges["tenet_jobs_ready"] = ("Jobs ready to run now (todo, scheduled time passed) by queue", [
            ({"queue": q}, float(n)) for q, (n, _) in ready.items()])
        gauges["tenet_jobs_oldest_ready_age_seconds"] = (
            "How long the longest-waiting ready job of each queue has waited (0 when none)", [
                ({"queue": q}, age) for q, (_, age) in ready.items()])
        due_mail, due_mail_waited = await outbox.due_backlog(connection, now)
        gauges["tenet_outbox_due_emails"] = ("Pending mail due to be sent now", [({}, float(due_mail))])
        gauges["tenet_outbox_oldest_due_age_seconds"] = (
            "How long the longest-waiting due mail has been due (0 when none)", [({}, due_mail_waited)])
        # Every status of mail and of the default queue is there at 0 when it has none: a count that appears
        # only with its first failure would be a new series, whose first rise no delta() or increase() sees.
        mail = {**{status: 0 for status in MAIL_STATUSES}, **await outbox.count_by_status(connection)}
        gauges["tenet_outbox_emails"] = ("Outbox mail by status", [
            ({"status": s}, float(n)) for s, n in mail.items()])
        jobs = {**{(DEFAULT_QUEUE, status): 0 for status in JOB_STATUSES}, **await count_jobs(connection)}
        gauges["tenet_jobs"] = ("Background jobs by queue and status", [
            ({"queue": q, "status": s}, float(n)) for (q, s), n in jobs.items()])
