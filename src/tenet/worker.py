"""`tenet worker`: procrastinate workers on the service's own database, running every domain's jobs."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

import procrastinate

from tenet.db.database import Database, libpq_url
from tenet.domains import load_all
from tenet.kernel.clock import Clock, SystemClock
from tenet.kernel.jobs import JobRuntime, recover_stalled_jobs, runtime_context
from tenet.kernel.outbox import install_delivery
from tenet.kernel.settings import KernelSettings

log = logging.getLogger(__name__)

RESTART_PAUSE = 1.0  # seconds before procrastinate's worker is started again after it stopped on its own
MAX_RESTART_PAUSE = 30.0


def blueprints() -> dict[str, tuple[procrastinate.Blueprint, ...]]:
    """Each domain's blueprints under its name (task names become `<domain>:<job>`; job names are unique
    across domains, which the `job` decorator checks)."""
    return {domain.name: domain.blueprints for domain in load_all() if domain.blueprints}


@cache
def _registered_app() -> procrastinate.App:
    # procrastinate renames a blueprint's tasks when it registers them, so they are registered once per
    # process; the app is then pointed at the database this process uses.
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=""))
    for namespace, domain_blueprints in blueprints().items():
        for blueprint in domain_blueprints:
            app.add_tasks_from(blueprint, namespace=namespace)
    return app


def build_job_app(url: str, *, prepare: bool = True) -> procrastinate.App:
    """The process's job app (every domain's tasks) on the database at `url` (`prepare=False` behind a
    transaction pooler: no statement is prepared on the server)."""
    app = _registered_app()
    connector = procrastinate.PsycopgConnector(conninfo=libpq_url(url),
                                               kwargs={} if prepare else {"prepare_threshold": None})
    app.connector = connector
    app.job_manager.connector = connector
    return app


class DirectConnectionRequired(ValueError):
    """`tenet worker` behind a transaction pooler without a direct URL for what needs a session."""


def job_queue_url(settings: KernelSettings, url: str) -> str:
    """Where procrastinate connects: the direct URL when one is set; through PgBouncer (transaction mode) there
    is no other choice than refusing, since the worker's LISTEN would silently stop hearing new jobs."""
    if settings.database_direct_url:
        return settings.database_direct_url
    if settings.database_pgbouncer:
        raise DirectConnectionRequired(
            "invalid setting TENET_DATABASE_DIRECT_URL: tenet worker behind PgBouncer (TENET_DATABASE_PGBOUNCER) "
            "needs a direct connection to the primary for LISTEN and its job locks; set it to the primary's own URL")
    return url


async def run_worker(settings: KernelSettings, url: str, *, concurrency: int = 4, wait: bool = True,
                     clock: Clock | None = None) -> None:
    # The jobs' units of work may go through PgBouncer (`url`); procrastinate's connector may not: its worker
    # LISTENs on one connection for as long as it runs, which a transaction pooler cannot give it (the server
    # connection that ran LISTEN serves other clients between transactions, and notifications are lost). It
    # takes the direct URL (TENET_DATABASE_DIRECT_URL), as do the session-level job locks (Database).
    db = Database.from_settings(settings, url, pool_size=max(2, concurrency), max_overflow=2,
                                application_name="tenet-worker")
    runtime = JobRuntime(db=db, clock=clock or SystemClock(), settings=settings)
    app = build_job_app(job_queue_url(settings, url), prepare=settings.server_side_prepare)
    options: dict[str, Any] = {
        "concurrency": concurrency, "wait": wait, "install_signal_handlers": False,
        "additional_context": runtime_context(runtime),
        "update_heartbeat_interval": settings.worker_heartbeat_seconds,
        "stalled_worker_timeout": settings.stalled_worker_seconds,
    }
    try:
        # No dispatcher here: mail that jobs write waits for the periodic delivery job.
        with install_delivery(settings.mail()):
            async with app.open_async():
                log.info("worker started", extra={"concurrency": concurrency, "tasks": sorted(app.tasks)})
                recovery = asyncio.create_task(_recover_stalled_jobs_periodically(app, runtime),
                                               name="recover-stalled-jobs")
                try:
                    if wait:
                        await _run_until_stopped(app, options)
                    else:
                        await app.run_worker_async(**options)
                finally:
                    recovery.cancel()
                    await asyncio.gather(recovery, return_exceptions=True)
    finally:
        await db.dispose()
        log.info("worker stopped")


async def _run_until_stopped(app: procrastinate.App, options: dict[str, Any]) -> None:
    """procrastinate's worker until SIGTERM/SIGINT (running jobs finish first).

    procrastinate stops its worker when a side task (the heartbeat, the listener) loses the database; a
    `tenet worker` that then exited (status 0: no supervisor would restart it) left every job unrun until an
    operator noticed. The worker is started again instead, with a growing pause while the database is away.
    """
    stopping = asyncio.Event()
    pause = RESTART_PAUSE
    with _stop_on_signal(stopping):
        while True:
            started = time.monotonic()
            run = asyncio.create_task(app.run_worker_async(**options), name="procrastinate-worker")
            asked = asyncio.create_task(stopping.wait())
            await asyncio.wait({run, asked}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.is_set():
                run.cancel()  # procrastinate's graceful stop: no new job, the running ones finish
                await asyncio.gather(run, return_exceptions=True)
                return
            asked.cancel()
            failure = run.exception()
            if time.monotonic() - started > 60:
                pause = RESTART_PAUSE
            log.warning("the job worker stopped without being asked (%s); starting it again in %.0f s",
                        "the database went away" if failure is None else type(failure).__name__, pause)
            with suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), pause)
                return
            pause = min(pause * 2, MAX_RESTART_PAUSE)


@contextmanager
def _stop_on_signal(stopping: asyncio.Event) -> Iterator[None]:
    """The first SIGTERM/SIGINT asks for a graceful stop; then the handlers that were there come back, so a
    second signal interrupts the wait (`tenet worker` turns it into StopRequested)."""
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def first_signal() -> None:
        restore()
        stopping.set()

    for sig in previous:
        loop.add_signal_handler(sig, first_signal)
    try:
        yield
    finally:
        if not stopping.is_set():
            restore()


async def _recover_stalled_jobs_periodically(app: procrastinate.App, runtime: JobRuntime) -> None:
    """Every heartbeat interval, give the jobs of dead workers back to the queue (tenet.kernel.jobs)."""
    settings = runtime.settings
    while True:
        await asyncio.sleep(settings.worker_heartbeat_seconds)
        try:
            await recover_stalled_jobs(app.job_manager, runtime.db, stalled_after=settings.stalled_worker_seconds,
                                       now=runtime.clock.now())
        except Exception as exc:  # the database is down, most likely: the next pass tries again
            log.warning("stalled-job recovery failed this time (%s)", type(exc).__name__)
