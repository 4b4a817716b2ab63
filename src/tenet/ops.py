"""/healthz, /readyz and /metrics: for load balancers, orchestrators and Prometheus (no auth; expose
them on an internal network)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tenet.db.migrate import current_revision, head_revision
from tenet.kernel import outbox
from tenet.kernel.errors import ServiceUnavailable
from tenet.kernel.jobs import count_jobs
from tenet.kernel.problems import problem_response, request_id_of
from tenet.observability import render_metrics

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready: the database answers and its schema is at the migrations' head",
            responses={503: {"description": "Not ready (database unreachable or not migrated)"}})
async def readyz(request: Request) -> Response:
    head = head_revision()
    try:
        async with request.app.state.db.engine.connect() as connection:
            current = await current_revision(connection)
    except Exception as exc:  # any failure to reach the database means "not ready", never a 500
        return _not_ready(request, "database unreachable", type(exc).__name__)
    if current != head:
        return _not_ready(request, "database schema is not at head", f"current={current} head={head}")
    return JSONResponse({"status": "ready", "database": "ok", "revision": current})


def _not_ready(request: Request, detail: str, reason: str) -> Response:
    error = ServiceUnavailable(detail, headers={"Retry-After": "1"}, reason=reason)
    error.title = "Not ready"  # type: ignore[misc]  # the probe's own title, kept from the first release
    return problem_response(error, request_id_of(request.scope))


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}})
async def metrics(request: Request) -> Response:
    pool = request.app.state.db.engine.pool
    extra: dict[str, tuple[str, list]] = {
        "tenet_db_pool_connections": ("Connections of this process's pool by state", [
            ({"state": "checked_out"}, float(pool.checkedout())),
            ({"state": "idle"}, float(pool.checkedin())),
        ]),
        "tenet_db_pool_size": ("Configured pool size of this process", [({}, float(pool.size()))]),
    }
    try:
        async with request.app.state.db.engine.connect() as connection:
            jobs = await count_jobs(connection)
            mail = await outbox.count_by_status(connection)
        extra["tenet_jobs"] = ("Background jobs by queue and status", [
            ({"queue": q, "status": s}, float(n)) for (q, s), n in jobs.items()])
        extra["tenet_outbox_emails"] = ("Outbox mail by status", [
            ({"status": s}, float(n)) for s, n in mail.items()])
        extra["tenet_database_up"] = ("1 when the database answered this scrape", [({}, 1.0)])
    except Exception:  # metrics must answer while the database is down: that is when they matter
        extra["tenet_database_up"] = ("1 when the database answered this scrape", [({}, 0.0)])
    return Response(render_metrics(extra), media_type="text/plain; version=0.0.4; charset=utf-8")
