"""`tenet worker`: procrastinate workers on the service's own database."""

from __future__ import annotations

import logging

import procrastinate

from tenet.db.database import Database, libpq_url
from tenet.kernel import tasks as kernel_tasks
from tenet.kernel.clock import Clock, SystemClock
from tenet.kernel.jobs import JobRuntime, install_runtime
from tenet.kernel.outbox import install_delivery
from tenet.settings import Settings
from tenet.workspaces import tasks as workspace_tasks

log = logging.getLogger(__name__)

BLUEPRINTS: dict[str, procrastinate.Blueprint] = {
    "kernel": kernel_tasks.blueprint,
    "workspace": workspace_tasks.blueprint,
}


def build_job_app(url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=libpq_url(url)))
    for namespace, blueprint in BLUEPRINTS.items():
        app.add_tasks_from(blueprint, namespace=namespace)
    return app


async def run_worker(settings: Settings, url: str, *, concurrency: int = 4, wait: bool = True,
                     clock: Clock | None = None) -> None:
    db = Database.from_url(url, pool_size=max(2, concurrency), max_overflow=2, application_name="tenet-worker")
    install_runtime(JobRuntime(settings=settings, db=db, clock=clock or SystemClock()))
    app = build_job_app(url)
    try:
        # No dispatcher here: mail that jobs write waits for the periodic delivery job.
        with install_delivery(settings.mail()):
            async with app.open_async():
                log.info("worker started", extra={"concurrency": concurrency, "tasks": sorted(app.tasks)})
                await app.run_worker_async(concurrency=concurrency, wait=wait, install_signal_handlers=wait)
    finally:
        install_runtime(None)
        await db.dispose()
        log.info("worker stopped")
