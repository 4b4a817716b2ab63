"""Reservation races on real parallel connections (committed data): exactly one winner, a stable answer for
the others, every RSV rule holding afterwards.

Where the race is decided between a read and a write, the tests widen that window with a short injected
delay, so without the serialisation both sides would read before either writes; the `*_without_*` tests run
the same timing with the lock made a no-op and show the rule breaking.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tenet.iam.permissions import Scope
from tenet.reservations import ingest, queries, service
from tests.reservations.conftest import (
    ReservationApi,
    body,
    confirmable,
    item,
    make_client,
)
from tests.support.invariants import rules_hold
from tests.support.rows import scalar

WINDOW = 0.3


@pytest.fixture
async def api(committed_app, clock):
    """The routes on the committed database (tests/concurrency/conftest.py's `committed_app`, `people`)."""
    transport = httpx.ASGITransport(app=committed_app, client=("203.0.113.9", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield ReservationApi(client, committed_app, clock)


def _slow(monkeypatch, module, name: str) -> None:
    original = getattr(module, name)

    async def slow(*args, **kwargs):
        result = await original(*args, **kwargs)
        await asyncio.sleep(WINDOW)
        return result

    monkeypatch.setattr(module, name, slow)


class TestIngestRaces:
    @pytest.mark.invariant("RSV-INV-02")
    async def test_identical_posts_at_once_make_one_batch(self, api, committed_db, clock, monkeypatch):
        client = await make_client(committed_db, clock, [Scope.RESERVATIONS_INGEST], ["H1"])
        raw = body("H1", [item(cn="R1"), item("new"), item("note")], request_id="same")
        # Every request passes the replay check (nothing stored yet) before any of them inserts.
        _slow(monkeypatch, queries, "batch_by_key")
        answers = await asyncio.gather(*(api.ingest(client, raw) for _ in range(8)))
        assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
        assert len({a.json()["batch_id"] for a in answers}) == 1
        assert [a.json()["replayed"] for a in answers].count(False) == 1
        assert await scalar(committed_db, "SELECT count(*) FROM reservation.workflow_reservation_ai_batch") == 1
        assert await scalar(committed_db, "SELECT count(*) FROM reservation.workflow_reservation_task") == 3
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-02")
    async def test_one_request_id_with_two_bodies_at_once(self, api, committed_db, clock, monkeypatch):
        client = await make_client(committed_db, clock, [Scope.RESERVATIONS_INGEST], ["H1"])
        _slow(monkeypatch, queries, "batch_by_key")
        answers = await asyncio.gather(api.ingest(client, body("H1", [item(cn="A")], request_id="r")),
                                       api.ingest(client, body("H1", [item(cn="B")], request_id="r")))
        assert sorted((a.status_code, a.json().get("code")) for a in answers) == [
            (201, None), (409, "AI_BATCH_REQUEST_ID_REUSED")]
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-07")
    async def test_two_batches_creating_the_same_key_share_one_active_order(self, api, committed_db, clock,
                                                                          monkeypatch):
        client = await make_client(committed_db, clock, [Scope.RESERVATIONS_INGEST], ["H1"])
        # Both batches look for an ACTIVE order of the key before either creates it.
        _slow(monkeypatch, ingest, "_active_orders")
        answers = await asyncio.gather(api.ingest(client, body("H1", [item(cn="K42")], message=1)),
                                       api.ingest(client, body("H1", [item("cancel", cn="k 42")], message=2)))
        assert [a.status_code for a in answers] == [201, 201]
        orders = {a.json()["items"][0]["order_id"] for a in answers}
        assert len(orders) == 1
        assert await scalar(committed_db, "SELECT count(*) FROM reservation.workflow_reservation_order") == 1
        positions = sorted(a.json()["items"][0]["execution_order"] for a in answers)
        assert positions == [1, 2]
        await rules_hold(committed_db, "RSV-")


async def _world(committed_db, people, clock):
    from tests.reservations.conftest import make_world

    return await make_world(committed_db, people, clock)


async def _ingested(api, world, *items: str) -> list[dict]:
    return (await api.ingest_ok(world.ingest1, body("H1", list(items))))["items"]


def _codes(responses) -> list[tuple[int, str | None]]:
    return sorted((r.status_code, r.json().get("code")) for r in responses)


class TestTaskRaces:
    @pytest.mark.invariant("RSV-INV-12")
    async def test_two_confirms_of_one_task_have_one_winner(self, api, committed_db, people, clock, monkeypatch):
        world = await _world(committed_db, people, clock)
        (result,) = await _ingested(api, world, item(cn="RC1"))
        task = await api.task(world.agent, result["task_id"])
        _slow(monkeypatch, service, "load_task")  # both read PENDING_CONFIRM at version 1 before either writes
        payload = {"payload": confirmable(task)}
        answers = await asyncio.gather(*(api.post(world.agent, f"/tasks/{task['id']}/confirm", payload, version=1)
                                         for _ in range(2)))
        assert _codes(answers) in ([(200, None), (409, "TASK_NOT_EDITABLE")],
                                   [(200, None), (412, "PRECONDITION_FAILED")])
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-17")
    async def test_confirm_against_move_one_wins_the_other_sees_a_newer_version(self, api, committed_db, people,
                                                                              clock, monkeypatch):
        world = await _world(committed_db, people, clock)
        first, other = await _ingested(api, world, item(cn="RM1"), item(cn="RM2"))
        task = await api.task(world.agent, first["task_id"])
        _slow(monkeypatch, service, "load_task")
        answers = await asyncio.gather(
            api.post(world.agent, f"/tasks/{task['id']}/confirm", {"payload": confirmable(task)}, version=1),
            api.post(world.agent, f"/tasks/{task['id']}/move", {"order_id": other["order_id"]}, version=1))
        statuses = sorted(a.status_code for a in answers)
        assert statuses[0] == 200 and statuses[1] in (409, 412), [a.text for a in answers]
        final = await api.task(world.agent, task["id"])
        assert (final["task_status"] == "READY") != (final["order_id"] == other["order_id"])
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-14")
    async def test_two_executes_of_one_task_run_the_operations_once(self, api, committed_db, people, clock,
                                                                    monkeypatch):
        world = await _world(committed_db, people, clock)
        (result,) = await _ingested(api, world, item(cn="RE1"))
        await api.confirm_ok(world.agent, result["task_id"])
        _slow(monkeypatch, service, "load_task")
        answers = await asyncio.gather(*(api.execute(world.agent, result["task_id"]) for _ in range(2)))
        assert _codes(answers) == [(200, None), (409, "TASK_NOT_READY")]
        attempts = "SELECT count(*) FROM reservation.workflow_reservation_opera_operation_attempt"
        assert await scalar(committed_db, attempts) == 2
        assert await scalar(committed_db, "SELECT count(*) FROM reservation.opera_simulator_write") == 1
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-15")
    async def test_two_retries_naming_the_same_attempt_count_add_one_attempt(self, api, committed_db, people, clock,
                                                                             monkeypatch):
        world = await _world(committed_db, people, clock)
        (result,) = await _ingested(api, world, item(cn="RR1"))
        task = await api.task(world.agent, result["task_id"])
        await api.post(world.agent, f"/tasks/{task['id']}/confirm",
                       {"payload": confirmable(task, opera_simulation_outcome="FAIL_WRITE_ALWAYS")}, version=1)
        write = (await api.execute(world.agent, task["id"])).json()["operations"][1]
        _slow(monkeypatch, service, "load_task")
        answers = await asyncio.gather(*(api.post(world.agent, f"/operations/{write['id']}/retry", version=1)
                                         for _ in range(2)))
        assert _codes(answers) == [(200, None), (412, "PRECONDITION_FAILED")]
        assert await scalar(committed_db, "SELECT attempt_count FROM reservation.workflow_reservation_opera_operation "
                             "WHERE id = :id", id=int(write["id"])) == 2
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-09")
    async def test_end_against_an_ingest_into_the_order(self, api, committed_db, people, clock, monkeypatch):
        world = await _world(committed_db, people, clock)
        (result,) = await _ingested(api, world, item(cn="RX1"))
        await api.post(world.agent, f"/tasks/{result['task_id']}/abandon", {"reason": "x"}, version=1)
        _slow(monkeypatch, ingest, "_active_orders")  # the ingest matches the order, then waits
        answers = await asyncio.gather(
            api.ingest(world.ingest1, body("H1", [item("cancel", cn="RX1")])),
            api.post(world.agent, f"/orders/{result['order_id']}/end", {}))
        assert [a.status_code for a in answers] == [201, 200] or answers[1].status_code == 409
        landed = answers[0].json()["items"][0]
        order = await api.order(world.agent, result["order_id"])
        if order["order_status"] == "ENDED":
            assert landed["order_id"] != result["order_id"]  # it went elsewhere; the ended order took nothing
        else:
            assert landed["order_id"] == result["order_id"]
            assert answers[1].json()["code"] == "ORDER_HAS_UNFINISHED_TASKS"
        await rules_hold(committed_db, "RSV-")


class TestBackfillNeverWaitsOutOfOrder:
    """The back-fill needs a second order after the first is locked; it never waits for it, so it cannot
    deadlock with an ingest or a move holding that order: busy -> 409 ORDER_BUSY, nothing recorded, retry."""

    async def _new_booking_for(self, api, world, key: str) -> dict:
        (result,) = await _ingested(api, world, item("new"))
        task = await api.task(world.agent, result["task_id"])
        await api.confirm_ok(world.agent, task["id"], confirmable(task, confirmation_number=key))
        return result

    @pytest.mark.invariant("RSV-INV-19")
    async def test_a_held_target_order_refuses_the_merge_and_a_retry_completes_it(self, api, committed_db, people,
                                                                                  clock):
        world = await _world(committed_db, people, clock)
        (existing,) = await _ingested(api, world, item(cn="BF1"))
        new = await self._new_booking_for(api, world, "BF1")
        async with committed_db.unit_of_work() as holder:
            await holder.execute(text("SELECT 1 FROM reservation.workflow_reservation_order WHERE id = :id FOR UPDATE"),
                                 {"id": int(existing["order_id"])})
            busy = await api.execute(world.agent, new["task_id"])
            assert (busy.status_code, busy.json()["code"], busy.headers["retry-after"]) == (409, "ORDER_BUSY", "1")
        task = await api.task(world.agent, new["task_id"])
        assert (task["task_status"], task["operations_summary"]["total"]) == ("READY", 0)  # nothing recorded
        done = await api.execute(world.agent, new["task_id"])
        assert done.status_code == 200 and done.json()["task"]["task_status"] == "COMPLETED"
        assert (await api.order(world.agent, new["order_id"]))["merged_into_order_id"] == existing["order_id"]
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-19")
    async def test_a_key_being_created_elsewhere_is_not_waited_for(self, api, committed_db, people, clock):
        world = await _world(committed_db, people, clock)
        new = await self._new_booking_for(api, world, "BF2")
        async with committed_db.unit_of_work() as creator:
            # An uncommitted ACTIVE order for the same key (an ingest in flight).
            await creator.execute(text(
                "INSERT INTO reservation.workflow_reservation_order (hotel_id, order_key_type, order_business_key, "
                "order_status, business_key_source, created_at, updated_at) VALUES ('H1', 'CONFIRMATION_NUMBER', "
                "'BF2', 'ACTIVE', 'AI_CANDIDATE', now(), now())"))
            busy = await asyncio.wait_for(api.execute(world.agent, new["task_id"]), timeout=10)
            assert (busy.status_code, busy.json()["code"]) == (409, "ORDER_BUSY")
            await creator.rollback()
        done = await api.execute(world.agent, new["task_id"])
        order = await api.order(world.agent, new["order_id"])
        assert done.json()["task"]["task_status"] == "COMPLETED"
        assert (order["order_status"], order["order_business_key"]) == ("ACTIVE", "BF2")
        await rules_hold(committed_db, "RSV-")


class TestMoveAgainstClosingTheTarget:
    """The order row lock is what turns "a task moved into an order being closed" into a stable answer: with
    it, either the move lands first (and the close is refused) or the close does (and the move is refused);
    without it, the move acts on a stale read and the database itself refuses the task (RSV-INV-09's
    trigger): the rule holds either way, but the client would get a 500."""

    async def _setup(self, api, committed_db, people, clock) -> tuple[Any, dict, dict]:
        world = await _world(committed_db, people, clock)
        target, misfiled = await _ingested(api, world, item(cn="MT1"), item("review"))
        await api.post(world.agent, f"/tasks/{target['task_id']}/abandon", {"reason": "done"}, version=1)
        return world, target, misfiled

    async def _race(self, committed_db, world, target: dict, misfiled: dict, clock) -> list[str]:
        from tenet.iam.principal import Principal
        from tenet.kernel.errors import DomainError
        from tenet.kernel.http import ExpectedVersion
        from tenet.reservations.permissions import POINTS

        principal = Principal(kind="user", id=world.admin.id, permissions=frozenset(p.name for p in POINTS))

        async def move() -> str:
            try:
                async with committed_db.unit_of_work() as session:
                    await service.move_task(session, task_id=int(misfiled["task_id"]),
                                            target_order_id=int(target["order_id"]),
                                            want=ExpectedVersion(1, True), principal=principal, now=clock.now())
            except DomainError as exc:
                return str(exc.code)
            except Exception as exc:  # the database refused what a stale read let through
                return type(exc).__name__
            return "moved"

        async def close() -> str:
            await asyncio.sleep(WINDOW / 3)  # the move reads the target first
            try:
                async with committed_db.unit_of_work() as session:
                    await service.close_order(session, order_id=int(target["order_id"]), to="LOGIC_DELETED",
                                              reason="duplicate", want=None, principal=principal, now=clock.now())
            except DomainError as exc:
                return str(exc.code)
            return "closed"

        return list(await asyncio.gather(move(), close()))

    @pytest.mark.invariant("RSV-INV-18")
    async def test_with_the_lock_one_side_wins_with_a_stable_answer(self, api, committed_db, people, clock,
                                                                   monkeypatch):
        world, target, misfiled = await self._setup(api, committed_db, people, clock)
        _slow(monkeypatch, service, "load_task")
        outcome = await self._race(committed_db, world, target, misfiled, clock)
        assert outcome in (["moved", "ORDER_HAS_UNFINISHED_TASKS"], ["ORDER_NOT_ACCEPTING_TASKS", "closed"])
        await rules_hold(committed_db, "RSV-")

    @pytest.mark.invariant("RSV-INV-09")
    async def test_without_the_lock_the_database_has_to_refuse_it(self, api, committed_db, people, clock,
                                                                  monkeypatch):
        world, target, misfiled = await self._setup(api, committed_db, people, clock)

        async def read_without_locking(session, hotel_id, order_ids):
            from sqlalchemy import select

            from tenet.reservations.models import Order

            rows = (await session.scalars(select(Order).where(Order.hotel_id == hotel_id, Order.id.in_(order_ids))
                                          .execution_options(populate_existing=True))).all()
            return {row.id: row for row in rows}

        monkeypatch.setattr(service, "lock_orders", read_without_locking)
        _slow(monkeypatch, service, "load_task")
        outcome = await self._race(committed_db, world, target, misfiled, clock)
        assert outcome == ["IntegrityError", "closed"]
        await rules_hold(committed_db, "RSV-")  # the trigger kept the rule; only the answer was lost
