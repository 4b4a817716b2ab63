"""Automations (SOC-INV-19..21): slots in the owner's zone across DST, the misfire policy, runs executed once,
retries with backoff, the three job types, and the HTTP routes."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from sqlalchemy import text
from tests.support.invariants import rules_hold
from tests.support.outcomes import code

from tenet.kernel.jobs import run_now
from tenet.social import automations, tasks

LA = "America/Los_Angeles"


def _utc(text_value: str) -> datetime:
    return datetime.fromisoformat(text_value.replace("Z", "+00:00"))


class TestSlots:
    @pytest.mark.invariant("SOC-INV-19")
    @pytest.mark.parametrize("after, at, expected", [
        ("2026-03-07T11:00:00Z", time(2, 30), "2026-03-08T10:30:00Z"),  # 02:30 does not exist: 03:30 PDT
        ("2026-03-08T11:00:00Z", time(2, 30), "2026-03-09T09:30:00Z"),
        ("2026-10-31T09:00:00Z", time(1, 30), "2026-11-01T08:30:00Z"),  # 01:30 twice: the first one
        ("2026-11-01T08:30:00Z", time(1, 30), "2026-11-02T09:30:00Z"),  # ... and only once
    ])
    def test_daily_slots_across_dst_run_once_per_local_day(self, after, at, expected):
        assert automations.next_slot(_utc(after), schedule_type="daily", schedule_time=at, weekday=None,
                                     zone=LA) == _utc(expected)

    def test_weekly_slot_on_its_weekday(self):
        slot = automations.next_slot(_utc("2026-03-04T00:00:00Z"), schedule_type="weekly", schedule_time=time(9),
                                     weekday=1, zone="Europe/Berlin")
        assert slot == _utc("2026-03-09T08:00:00Z")
        after_change = automations.next_slot(slot, schedule_type="weekly", schedule_time=time(9), weekday=1,
                                             zone="Europe/Berlin")
        assert after_change == _utc("2026-03-16T08:00:00Z")
        assert automations.next_slot(_utc("2026-03-24T00:00:00Z"), schedule_type="weekly", schedule_time=time(9),
                                     weekday=1, zone="Europe/Berlin") == _utc("2026-03-30T07:00:00Z")


async def _job(api, user, **fields):
    body = {"name": "Digest", "job_type": "todo_digest", "schedule_type": "daily", "schedule_time": "09:00",
            "params": {"skip_if_empty": False}, **fields}
    return await api.ok(api.post(user, "/automations", body), 201)


async def _tick(job_runtime):
    return await run_now(tasks.social_automation_scheduler, job_runtime, timestamp=0)


async def _runs(db, job_id):
    async with db.read_only() as session:
        return [dict(r._mapping) for r in await session.execute(text(
            "SELECT scheduled_at, status, attempt, missed_slots, error_code FROM social.automation_runs "
            "WHERE job_id = :j ORDER BY scheduled_at"), {"j": job_id})]


class TestScheduling:
    @pytest.mark.invariant("SOC-INV-19", "SOC-INV-20", "SOC-INV-21")
    async def test_a_due_slot_runs_once_and_writes_one_digest(self, api, ann, clock, db, job_runtime):
        await api.ok(api.post(ann, "/todos", {"title": "Pay rent", "due_at": "2026-01-05T20:00:00Z"}), 201)
        job = await _job(api, ann)
        assert job["timezone"] == LA and job["next_run_at"] == "2026-01-05T17:00:00Z"
        clock.advance(timedelta(hours=8, minutes=1))  # 17:01Z = 09:01 LA
        result = await _tick(job_runtime)
        assert result["runs"] == {"succeeded": 1}
        await _tick(job_runtime)  # nothing due any more
        runs = await _runs(db, job["id"])
        assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]
        digests = (await api.ok(api.get(ann, "/inbox", message_type="todo_digest")))["items"]
        assert len(digests) == 1 and digests[0]["content"]["pending_count"] == 1
        history = await api.ok(api.get(ann, f"/automations/{job['id']}/runs"))
        assert history["items"][0]["status"] == "succeeded" and history["items"][0]["result"]["pending_count"] == 1
        assert (await api.ok(api.get(ann, f"/automations/{job['id']}")))["next_run_at"] == "2026-01-06T17:00:00Z"
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-20")
    async def test_misfire_after_three_days_runs_once_with_the_missed_count(self, api, ann, clock, db, job_runtime):
        job = await _job(api, ann)
        clock.advance(timedelta(days=3, hours=8, minutes=30))  # past three 09:00 slots, the last 30 min ago
        await _tick(job_runtime)
        runs = await _runs(db, job["id"])
        assert [(r["scheduled_at"], r["missed_slots"]) for r in runs] == [(_utc("2026-01-08T17:00:00Z"), 3)]

    async def test_a_reminder_past_its_grace_is_skipped(self, api, ann, clock, db, job_runtime):
        job = await _job(api, ann, job_type="schedule_reminder", params={})
        clock.advance(timedelta(hours=10))  # the 09:00 LA slot passed 2 hours ago; grace is 1 hour
        await _tick(job_runtime)
        assert await _runs(db, job["id"]) == []
        assert (await api.ok(api.get(ann, f"/automations/{job['id']}")))["next_run_at"] == "2026-01-06T17:00:00Z"

    async def test_a_time_zone_change_moves_the_next_run(self, api, ann):
        job = await _job(api, ann)
        await api.ok(api.patch(ann, "/me/settings", {"preferences": {"timezone": "Asia/Shanghai"}}))
        moved = await api.ok(api.get(ann, f"/automations/{job['id']}"))
        assert moved["timezone"] == "Asia/Shanghai" and moved["next_run_at"] == "2026-01-06T01:00:00Z"

    @pytest.mark.invariant("SOC-INV-21")
    async def test_a_failing_run_retries_with_backoff_then_fails_once(self, api, ann, clock, db, job_runtime):
        job = await _job(api, ann)
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        calls = []

        async def broken(session, job_row, claimed, now, zone):
            calls.append(claimed.attempt)
            await session.execute(text(
                "INSERT INTO social.inbox_messages (id, recipient_id, message_type, content, related_type, "
                "related_id, actionable, status, dedup_key, automation_run_id, created_at) VALUES "
                "(gen_random_uuid(), :u, 'todo_digest', '{}', 'automation_job', :j, false, 'pending', 'x', :r, now())"),
                {"u": job_row.owner_id, "j": job_row.id, "r": claimed.run_id})
            raise RuntimeError("smtp down")

        settings = dict(clock=clock, default_timezone=LA, lease_seconds=120, retry_base_seconds=60)
        for _ in range(3):
            await automations.drain(db, effects={"todo_digest": broken}, **settings)
            clock.advance(timedelta(minutes=10))
        runs = await _runs(db, job["id"])
        assert calls == [1, 2, 3]
        assert [(r["status"], r["attempt"], r["error_code"]) for r in runs] == [("failed", 3, "JOB_FAILED")]
        failed = (await api.ok(api.get(ann, "/inbox", message_type="automation_failed")))["items"]
        assert len(failed) == 1
        # The effect written by each failed attempt was rolled back with it.
        assert (await api.ok(api.get(ann, "/inbox", message_type="todo_digest")))["items"] == []
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-21")
    async def test_overlapping_reminder_windows_write_each_reminder_once(self, api, ann, bob, clock, db,
                                                                        job_runtime):
        item = await api.item(ann, start_at="2026-01-05T20:00:00Z", end_at="2026-01-05T21:00:00Z",
                              recurrence_rule="FREQ=DAILY;COUNT=5")
        await api.offer(ann, item["id"], bob)
        job = await _job(api, ann, job_type="schedule_reminder", params={"hours_ahead": 48})
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        await automations.drain(db, clock=clock, default_timezone=LA, lease_seconds=120, retry_base_seconds=60)
        clock.advance(timedelta(minutes=1))
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        await automations.drain(db, clock=clock, default_timezone=LA, lease_seconds=120, retry_base_seconds=60)
        for person in (ann, bob):
            reminders = (await api.ok(api.get(person, "/inbox", message_type="schedule_reminder")))["items"]
            assert sorted(r["content"]["occurrence_start"] for r in reminders) == [
                "2026-01-05T20:00:00+00:00", "2026-01-06T20:00:00+00:00"]
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-20")
    async def test_a_second_manual_run_waits_for_the_first_to_finish(self, api, ann, clock, db):
        job = await _job(api, ann)
        first = await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        clock.advance(timedelta(seconds=5))
        again = await api.post(ann, f"/automations/{job['id']}/run-now")
        assert (again.status_code, code(again)) == (409, "AUTOMATION_RUN_IN_PROGRESS"), again.text
        assert again.json()["run_id"] == first["id"] and again.json()["current_status"] == "queued"
        await automations.drain(db, clock=clock, default_timezone=LA, lease_seconds=120, retry_base_seconds=60)
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)

    async def test_todo_from_schedule_extracts_tomorrow(self, api, ann, clock, db):
        item = await api.item(ann, start_at="2026-01-06T18:00:00Z", end_at="2026-01-06T19:00:00Z",
                              recurrence_rule="FREQ=DAILY")
        job = await _job(api, ann, job_type="todo_from_schedule", params={"priority": "high"})
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        await automations.drain(db, clock=clock, default_timezone=LA, lease_seconds=120, retry_base_seconds=60)
        todos = (await api.ok(api.get(ann, "/todos", status="pending")))["items"]
        assert [(t["source_ids"], t["occurrence_start"], t["priority"]) for t in todos] == [
            ([item["id"]], "2026-01-06T18:00:00Z", "high")]

    @pytest.mark.invariant("SOC-INV-19")
    @pytest.mark.parametrize("fields", [
        {"job_type": "mine_bitcoin"}, {"schedule_type": "weekly"}, {"schedule_time": "09:00:30"},
        {"params": {"unknown": 1}}, {"params": {"horizon_days": 99}}, {"schedule_weekday": 3},
    ])
    async def test_invalid_automations_are_422(self, api, ann, fields):
        body = {"name": "x", "job_type": "todo_digest", "schedule_type": "daily", "schedule_time": "09:00", **fields}
        response = await api.post(ann, "/automations", body)
        assert response.status_code == 422, response.text
        assert code(response) in ("AUTOMATION_INVALID", "VALIDATION_FAILED")

    async def test_disable_enable_and_other_peoples_jobs(self, api, ann, bob, clock):
        job = await _job(api, ann)
        disabled = await api.ok(api.post(ann, f"/automations/{job['id']}/disable"))
        assert disabled["status"] == "disabled" and disabled["next_run_at"] is None
        assert code(await api.post(ann, f"/automations/{job['id']}/disable")) == "AUTOMATION_STATE_CONFLICT"
        clock.advance(timedelta(days=2))
        enabled = await api.ok(api.post(ann, f"/automations/{job['id']}/enable"))
        assert enabled["next_run_at"] == "2026-01-07T17:00:00Z"
        assert (await api.get(bob, f"/automations/{job['id']}")).status_code == 404
        assert (await api.post(bob, f"/automations/{job['id']}/run-now")).status_code == 404
        assert (await api.get(bob, f"/automations/{job['id']}/runs")).status_code == 404
        listed = await api.ok(api.get(ann, "/automations", status="active"))
        assert [j["id"] for j in listed["items"]] == [job["id"]]
        assert (await api.ok(api.get(bob, "/automations")))["items"] == []
        types = await api.ok(api.get(ann, "/automation-job-types"))
        assert {t["job_type"] for t in types} == {"todo_digest", "schedule_reminder", "todo_from_schedule"}


@pytest.mark.invariant("SOC-INV-23")
async def test_social_audit_rows_name_ids_only_and_the_detector_sees_a_title(api, ann, bob, db):
    from tenet.kernel.invariants import check, get

    await api.befriend(ann, bob)
    await api.group(ann, "Secret project name")
    async with db.unit_of_work() as session:
        assert await check(await session.connection(), [get("SOC-INV-23")]) == []
        await session.execute(text(
            "INSERT INTO kernel.audit_log (occurred_at, action, actor_type, actor_id, subject_type, subject_id, data) "
            "VALUES (now(), 'social.group.created', 'user', :u, 'group', :u, '{\"title\": \"Secret\"}')"),
            {"u": str(ann.id)})
        assert len((await check(await session.connection(), [get("SOC-INV-23")]))[0].sample) == 1
        await session.rollback()


def test_slot_instants_are_utc():
    slot = automations.next_slot(datetime(2026, 1, 1, tzinfo=UTC), schedule_type="daily", schedule_time=time(0),
                                 weekday=None, zone="UTC")
    assert slot == datetime(2026, 1, 2, tzinfo=UTC)


class TestRunNowStartsAtOnce:
    """`run-now` used to queue a run for the next minute's drain. It now defers a job of its own in the request's
    transaction: the job exists once the request has committed, and a worker that takes only that queue (no
    periodic tick, the clock never moves) runs it."""

    @pytest.mark.invariant("SOC-INV-20")
    async def test_a_run_now_is_a_job_its_worker_runs_without_a_tick(self, committed_db, settings, clock,
                                                                      database_url):
        import httpx
        from tests.social.conftest import SocialApi
        from tests.support.users import UserFactory

        from tenet.app import create_app
        from tenet.kernel.jobs import JobRuntime, runtime_context
        from tenet.social.automations.runs import RUN_NOW_QUEUE
        from tenet.worker import build_job_app

        app = create_app(settings, database=committed_db, clock=clock, run_background_tasks=False)
        ann = await UserFactory(app, committed_db, clock).make(display_name="Ann")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
            api = SocialApi(client, app, clock)
            await api.ok(api.post(ann, "/todos", {"title": "Pay rent", "due_at": "2026-01-05T20:00:00Z"}), 201)
            job = await _job(api, ann)
            run = await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        async with committed_db.read_only() as session:
            deferred = [tuple(row) for row in await session.execute(text(
                "SELECT task_name, status::text, args FROM procrastinate_jobs WHERE queue_name = :q"),
                {"q": RUN_NOW_QUEUE})]
        assert deferred == [("social:social_automation_run_now", "todo", {"run_id": run["id"]})]
        job_app = build_job_app(database_url)
        runtime = JobRuntime(db=committed_db, clock=clock, settings=settings)
        async with job_app.open_async():
            await job_app.run_worker_async(queues=[RUN_NOW_QUEUE], wait=False, install_signal_handlers=False,
                                           additional_context=runtime_context(runtime))
        assert [(r["status"], r["attempt"]) for r in await _runs(committed_db, job["id"])] == [("succeeded", 1)]
        async with committed_db.read_only() as session:
            done = (await session.execute(text(
                "SELECT status::text FROM procrastinate_jobs WHERE queue_name = :q"), {"q": RUN_NOW_QUEUE})).all()
        assert done == [("succeeded",)]
