"""What the kernel gives every domain (issue 7): domain events in the unit of work, jobs that own their unit of
work (history, per-key locks, the runtime through procrastinate's context), and detectors fit for big tables
(one snapshot, a timeout each, counts and samples, selectable by domain)."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

import procrastinate
import pytest
from sqlalchemy import text

from tenet.domains import DOMAINS, load_all
from tenet.iam.events import AccountDeleted
from tenet.kernel import events
from tenet.kernel.errors import Conflict
from tenet.kernel.invariants import Invariant, all_invariants, check
from tenet.kernel.jobs import JobRuntime, JobScope, job, run_now, runtime_context
from tenet.worker import build_job_app

# --- events -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pinged(events.Event):
    value: int


class TestEvents:
    async def test_handlers_run_in_the_publishers_unit_of_work_in_registration_order(self, db):
        bus, seen = events.EventBus(), []

        async def first(session, event):
            seen.append(("first", event.value))
            await session.execute(text("CREATE TEMP TABLE pinged (v int) ON COMMIT DROP"))

        async def second(session, event):
            seen.append(("second", event.value))
            await session.execute(text("INSERT INTO pinged VALUES (:v)"), {"v": event.value})

        bus.subscribe(Pinged, first)
        bus.subscribe(Pinged, second)
        bus.subscribe(Pinged, second)  # subscribing twice is once
        bus.mark_loaded()
        async with db.unit_of_work() as session:
            await bus.publish(session, Pinged(7))
            assert (await session.execute(text("SELECT v FROM pinged"))).scalar_one() == 7
        assert seen == [("first", 7), ("second", 7)]

    async def test_a_handler_refusing_rolls_the_whole_command_back(self, db):
        bus = events.EventBus()

        async def refuse(session, event):
            raise Conflict("no")

        bus.subscribe(Pinged, refuse)
        bus.mark_loaded()
        with pytest.raises(Conflict):
            async with db.unit_of_work() as session:
                await session.execute(text("CREATE TABLE kernel.pinged_once (v int)"))
                await bus.publish(session, Pinged(1))
        async with db.read_only() as session:
            exists = (await session.execute(text("SELECT to_regclass('kernel.pinged_once')"))).scalar()
        assert exists is None

    async def test_publishing_before_the_domains_are_loaded_fails_loudly(self, db):
        async with db.unit_of_work() as session:
            with pytest.raises(RuntimeError, match="before the domains were loaded"):
                await events.EventBus().publish(session, Pinged(1))

    def test_the_registry_wires_account_deletion_to_workspaces_in_lock_order(self):
        load_all()
        owners = [handler.__module__.split(".")[1] for handler in events.BUS.handlers(AccountDeleted)]
        order = [domain.name for domain in DOMAINS]
        assert "workspaces" in owners and owners == sorted(owners, key=order.index)
        assert order[:3] == ["kernel", "iam", "workspaces"]


# --- jobs ---------------------------------------------------------------------------------------------

blueprint = procrastinate.Blueprint()


@job(blueprint, name="test_write", history=True)
async def write_row(scope: JobScope, value: int) -> dict[str, int]:
    await scope.uow.execute(text("INSERT INTO kernel.job_test_rows VALUES (:v)"), {"v": value})
    if value < 0:
        raise ValueError("negative values are refused")
    return {"written": value}


@job(blueprint, name="test_locked", lock=lambda kwargs: f"test:{kwargs['key']}")
async def locked(scope: JobScope, key: str, log: list) -> None:
    log.append(("start", key))
    await asyncio.sleep(0.2)
    log.append(("end", key))


@pytest.fixture
async def job_rows(db):
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE TABLE kernel.job_test_rows (v int)"))


class TestJobs:
    async def test_a_job_commits_its_unit_of_work_and_records_its_run(self, db, job_runtime, job_rows):
        assert await run_now(write_row, job_runtime, value=5) == {"written": 5}
        async with db.read_only() as session:
            rows = (await session.execute(text("SELECT v FROM kernel.job_test_rows"))).scalars().all()
            run = (await session.execute(text(
                "SELECT job_name, status, result, error, finished_at IS NOT NULL AS finished "
                "FROM kernel.job_run"))).one()
        assert rows == [5]
        assert tuple(run) == ("test_write", "succeeded", {"written": 5}, None, True)

    async def test_a_failing_job_rolls_back_and_records_the_error(self, db, job_runtime, job_rows):
        with pytest.raises(ValueError):
            await run_now(write_row, job_runtime, value=-1)
        async with db.read_only() as session:
            rows = (await session.execute(text("SELECT count(*) FROM kernel.job_test_rows"))).scalar_one()
            run = (await session.execute(text("SELECT status, error FROM kernel.job_run"))).one()
        assert rows == 0
        assert run.status == "failed" and "negative values are refused" in run.error

    async def test_jobs_with_the_same_key_never_overlap(self, committed_db, clock, settings):
        runtime = JobRuntime(db=committed_db, clock=clock, settings=settings)
        log: list = []
        await asyncio.gather(run_now(locked, runtime, key="a", log=log), run_now(locked, runtime, key="a", log=log),
                             run_now(locked, runtime, key="b", log=log))
        a_events = [kind for kind, key in log if key == "a"]
        assert a_events == ["start", "end", "start", "end"]
        # b did not wait for a: it started before the first a ended.
        assert log.index(("start", "b")) < log.index(("end", "a"))

    async def test_the_worker_hands_jobs_their_runtime_and_declares_periodic_jobs(self, job_runtime):
        app = build_job_app("postgresql://tenet@localhost/unused")
        assert {"kernel:deliver_outbox", "kernel:purge_expired", "workspaces:expire_invitations"} <= set(app.tasks)
        periodic = {name for name, _ in app.periodic_registry.periodic_tasks}
        assert {"kernel:purge_expired", "workspaces:finish_workspace_deletions"} <= periodic
        assert runtime_context(job_runtime) == {"tenet.runtime": job_runtime}

    async def test_a_job_outside_the_worker_has_no_runtime(self):
        context = SimpleNamespace(additional_context={}, job=None)  # what procrastinate passes, minus the runtime
        with pytest.raises(RuntimeError, match="no job runtime"):
            await write_row(context, value=1)


# --- detectors ----------------------------------------------------------------------------------------


def _rule(detector: str, *, domain: str = "test", id: str = "TEST-INV-01") -> Invariant:
    return Invariant(id=id, statement="s", scope="s", counterexample="c", db=(), db_reason="test", app="a",
                     error_code=None, concurrency="c", detector=detector, domain=domain)


class TestDetectors:
    async def test_a_violation_reports_its_count_and_a_sample(self, engine):
        async with engine.connect() as connection:
            violations = await check(connection, [_rule("SELECT g AS n FROM generate_series(1, 12) g")])
        (violation,) = violations
        assert violation.rows == 12 and len(violation.sample) == 5 and violation.sample[0] == {"n": 1}

    async def test_a_slow_detector_times_out_and_the_others_still_run(self, engine):
        slow = _rule("SELECT 1 AS x FROM (SELECT pg_sleep(2)) s", id="TEST-INV-02")
        broken = _rule("SELECT * FROM no_such_table", id="TEST-INV-03")
        holding = _rule("SELECT 1 AS x WHERE false", id="TEST-INV-04")
        failing = _rule("SELECT 1 AS x", id="TEST-INV-05")
        async with engine.connect() as connection:
            violations = await check(connection, [slow, broken, holding, failing], timeout_ms=200)
        by_id = {v.invariant.id: v for v in violations}
        assert by_id["TEST-INV-02"].error == "detector timed out"
        assert by_id["TEST-INV-03"].error and by_id["TEST-INV-03"].rows == 0
        assert "TEST-INV-04" not in by_id and by_id["TEST-INV-05"].rows == 1

    async def test_all_detectors_see_one_snapshot(self, engine, committed_db):
        """A write committed while the check runs is seen by none of its later detectors."""
        async with committed_db.unit_of_work() as session:
            await session.execute(text("CREATE TABLE IF NOT EXISTS kernel.snapshot_probe (v int)"))
        try:
            first = _rule("SELECT v FROM kernel.snapshot_probe", id="TEST-INV-06")
            pause = _rule("SELECT 1 AS x FROM (SELECT pg_sleep(0.5)) s WHERE false", id="TEST-INV-07")
            second = _rule("SELECT v FROM kernel.snapshot_probe", id="TEST-INV-08")

            async def write_meanwhile():
                await asyncio.sleep(0.2)
                async with committed_db.unit_of_work() as session:
                    await session.execute(text("INSERT INTO kernel.snapshot_probe VALUES (1)"))

            async with engine.connect() as connection:
                violations, _ = await asyncio.gather(check(connection, [first, pause, second]), write_meanwhile())
            assert violations == []
        finally:
            async with committed_db.unit_of_work() as session:
                await session.execute(text("DROP TABLE kernel.snapshot_probe"))

    def test_rules_are_selectable_by_domain(self):
        load_all()
        workspaces = all_invariants("workspaces")
        assert workspaces and {i.domain for i in workspaces} == {"workspaces"}
        assert {i.id.split("-")[0] for i in all_invariants("kernel")} == {"KERNEL"}

    async def test_the_cli_checks_one_domain(self, database_url):
        from tests.support.cli import run_cli

        result = run_cli("invariants", "check", "--domain", "workspaces", "--database-url", database_url)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"all {len(all_invariants('workspaces'))} invariants hold" in result.stdout + result.stderr
        unknown = run_cli("invariants", "check", "--domain", "nope", "--database-url", database_url)
        assert unknown.returncode == 2


def test_a_job_name_is_declared_once_across_domains():
    twin = procrastinate.Blueprint()
    with pytest.raises(ValueError, match="deliver_outbox"):
        @job(twin, name="deliver_outbox")
        async def clash(scope: JobScope) -> None: ...
