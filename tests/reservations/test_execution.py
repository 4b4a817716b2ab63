"""Execution against OPERA (the simulator): operations in sequence, every attempt a new row, failures that
leave the task EXECUTING, retries (with the lookup before re-writing), back-fill and merge of new bookings,
and the end of a cancelled booking's order."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.reservations.conftest import body, confirmable, item
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _ready(rsv, world, raw_item: str, outcome: str = "SUCCEED", **payload) -> dict:
    (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [raw_item])))["items"]
    task = await rsv.task(world.agent, result["task_id"])
    await rsv.confirm_ok(world.agent, task["id"], confirmable(task, opera_simulation_outcome=outcome, **payload))
    return result


async def _simulated_writes(db) -> int:
    async with db.read_only() as session:
        return (await session.execute(text("SELECT count(*) FROM reservation.opera_simulator_write"))).scalar_one()


class TestExecute:
    @pytest.mark.invariant("RSV-INV-14")
    async def test_all_operations_succeed_and_the_task_completes(self, rsv, world, db):
        result = await _ready(rsv, world, item(cn="EX1"))
        executed = await rsv.execute(world.agent, result["task_id"])
        assert executed.status_code == 200, executed.text
        answer = executed.json()
        assert answer["task"]["task_status"] == "COMPLETED" and answer["task"]["completed_at"]
        assert [(o["operation_sequence"], o["operation_code"], o["operation_status"], o["attempt_count"])
                for o in answer["operations"]] == [(1, "SIMULATE_PRECHECK", "SUCCEEDED", 1),
                                                   (2, "SIMULATE_WRITE", "SUCCEEDED", 1)]
        assert answer["operations"][1]["external_reference"] == f"tenet-rsv-op-{answer['operations'][1]['id']}"
        assert "Ada" not in executed.text  # operation rows keep a summary, not the guest's data
        again = await rsv.execute(world.agent, result["task_id"])
        assert (again.status_code, code(again)) == (409, "TASK_NOT_READY")
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-14")
    async def test_a_failed_precheck_leaves_the_task_executing_and_the_write_unattempted(self, rsv, world, db):
        first = await _ready(rsv, world, item(cn="EX2"), "FAIL_PRECHECK_ONCE")
        (behind,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item("cancel", cn="EX2")])))["items"]
        answer = (await rsv.execute(world.agent, first["task_id"])).json()
        assert answer["task"]["task_status"] == "EXECUTING"
        assert answer["task"]["last_failure_reason"] == "The simulated OPERA precheck refused the change"
        precheck, write = answer["operations"]
        assert (precheck["operation_status"], precheck["attempt_count"], precheck["can_retry"]) == ("FAILED", 1, True)
        assert (write["operation_status"], write["attempts"]) == ("PENDING", [])
        # The queue stays closed behind an unfinished OPERA change (FAILED operation != FAILED task).
        assert (await rsv.task(world.agent, behind["task_id"]))["blocked"] is True
        retried = await rsv.post(world.agent, f"/operations/{precheck['id']}/retry", version=1)
        assert retried.status_code == 200, retried.text
        after = retried.json()
        assert after["task"]["task_status"] == "COMPLETED"
        assert [[a["attempt_status"] for a in o["attempts"]] for o in after["operations"]] == [
            ["FAILED", "SUCCEEDED"], ["SUCCEEDED"]]
        assert (await rsv.task(world.agent, behind["task_id"]))["blocked"] is False
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-15")
    async def test_every_retry_is_a_new_attempt_and_names_the_count_it_saw(self, rsv, world, db):
        result = await _ready(rsv, world, item(cn="EX3"), "FAIL_WRITE_ALWAYS")
        answer = (await rsv.execute(world.agent, result["task_id"])).json()
        write = answer["operations"][1]
        assert (write["operation_status"], write["attempt_count"]) == ("FAILED", 1)
        for count in (1, 2, 3):
            retried = await rsv.post(world.agent, f"/operations/{write['id']}/retry",
                                     {"expected_attempt_count": count})
            assert retried.status_code == 200, retried.text
        stale = await rsv.post(world.agent, f"/operations/{write['id']}/retry", version=2)
        assert (stale.status_code, code(stale), stale.json()["current_version"]) == (412, "PRECONDITION_FAILED", 4)
        missing = await rsv.post(world.agent, f"/operations/{write['id']}/retry")
        assert (missing.status_code, code(missing)) == (428, "PRECONDITION_REQUIRED")
        operations = (await rsv.get(world.agent, f"/tasks/{result['task_id']}/operations")).json()["items"]
        assert [a["attempt_number"] for a in operations[1]["attempts"]] == [1, 2, 3, 4]
        precheck = operations[0]
        refused = await rsv.post(world.agent, f"/operations/{precheck['id']}/retry", version=1)
        assert (refused.status_code, code(refused)) == (409, "OPERATION_NOT_FAILED")  # no re-running, no skipping
        # The only way out is a person's decision: abandon (FAILED); nothing can mark it COMPLETED.
        task = await rsv.task(world.agent, result["task_id"])
        abandoned = await rsv.post(world.agent, f"/tasks/{result['task_id']}/abandon", {"reason": "OPERA down"},
                                   version=task["version"])
        assert abandoned.json()["task_status"] == "FAILED"
        after = await rsv.post(world.agent, f"/operations/{write['id']}/retry", version=4)
        assert code(after) == "TASK_ALREADY_FINISHED"
        await rules_hold(db, "RSV-")

    async def test_a_write_that_timed_out_is_found_by_reference_not_done_twice(self, rsv, world, db):
        result = await _ready(rsv, world, item(cn="EX4"), "TIMEOUT_AFTER_WRITE_ONCE")
        write = (await rsv.execute(world.agent, result["task_id"])).json()["operations"][1]
        (first,) = write["attempts"]
        assert (first["error_code"], first["outcome_unknown"]) == ("TIMEOUT", True)
        assert await _simulated_writes(db) == 1
        retried = (await rsv.post(world.agent, f"/operations/{write['id']}/retry", version=1)).json()
        second = retried["operations"][1]["attempts"][1]
        assert (second["attempt_status"], second["via_lookup"]) == ("SUCCEEDED", True)
        assert await _simulated_writes(db) == 1
        assert retried["task"]["task_status"] == "COMPLETED"

    async def test_no_route_completes_or_skips(self, app):
        paths = {path for path in app.openapi()["paths"] if path.startswith("/api/v1/reservations")}
        assert len(paths) > 15
        assert not any(word in path for path in paths for word in ("complete", "skip", "force"))


class TestBackfill:
    @pytest.mark.invariant("RSV-INV-19")
    async def test_a_new_booking_keys_its_temporary_order_with_operas_number(self, rsv, world, db):
        result = await _ready(rsv, world, item("new"))
        answer = (await rsv.execute(world.agent, result["task_id"])).json()
        assert answer["task"]["task_status"] == "COMPLETED"
        order = await rsv.order(world.agent, result["order_id"])
        assert (order["order_status"], order["order_key_type"], order["business_key_source"]) == (
            "ACTIVE", "CONFIRMATION_NUMBER", "OPERA_SIMULATION_RESULT")
        assert order["order_business_key"].startswith("SIM") and order["business_key_backfilled_at"]
        assert order["temporary_order_code"] == f"TMP-{order['id']}"
        # Later mail about the booking finds the order by its number.
        (later,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn=order["order_business_key"])])))["items"]
        assert later["order_id"] == order["id"]
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-19")
    async def test_a_confirmed_number_is_the_key_and_an_active_one_merges(self, rsv, world, db):
        (existing,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="MERGE1")])))["items"]
        raw = body("H1", [item("new", event=1), item("TRACE_RESERVATION_NOTES", event=1)])
        new, trace = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert new["order_id"] == trace["order_id"] != existing["order_id"]
        task = await rsv.task(world.agent, new["task_id"])
        await rsv.confirm_ok(world.agent, new["task_id"], confirmable(task, confirmation_number="merge1"))
        assert (await rsv.execute(world.agent, new["task_id"])).json()["task"]["task_status"] == "COMPLETED"
        temporary = await rsv.order(world.agent, new["order_id"])
        assert (temporary["order_status"], temporary["merged_into_order_id"]) == ("LOGIC_DELETED", existing["order_id"])
        target = await rsv.order(world.agent, existing["order_id"])
        assert [t["id"] for t in target["tasks"]] == [existing["task_id"], trace["task_id"]]
        # The completed new booking stays on the temporary order as its history.
        assert [t["id"] for t in temporary["tasks"]] == [new["task_id"]]
        await rules_hold(db, "RSV-")

    async def test_a_completed_cancellation_ends_its_order(self, rsv, world, db):
        result = await _ready(rsv, world, item("cancel", cn="CXL1"))
        await rsv.execute(world.agent, result["task_id"])
        order = await rsv.order(world.agent, result["order_id"])
        assert order["order_status"] == "ENDED"
        # The key is free again: new mail about it makes a new ACTIVE order.
        (later,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CXL1")])))["items"]
        assert later["order_id"] != result["order_id"] and later["order_status"] == "ACTIVE"
        await rules_hold(db, "RSV-")
