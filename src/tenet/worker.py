"""`tenet worker`: procrastinate workers on the service's own database, running every domain's jobs."""

from __future__ import annotations

import logging
from functools import cache

import procrastinate

from tenet.db.database import Database, libpq_url
from tenet.domains import load_all
from tenet.kernel.clock import Clock, SystemClock
from tenet.kernel.jobs import JobRuntime, runtime_context
from tenet.kernel.outbox import install_delivery
from tenet.kernel.settings import KernelSettings

log = logging.getLogger(__name__)


def blueprints() -> dict[str, procrastinate.Blueprint]:
    """Each domain's blueprint under its name (task names become `<domain>:<job>`; job names are unique
    across domains, which the `job` decorator checks)."""
    return {domain.name: domain.blueprint for domain in load_all() if domain.blueprint is not None}


@cache
def _registered_app() -> procrastinate.App:
    # procrastinate renames a blueprint's tasks when it registers them, so they are registered once per
    # process; the app is then pointed at the database this process uses.
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=""))
    for namespace, blueprint in blueprints().items():
        app.add_tasks_from(blueprint, namespace=namespace)
    return app


def build_job_app(url: str) -> procrastinate.App:
    """The process's job app (every domain's tasks) on the database at `url`."""
    app = _registered_app()
    connector = procrastinate.PsycopgConnector(conninfo=libpq_url(url))
    app.connector = connector
    app.job_manager.connector = connector
    return app


async def run_worker(settings: KernelSettings, url: str, *, concurrency: int = 4, wait: bool = True,
                     clock: Clock | None = None) -> None:
    db = Database.from_url(url, pool_size=max(2, concurrency), max_overflow=2, application_name="tenet-worker")
    runtime = JobRuntime(db=db, clock=clock or SystemClock(), settings=settings)
    app = build_job_app(url)
    try:
        # No dispatcher here: mail that jobs write waits for the periodic delivery job.
        with install_delivery(settings.mail()):
            async with app.open_async():
                log.info("worker started", extra={"concurrency": concurrency, "tasks": sorted(app.tasks)})
                await app.run_worker_async(concurrency=concurrency, wait=wait, install_signal_handlers=wait,
                                           additional_context=runtime_context(runtime))
    finally:
        await db.dispose()
        log.info("worker stopped")
