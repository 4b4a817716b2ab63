"""The rules as code: every RSV rule is registered completely, names objects that exist, and its detector finds
an illegal state planted with raw SQL (past the triggers, with constraints dropped inside the test's
rolled-back transaction where needed): a detector that cannot fail proves nothing."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tenet.kernel.invariants import REGISTRY, all_invariants, check
from tenet.kernel.transitions import STATE_MACHINES
from tenet.reservations import lifecycles
from tenet.reservations.errors import ReservationErrorCode
from tenet.reservations.models import TABLES
from tests.reservations import sqlrows as rows

S = "reservation"
RSV_IDS = [f"RSV-INV-{n:02d}" for n in range(1, 22)]
KERNEL_CODES = {"PRECONDITION_FAILED"}


class TestCatalog:
    def test_every_rule_is_registered_completely(self):
        assert sorted(i.id for i in all_invariants() if i.id.startswith("RSV-")) == RSV_IDS
        for invariant_id in RSV_IDS:
            entry = REGISTRY[invariant_id]
            assert entry.domain == "reservations"
            for field in ("statement", "scope", "counterexample", "app", "concurrency", "detector"):
                assert getattr(entry, field).strip(), (invariant_id, field)

    def test_error_codes_of_the_catalog_exist(self):
        codes = {str(c) for c in ReservationErrorCode} | KERNEL_CODES
        for invariant_id in RSV_IDS:
            assert REGISTRY[invariant_id].error_code in codes | {None}, invariant_id

    def test_state_machines_are_declared_with_the_kernel(self):
        for machine in (lifecycles.ORDER, lifecycles.TASK, lifecycles.OPERATION):
            assert STATE_MACHINES[machine.name] is machine
        assert not any(lifecycles.TASK.allows(s, "COMPLETED") for s in ("PENDING_CONFIRM", "READY", "FAILED"))
        assert "BLOCKED" not in lifecycles.TASK.states

    async def test_object_names_fit_and_follow_the_convention(self, db):
        async with db.read_only() as session:
            names = (await session.execute(text(
                "SELECT conname::text FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace "
                "WHERE n.nspname = 'reservation' AND k.contype <> 'n' UNION ALL SELECT c.relname::text FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reservation' AND c.relkind = 'i' "
                "UNION ALL SELECT tgname::text FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reservation' AND NOT g.tgisinternal"
            ))).scalars().all()
        assert names
        assert [n for n in names if len(n.encode()) > 63 or not n.startswith(("pk_", "uq_", "ix_", "ck_", "fk_",
                                                                              "rsv_"))] == []

    async def test_every_table_has_row_level_security(self, db):
        async with db.read_only() as session:
            off = (await session.execute(text(
                "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'reservation' AND c.relkind = 'r' AND NOT c.relrowsecurity"))).scalars().all()
        assert off == [] and len(TABLES) == 11


async def _violations(session, invariant_id: str) -> list[dict]:
    found = await check(await session.connection(), [REGISTRY[invariant_id]])
    return found[0].sample if found else []


async def _bypass(session) -> None:
    """From here on in this transaction no trigger fires (the test server's superuser may do this)."""
    await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
    await session.execute(text("SET LOCAL session_replication_role = replica"))


class TestDetectorsFindPlantedViolations:
    @pytest.mark.invariant("RSV-INV-01")
    async def test_a_table_without_hotel_id(self, db):
        async with db.unit_of_work() as session:
            assert await _violations(session, "RSV-INV-01") == []
            await session.execute(text(f"CREATE TABLE {S}.stray (id bigint PRIMARY KEY)"))
            await session.execute(text(f"CREATE UNIQUE INDEX uq_rsv_stray ON {S}.workflow_reservation_task (id)"))
            problems = {v["problem"] for v in await _violations(session, "RSV-INV-01")}
            assert problems == {"table without hotel_id", "unique index without hotel_id"}
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-02")
    async def test_a_key_that_is_not_the_documented_function(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session)
            assert await _violations(session, "RSV-INV-02") == []
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_ai_batch SET batch_idempotency_key = "
                                       "repeat('e', 64)"))
            assert [v["problem"] for v in await _violations(session, "RSV-INV-02")] == [
                "key is not the documented function of the request"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-03")
    async def test_an_item_text_that_is_not_its_slice(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session)
            assert await _violations(session, "RSV-INV-03") == []
            await _bypass(session)
            # Same length and a matching hash, but no longer the bytes of the body.
            await session.execute(text(
                f"UPDATE {S}.workflow_reservation_ai_transition "
                "SET ai_payload_json = replace(ai_payload_json, '0', '7'), "
                "item_payload_sha256 = encode(sha256(convert_to(replace(ai_payload_json, '0', '7'), 'UTF8')), 'hex')"))
            problems = {v["problem"] for v in await _violations(session, "RSV-INV-03")}
            assert problems == {"item text is not the slice of the request body",
                                "card snapshot differs from its transition"}
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-04")
    async def test_a_missing_transition(self, db):
        async with db.unit_of_work() as session:
            await rows.hotel(session)
            await rows.batch(session, "H1", ['{"a":1}', '{"a":2}'])
            assert await _violations(session, "RSV-INV-04") == []
            await _bypass(session)
            await session.execute(text(f"DELETE FROM {S}.workflow_reservation_ai_transition WHERE array_index = 1"))
            problems = {v["problem"] for v in await _violations(session, "RSV-INV-04")}
            assert problems == {"transition count differs from item_count", "positions of ai_task_results have gaps"}
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-05")
    async def test_a_transition_without_its_task(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session)
            assert await _violations(session, "RSV-INV-05") == []
            await rows.batch(session, "H1", ['{"lost":1}'], source_message_id=9)
            assert [v["problem"] for v in await _violations(session, "RSV-INV-05")] == ["transition without task"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-06")
    async def test_an_adapter_error_without_a_fallback_task_or_with_a_value(self, db):
        async with db.unit_of_work() as session:
            await rows.hotel(session)
            await rows.batch(session, "H1", ['{"a":1}'], mapping={
                "system_process_category": "ADAPTER_CONTRACT_ERROR", "system_task_type": "MANUAL_REVIEW",
                "task_card_type": "FALLBACK_REVIEW", "adapter_error_code": "WRONG_TYPE",
                "adapter_error_message": "WRONG_TYPE: ada@example.com"})
            problems = {v["problem"] for v in await _violations(session, "RSV-INV-06")}
            assert problems == {"adapter error without a fallback review task",
                                "adapter error message carries payload-looking text"}
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-07")
    async def test_two_active_orders_for_a_key(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session)
            assert await _violations(session, "RSV-INV-07") == []
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(f"DROP INDEX {S}.uq_rsv_order_active_key"))
            await rows.order(session, "H1", key="CNF1")
            assert [v["active_orders"] for v in await _violations(session, "RSV-INV-07")] == [2]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-08")
    async def test_an_order_guard_disabled_and_an_active_order_without_a_key(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session, order_status="TEMPORARY")
            assert await _violations(session, "RSV-INV-08") == []
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(f"ALTER TABLE {S}.workflow_reservation_order "
                                       "DROP CONSTRAINT ck_rsv_order_temporary_is_unkeyed, "
                                       "DROP CONSTRAINT ck_rsv_order_active_is_keyed"))
            await session.execute(text(f"ALTER TABLE {S}.workflow_reservation_order DISABLE TRIGGER rsv_order_guard"))
            await session.execute(text(f"UPDATE {S}.workflow_reservation_order SET order_status = 'ACTIVE'"))
            problems = [v["problem"] for v in await _violations(session, "RSV-INV-08")]
            assert sorted(problems) == ["ACTIVE", "trigger rsv_order_guard missing or disabled"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-09")
    async def test_an_ended_order_with_an_open_task(self, db):
        async with db.unit_of_work() as session:
            _, (task_id,) = await rows.graph(session)
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_order SET order_status = 'ENDED', "
                                       "ended_at = now()"))
            assert [(v["task_id"], v["order_status"]) for v in await _violations(session, "RSV-INV-09")] == [
                (task_id, "ENDED")]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-10")
    async def test_a_task_ready_behind_an_open_one(self, db):
        async with db.unit_of_work() as session:
            _, (first, second) = await rows.graph(session, tasks=2)
            await _bypass(session)
            await rows.confirm(session, "H1", second)
            assert [(v["task_id"], v["earlier_open_task_id"]) for v in await _violations(session, "RSV-INV-10")] == [
                (second, first)]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-11")
    async def test_a_child_ready_before_its_parent(self, db):
        async with db.unit_of_work() as session:
            _, (parent,) = await rows.graph(session)
            other = await rows.order(session, "H1", key="CNF2")
            _, (transition,) = await rows.batch(session, "H1", ['{"child":1}'], source_message_id=2)
            child = await rows.task(session, "H1", other, transition, parent=parent, wait_for_parent=True)
            assert await _violations(session, "RSV-INV-11") == []
            await _bypass(session)
            await rows.confirm(session, "H1", child)
            assert [(v["task_id"], v["parent_status"]) for v in await _violations(session, "RSV-INV-11")] == [
                (child, "PENDING_CONFIRM")]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-12")
    async def test_a_completed_task_without_its_time(self, db):
        async with db.unit_of_work() as session:
            _, (task_id,) = await rows.graph(session)
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(f"ALTER TABLE {S}.workflow_reservation_task "
                                       "DROP CONSTRAINT ck_rsv_task_completed_has_time"))
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_task SET task_status = 'COMPLETED', "
                                       "confirmed_at = now()"))
            assert [v["task_id"] for v in await _violations(session, "RSV-INV-12")] == [task_id]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-13")
    async def test_a_notification_in_the_queue(self, db):
        async with db.unit_of_work() as session:
            order_id, _ = await rows.graph(session)
            _, (transition,) = await rows.batch(session, "H1", ['{"note":1}'], source_message_id=4)
            await rows.task(session, "H1", order_id, transition, system_task_type="INFORMATIONAL_MESSAGE",
                            card="MESSAGE_NOTIFICATION")
            assert await _violations(session, "RSV-INV-13") == []
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(f"ALTER TABLE {S}.workflow_reservation_task "
                                       "DROP CONSTRAINT ck_rsv_task_queue_type"))
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_task SET queue_participation = true, "
                                       "confirmed_at = now() WHERE system_task_type = 'INFORMATIONAL_MESSAGE'"))
            assert [v["problem"] for v in await _violations(session, "RSV-INV-13")] == [
                "notification in the queue or not completed"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-14")
    async def test_a_forced_completion(self, db):
        async with db.unit_of_work() as session:
            order_id, (task_id,) = await rows.graph(session)
            await rows.confirm(session, "H1", task_id)
            await rows.set_status(session, "H1", task_id, "EXECUTING")
            operation = await rows.operation(session, "H1", order_id, task_id, 1)
            await rows.attempt(session, "H1", order_id, task_id, operation, 1, "FAILED")
            assert await _violations(session, "RSV-INV-14") == []
            await _bypass(session)
            await rows.set_status(session, "H1", task_id, "COMPLETED", completed_at=rows.NOW)
            assert [v["problem"] for v in await _violations(session, "RSV-INV-14")] == [
                "completed without every operation succeeded"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-15")
    async def test_an_attempt_count_that_disagrees(self, db):
        async with db.unit_of_work() as session:
            order_id, (task_id,) = await rows.graph(session)
            await rows.confirm(session, "H1", task_id)
            await rows.set_status(session, "H1", task_id, "EXECUTING")
            operation = await rows.operation(session, "H1", order_id, task_id, 1)
            await rows.attempt(session, "H1", order_id, task_id, operation, 1, "FAILED")
            assert await _violations(session, "RSV-INV-15") == []
            await _bypass(session)
            await session.execute(text(f"DELETE FROM {S}.workflow_reservation_opera_operation_attempt"))
            assert [v["operation_id"] for v in await _violations(session, "RSV-INV-15")] == [operation]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-16")
    async def test_an_unknown_contract_version_and_a_ready_task_without_confirmation(self, db):
        async with db.unit_of_work() as session:
            _, (task_id,) = await rows.graph(session)
            assert await _violations(session, "RSV-INV-16") == []
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_task_card SET field_contract_version = 'v9'"))
            await rows.set_status(session, "H1", task_id, "READY", confirmed_at=rows.NOW)
            problems = sorted(v["problem"] for v in await _violations(session, "RSV-INV-16"))
            assert problems == ["past PENDING_CONFIRM without a confirmed card", "unknown field contract version v9"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-17")
    async def test_the_version_guard_disabled(self, db):
        async with db.unit_of_work() as session:
            assert await _violations(session, "RSV-INV-17") == []
            await session.execute(text(f"ALTER TABLE {S}.workflow_reservation_task DISABLE TRIGGER rsv_task_guard"))
            assert [v["problem"] for v in await _violations(session, "RSV-INV-17")] == [
                "trigger rsv_task_guard missing or disabled"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-18")
    async def test_a_task_past_its_orders_counter(self, db):
        async with db.unit_of_work() as session:
            _, (task_id,) = await rows.graph(session)
            assert await _violations(session, "RSV-INV-18") == []
            await _bypass(session)
            await session.execute(text(f"UPDATE {S}.workflow_reservation_task SET execution_order = 40"))
            assert [v["task_id"] for v in await _violations(session, "RSV-INV-18")] == [task_id]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-19")
    async def test_a_back_fill_without_a_completed_new_booking(self, db):
        async with db.unit_of_work() as session:
            await rows.graph(session, order_status="TEMPORARY")
            await _bypass(session)
            await session.execute(text(
                f"UPDATE {S}.workflow_reservation_order SET order_status = 'ACTIVE', order_key_type = "
                "'CONFIRMATION_NUMBER', order_business_key = 'SIM1', business_key_source = 'OPERA_SIMULATION_RESULT', "
                "business_key_backfilled_at = now()"))
            assert [v["problem"] for v in await _violations(session, "RSV-INV-19")] == [
                "back-filled without a completed NEW_BOOKING on it"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-20")
    async def test_an_audit_row_with_an_email_and_a_stray_key(self, db):
        async with db.unit_of_work() as session:
            await rows.hotel(session)
            assert await _violations(session, "RSV-INV-20") == []
            await session.execute(text(
                f"INSERT INTO {S}.workflow_reservation_audit_log (hotel_id, actor_type, actor_id, action, "
                "after_snapshot_json, occurred_at, created_at) VALUES ('H1', 'USER', 'x', "
                "'reservation.task.confirmed', '{\"guest_email\": \"ada@example.com\"}', now(), now())"))
            problems = sorted(v["problem"] for v in await _violations(session, "RSV-INV-20"))
            assert problems == ["email, URL or secret-looking text", "snapshot key outside the allow-list: guest_email"]
            await session.rollback()

    @pytest.mark.invariant("RSV-INV-21")
    async def test_an_assignment_of_a_missing_account(self, db):
        async with db.unit_of_work() as session:
            await rows.hotel(session)
            assert await _violations(session, "RSV-INV-21") == []
            await session.execute(text(f"INSERT INTO {S}.hotel_staff (hotel_id, user_id, granted_at) "
                                       "VALUES ('H1', :u, now())"), {"u": uuid.uuid4()})
            assert len(await _violations(session, "RSV-INV-21")) == 1
            await session.rollback()
