"""Bypass tests (INVARIANTS.md §3): illegal rows written with raw SQL, past every service check, are refused by
the database itself, naming the constraint, index or trigger that refused them. Deferred rules are checked
with SET CONSTRAINTS ALL IMMEDIATE (the test's transaction is never committed)."""

from __future__ import annotations

import itertools
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tenet.kernel.db_errors import violated_constraint
from tenet.reservations import lifecycles
from tests.reservations import sqlrows as rows

S = "reservation"


async def _refused(db, setup, *statements: tuple[str, dict] | str) -> str | None:
    """Run `setup(session)` (legal rows), then the statements, then the deferred checks; answer the name
    PostgreSQL gives for the refusal."""
    async with db.unit_of_work() as session:
        context = await setup(session)
    with pytest.raises(IntegrityError) as refusal:
        async with db.unit_of_work() as session:
            for statement in statements:
                sql, params = (statement, {}) if isinstance(statement, str) else statement
                await session.execute(text(sql.format(**context)), params)
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
    return violated_constraint(refusal.value)


async def _graph(session, **kwargs) -> dict:
    order_id, tasks = await rows.graph(session, **kwargs)
    return {"order": order_id, "task": tasks[0], "tasks": tasks}


async def _two_tasks(session) -> dict:
    order_id, tasks = await rows.graph(session, tasks=2)
    return {"order": order_id, "first": tasks[0], "second": tasks[1]}


async def _executing(session, *, fail_first: bool = True) -> dict:
    order_id, (task_id,) = await rows.graph(session)
    await rows.confirm(session, "H1", task_id)
    await rows.set_status(session, "H1", task_id, "EXECUTING")
    first = await rows.operation(session, "H1", order_id, task_id, 1)
    second = await rows.operation(session, "H1", order_id, task_id, 2, "SIMULATE_WRITE")
    attempt = await rows.attempt(session, "H1", order_id, task_id, first, 1, "FAILED" if fail_first else "SUCCEEDED")
    return {"order": order_id, "task": task_id, "first": first, "second": second, "attempt": attempt}


class TestIngestRows:
    @pytest.mark.invariant("RSV-INV-02")
    async def test_a_second_batch_with_the_same_key(self, db):
        async def setup(session):
            await rows.hotel(session)
            await rows.batch(session, "H1", ['{"a":1}'], request_id="r-1",
                             client_id=uuid.UUID(int=7))
            return {}

        async def again(session):
            await rows.batch(session, "H1", ['{"a":2}'], request_id="r-1", client_id=uuid.UUID(int=7))

        async with db.unit_of_work() as session:
            await setup(session)
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await again(session)
        assert violated_constraint(refusal.value) == "uq_rsv_batch_idempotency_key"

    @pytest.mark.invariant("RSV-INV-02")
    async def test_a_request_id_with_a_control_character(self, db):
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await rows.hotel(session)
                await rows.batch(session, "H1", ['{"a":1}'], request_id="r\x1f1")
        assert violated_constraint(refusal.value) == "ck_rsv_batch_request_id_safe"

    @pytest.mark.invariant("RSV-INV-03")
    async def test_the_stored_item_text_cannot_change(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_ai_transition SET ai_payload_json = "
                                          "'{{\"n\": 0}}', item_payload_sha256 = encode(sha256('{{\"n\": 0}}'), 'hex')")
        assert name == "rsv_transition_immutable"

    @pytest.mark.invariant("RSV-INV-03")
    async def test_the_request_bytes_cannot_change(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_ai_batch SET request_body = '\\x00', "
                                          "request_payload_sha256 = encode(sha256('\\x00'::bytea), 'hex')")
        assert name == "rsv_batch_immutable"

    @pytest.mark.invariant("RSV-INV-03")
    async def test_a_body_that_does_not_match_its_hash(self, db):
        async def nothing(session):
            await rows.hotel(session)
            return {}

        name = await _refused(db, nothing, (
            f"INSERT INTO {S}.workflow_reservation_ai_batch (hotel_id, source_message_id, request_payload_sha256, "
            "batch_idempotency_key, idempotency_basis, client_id, received_at, item_count, request_body, "
            "ai_contract_version, response_items_json, created_at, updated_at) VALUES ('H1', 1, repeat('a', 64), "
            "repeat('b', 64), 'BODY', :c, now(), 0, '\\x7b7d', '20260711-p0', '[]', now(), now())",
            {"c": uuid.uuid4()}))
        assert name == "ck_rsv_batch_body_matches_sha256"

    @pytest.mark.invariant("RSV-INV-03")
    async def test_an_item_text_that_does_not_match_its_hash(self, db):
        async with db.unit_of_work() as session:
            await rows.hotel(session)
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await rows.batch(session, "H1", ['{"a":1}'])
                await session.execute(text("SET LOCAL session_replication_role = replica"))
                await session.execute(text(f"UPDATE {S}.workflow_reservation_ai_transition "
                                           "SET ai_payload_json = '{\"n\": 9}'"))
        assert violated_constraint(refusal.value) == "ck_rsv_transition_payload_matches_sha256"

    @pytest.mark.invariant("RSV-INV-04")
    async def test_two_transitions_at_one_position(self, db):
        name = await _refused(db, _graph, (
            f"INSERT INTO {S}.workflow_reservation_ai_transition (hotel_id, batch_id, source_message_id, source_list, "
            "array_index, execution_order, route_code, system_process_category, system_task_type, task_card_type, "
            "item_payload_sha256, item_idempotency_key, ai_payload_json, raw_byte_offset, raw_byte_length, created_at, "
            "updated_at) SELECT hotel_id, batch_id, source_message_id, source_list, array_index, execution_order, "
            "route_code, system_process_category, system_task_type, task_card_type, item_payload_sha256, "
            "repeat('0', 64), ai_payload_json, raw_byte_offset, raw_byte_length, created_at, updated_at "
            f"FROM {S}.workflow_reservation_ai_transition", {}))
        assert name == "uq_rsv_transition_position"

    @pytest.mark.invariant("RSV-INV-05")
    async def test_a_second_task_for_one_transition(self, db):
        name = await _refused(db, _graph, (
            f"INSERT INTO {S}.workflow_reservation_task (hotel_id, order_id, source_message_id, ai_transition_id, "
            "system_task_type, task_card_type, task_status, queue_participation, execution_order, created_at, "
            "updated_at) SELECT hotel_id, order_id, source_message_id, ai_transition_id, system_task_type, "
            "task_card_type, task_status, queue_participation, 99, created_at, updated_at "
            f"FROM {S}.workflow_reservation_task WHERE id = {{task}}", {}))
        assert name == "uq_rsv_task_transition"

    @pytest.mark.invariant("RSV-INV-06")
    @pytest.mark.parametrize(("code", "message", "constraint"), [
        ("WRONG_TYPE", None, "ck_rsv_transition_adapter_error"),
        ("SOMETHING_ELSE", "x", "ck_rsv_transition_adapter_error_code"),
    ])
    async def test_adapter_errors_carry_a_known_code_and_a_message(self, db, code, message, constraint):
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await rows.hotel(session)
                await rows.batch(session, "H1", ['{"a":1}'], mapping={
                    "system_process_category": "ADAPTER_CONTRACT_ERROR", "system_task_type": "MANUAL_REVIEW",
                    "task_card_type": "FALLBACK_REVIEW", "adapter_error_code": code, "adapter_error_message": message})
        assert violated_constraint(refusal.value) == constraint


class TestOrders:
    @pytest.mark.invariant("RSV-INV-07")
    async def test_a_second_active_order_for_a_key(self, db):
        name = await _refused(db, _graph, (
            f"INSERT INTO {S}.workflow_reservation_order (hotel_id, order_key_type, order_business_key, order_status, "
            "business_key_source, created_at, updated_at) VALUES ('H1', 'CONFIRMATION_NUMBER', 'CNF1', 'ACTIVE', "
            "'AI_CANDIDATE', now(), now())", {}))
        assert name == "uq_rsv_order_active_key"

    @pytest.mark.invariant("RSV-INV-08")
    @pytest.mark.parametrize(("statement", "constraint"), [
        ("UPDATE {S}.workflow_reservation_order SET order_status = 'ENDED', ended_at = now()", None),
        ("DELETE FROM {S}.workflow_reservation_order", "rsv_order_guard"),
        ("UPDATE {S}.workflow_reservation_order SET order_business_key = 'cnf 1'", "ck_rsv_order_key_normalized"),
        ("INSERT INTO {S}.workflow_reservation_order (hotel_id, order_key_type, order_business_key, order_status, "
         "business_key_source, temporary_order_code, created_at, updated_at) VALUES ('H1', 'CONFIRMATION_NUMBER', "
         "'CNF7', 'TEMPORARY', 'AI_CANDIDATE', 'TMP-X', now(), now())", "ck_rsv_order_temporary_is_unkeyed"),
    ])
    async def test_order_state_rules(self, db, statement, constraint):
        async def empty_order(session):
            await rows.hotel(session)
            return {"order": await rows.order(session, "H1")}

        if constraint is None:  # ended is legal; leaving ENDED is not
            name = await _refused(db, empty_order, statement.format(S=S),
                                  f"UPDATE {S}.workflow_reservation_order SET order_status = 'ACTIVE', ended_at = NULL")
            assert name == "rsv_order_guard"
        else:
            assert await _refused(db, empty_order, statement.format(S=S)) == constraint

    @pytest.mark.invariant("RSV-INV-09")
    async def test_a_task_into_a_logic_deleted_order(self, db):
        async def setup(session):
            await rows.hotel(session)
            _, (transition,) = await rows.batch(session, "H1", ['{"a":1}'])
            order_id = await rows.order(session, "H1")
            await session.execute(text(f"UPDATE {S}.workflow_reservation_order SET order_status = 'LOGIC_DELETED', "
                                       "logic_deleted_at = now(), logic_deleted_reason = 'x'"))
            return {"order": order_id, "transition": transition}

        name = await _refused(db, setup, (
            f"INSERT INTO {S}.workflow_reservation_task (hotel_id, order_id, source_message_id, ai_transition_id, "
            "system_task_type, task_card_type, task_status, queue_participation, execution_order, created_at, "
            "updated_at) VALUES ('H1', {order}, 1, {transition}, 'UPDATE_BOOKING', 'UPDATE_BOOKING', "
            "'PENDING_CONFIRM', true, 1, now(), now())", {}))
        assert name == "rsv_task_guard"

    @pytest.mark.invariant("RSV-INV-09")
    async def test_ending_an_order_with_an_open_task(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_order SET order_status = 'ENDED', "
                                          "ended_at = now()")
        assert name == "rsv_order_closed_has_no_open_tasks"

    @pytest.mark.invariant("RSV-INV-19")
    @pytest.mark.parametrize(("statement", "constraint"), [
        ("UPDATE {S}.workflow_reservation_order SET order_status = 'LOGIC_DELETED', logic_deleted_at = now(), "
         "logic_deleted_reason = 'x', merged_into_order_id = id", "ck_rsv_order_merged"),
        ("UPDATE {S}.workflow_reservation_order SET business_key_backfilled_at = now()", "ck_rsv_order_backfill"),
    ])
    async def test_back_fill_and_merge_shapes(self, db, statement, constraint):
        async def setup(session):
            await rows.hotel(session)
            return {"order": await rows.order(session, "H1")}

        assert await _refused(db, setup, statement.format(S=S)) == constraint


class TestQueue:
    @pytest.mark.invariant("RSV-INV-10")
    async def test_a_second_task_ready_while_the_first_is_open(self, db):
        async def setup(session):
            context = await _two_tasks(session)
            return context

        async with db.unit_of_work() as session:
            context = await setup(session)
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await rows.confirm(session, "H1", context["second"])
                await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
        assert violated_constraint(refusal.value) == "rsv_task_queue_respected"

    @pytest.mark.invariant("RSV-INV-10")
    async def test_two_executing_tasks_in_one_order(self, db):
        async with db.unit_of_work() as session:
            context = await _two_tasks(session)
            for task_id in (context["first"], context["second"]):
                await rows.confirm(session, "H1", task_id)
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                for task_id in (context["first"], context["second"]):
                    await rows.set_status(session, "H1", task_id, "EXECUTING")
        assert violated_constraint(refusal.value) == "uq_rsv_task_one_executing"

    @pytest.mark.invariant("RSV-INV-10")
    async def test_two_tasks_at_one_queue_position(self, db):
        name = await _refused(db, _two_tasks, f"UPDATE {S}.workflow_reservation_task SET execution_order = 1, "
                                              "version = version + 1 WHERE id = {second}")
        assert name == "uq_rsv_task_execution_order"

    @pytest.mark.invariant("RSV-INV-11")
    async def test_a_parent_younger_than_its_child(self, db):
        name = await _refused(db, _two_tasks, f"UPDATE {S}.workflow_reservation_task SET parent_task_id = {{second}}, "
                                              "version = version + 1 WHERE id = {first}")
        assert name == "ck_rsv_task_parent_before_child"

    @pytest.mark.invariant("RSV-INV-11")
    async def test_a_child_ready_before_its_parent_completed(self, db):
        async with db.unit_of_work() as session:
            _, (parent,) = await rows.graph(session)
            other = await rows.order(session, "H1", key="CNF2")
            _, (transition,) = await rows.batch(session, "H1", ['{"child":1}'], source_message_id=2)
            child = await rows.task(session, "H1", other, transition, parent=parent, wait_for_parent=True)
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await rows.confirm(session, "H1", child)
                await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
        assert violated_constraint(refusal.value) == "rsv_task_queue_respected"


_UNDECLARED = [(a, b) for a, b in itertools.product(lifecycles.TASK.states, repeat=2)
               if a != b and not lifecycles.TASK.allows(a, b)]


class TestTaskLifecycle:
    @pytest.mark.invariant("RSV-INV-12")
    async def test_blocked_is_not_a_stored_state(self, db):
        # The guard refuses it as an undeclared transition; without any trigger the CHECK still does.
        assert await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_task SET task_status = 'BLOCKED', "
                                          "version = version + 1") == "rsv_task_guard"
        async def another_graph(session):
            return await _graph(session, key="CNF2")

        name = await _refused(db, another_graph, "SET LOCAL session_replication_role = replica",
                              f"UPDATE {S}.workflow_reservation_task SET task_status = 'BLOCKED'")
        assert name == "ck_rsv_task_status"

    @pytest.mark.invariant("RSV-INV-12")
    @pytest.mark.parametrize(("source", "target"), _UNDECLARED)
    async def test_every_undeclared_status_pair_is_refused(self, db, source, target):
        async with db.unit_of_work() as session:
            context = await _executing(session, fail_first=False)
            # Put the task in `source` however it got there, past every rule (replica role skips triggers).
            await session.execute(text("SET LOCAL session_replication_role = replica"))
            await session.execute(text(
                f"UPDATE {S}.workflow_reservation_task SET task_status = :s, "
                "completed_at = CASE WHEN CAST(:s AS varchar) = 'COMPLETED' THEN now() END, "
                "failed_at = CASE WHEN CAST(:s AS varchar) = 'FAILED' THEN now() END, "
                "last_failure_reason = 'x' WHERE id = :k"), {"s": source, "k": context["task"]})
            await session.execute(text("SET LOCAL session_replication_role = origin"))
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                await session.execute(text(
                    f"UPDATE {S}.workflow_reservation_task SET task_status = :s, version = version + 1, "
                    "completed_at = CASE WHEN CAST(:s AS varchar) = 'COMPLETED' THEN now() END, "
                    "failed_at = CASE WHEN CAST(:s AS varchar) = 'FAILED' THEN now() END WHERE id = :k"),
                    {"s": target, "k": context["task"]})
        assert violated_constraint(refusal.value) == "rsv_task_guard"

    @pytest.mark.invariant("RSV-INV-12")
    async def test_tasks_are_never_deleted(self, db):
        assert await _refused(db, _graph, f"DELETE FROM {S}.workflow_reservation_task") == "rsv_task_guard"

    @pytest.mark.invariant("RSV-INV-17")
    async def test_a_change_without_a_version_bump(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_task SET updated_at = now()")
        assert name == "rsv_task_guard"

    @pytest.mark.invariant("RSV-INV-13")
    async def test_a_queue_task_inserted_ready(self, db):
        async def setup(session):
            context = await _graph(session)
            _, (context["transition"],) = await rows.batch(session, "H1", ['{"late":1}'], source_message_id=5)
            return context

        name = await _refused(db, setup, (
            f"INSERT INTO {S}.workflow_reservation_task (hotel_id, order_id, source_message_id, ai_transition_id, "
            "system_task_type, task_card_type, task_status, queue_participation, execution_order, confirmed_at, "
            "created_at, updated_at) VALUES ('H1', {order}, 5, {transition}, 'UPDATE_BOOKING', 'UPDATE_BOOKING', "
            "'READY', true, 50, now(), now(), now())", {}))
        assert name == "rsv_task_guard"

    @pytest.mark.invariant("RSV-INV-13")
    async def test_a_notification_waiting_for_confirmation(self, db):
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                order_id, _ = await rows.graph(session)
                _, (transition,) = await rows.batch(session, "H1", ['{"note":1}'], source_message_id=3)
                task_id = await rows.task(session, "H1", order_id, transition, system_task_type="INFORMATIONAL_MESSAGE",
                                          card="MESSAGE_NOTIFICATION")
                await session.execute(text("SET LOCAL session_replication_role = replica"))
                await rows.set_status(session, "H1", task_id, "PENDING_CONFIRM", completed_at=None)
        assert violated_constraint(refusal.value) == "ck_rsv_task_notification_completed"

    @pytest.mark.invariant("RSV-INV-13")
    async def test_an_operation_for_a_task_that_is_not_executing(self, db):
        with pytest.raises(IntegrityError) as refusal:
            async with db.unit_of_work() as session:
                order_id, (task_id,) = await rows.graph(session)
                await rows.operation(session, "H1", order_id, task_id, 1)
        assert violated_constraint(refusal.value) == "rsv_op_guard"


class TestOperations:
    @pytest.mark.invariant("RSV-INV-14")
    async def test_completing_with_a_failed_operation(self, db):
        name = await _refused(db, _executing, f"UPDATE {S}.workflow_reservation_task SET task_status = 'COMPLETED', "
                                              "completed_at = now(), version = version + 1")
        assert name == "rsv_task_completion_earned"

    @pytest.mark.invariant("RSV-INV-14")
    async def test_attempting_the_write_before_the_precheck_succeeded(self, db):
        name = await _refused(db, _executing, (
            f"INSERT INTO {S}.workflow_reservation_opera_operation_attempt (hotel_id, order_id, task_id, operation_id, "
            "attempt_number, attempt_status, request_payload_json, started_at, finished_at, created_at) "
            "VALUES ('H1', {order}, {task}, {second}, 1, 'SUCCEEDED', '{{}}', now(), now(), now())", {}))
        assert name == "rsv_attempt_in_sequence"

    @pytest.mark.invariant("RSV-INV-15")
    @pytest.mark.parametrize("statement", [
        "UPDATE {S}.workflow_reservation_opera_operation_attempt SET attempt_status = 'SUCCEEDED'",
        "DELETE FROM {S}.workflow_reservation_opera_operation_attempt",
    ])
    async def test_attempts_are_never_rewritten(self, db, statement):
        assert await _refused(db, _executing, statement.format(S=S)) == "rsv_attempt_append_only"

    @pytest.mark.invariant("RSV-INV-15")
    async def test_an_attempt_number_gap(self, db):
        name = await _refused(db, _executing, (
            f"INSERT INTO {S}.workflow_reservation_opera_operation_attempt (hotel_id, order_id, task_id, operation_id, "
            "attempt_number, attempt_status, request_payload_json, started_at, finished_at, created_at) "
            "VALUES ('H1', {order}, {task}, {first}, 3, 'SUCCEEDED', '{{}}', now(), now(), now())", {}))
        assert name == "rsv_attempt_in_sequence"

    @pytest.mark.invariant("RSV-INV-15")
    async def test_a_succeeded_operation_is_final(self, db):
        async def succeeded(session):
            return await _executing(session, fail_first=False)

        name = await _refused(db, succeeded, f"UPDATE {S}.workflow_reservation_opera_operation SET "
                                             "operation_status = 'FAILED', last_error_message = 'x' WHERE id = {first}")
        assert name == "rsv_op_guard"


class TestCards:
    @pytest.mark.invariant("RSV-INV-16")
    async def test_a_confirmed_payload_is_final(self, db):
        async def confirmed(session):
            context = await _graph(session)
            await rows.confirm(session, "H1", context["task"])
            return context

        name = await _refused(db, confirmed, f"UPDATE {S}.workflow_reservation_task_card "
                                             "SET confirmed_payload_json = '{{\"room_type\": \"TWIN\"}}'")
        assert name == "rsv_card_guard"

    @pytest.mark.invariant("RSV-INV-16")
    async def test_a_confirmed_payload_names_who_and_when(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_task_card "
                                          "SET confirmed_payload_json = '{{}}', confirmed_at = now()")
        assert name == "ck_rsv_card_confirmed_complete"

    @pytest.mark.invariant("RSV-INV-16")
    async def test_ready_without_a_confirmed_card(self, db):
        name = await _refused(db, _graph, f"UPDATE {S}.workflow_reservation_task SET task_status = 'READY', "
                                          "confirmed_at = now(), version = version + 1")
        assert name == "rsv_task_completion_earned"


class TestMoves:
    @pytest.mark.invariant("RSV-INV-18")
    async def test_a_ready_task_cannot_change_order(self, db):
        async def ready_and_other_order(session):
            context = await _graph(session)
            await rows.confirm(session, "H1", context["task"])
            context["other"] = await rows.order(session, "H1", key="CNF9")
            return context

        name = await _refused(db, ready_and_other_order, f"UPDATE {S}.workflow_reservation_task SET "
                                                         "order_id = {other}, version = version + 1")
        assert name == "rsv_task_guard"


class TestAuditAndAccess:
    @pytest.mark.invariant("RSV-INV-20")
    @pytest.mark.parametrize("statement", [
        "UPDATE {S}.workflow_reservation_audit_log SET reason = 'edited'",
        "DELETE FROM {S}.workflow_reservation_audit_log",
        "TRUNCATE {S}.workflow_reservation_audit_log",
    ])
    async def test_the_audit_log_is_append_only(self, db, statement):
        async def one_row(session):
            await rows.hotel(session)
            await session.execute(text(
                f"INSERT INTO {S}.workflow_reservation_audit_log (hotel_id, actor_type, action, occurred_at, "
                "created_at) VALUES ('H1', 'SYSTEM', 'reservation.order.created', now(), now())"))
            return {}

        name = await _refused(db, one_row, statement.format(S=S))
        assert name in ("rsv_audit_append_only", "rsv_audit_no_truncate")

    @pytest.mark.invariant("RSV-INV-20")
    async def test_a_user_row_names_its_actor(self, db):
        async def nothing(session):
            await rows.hotel(session)
            return {}

        name = await _refused(db, nothing, f"INSERT INTO {S}.workflow_reservation_audit_log (hotel_id, actor_type, "
                                           "action, occurred_at, created_at) VALUES ('H1', 'USER', "
                                           "'reservation.order.created', now(), now())")
        assert name == "ck_rsv_audit_actor_named"

    @pytest.mark.invariant("RSV-INV-21")
    async def test_staff_of_an_unknown_hotel(self, db):
        async def nothing(session):
            return {}

        name = await _refused(db, nothing, (f"INSERT INTO {S}.hotel_staff (hotel_id, user_id, granted_at) "
                                            "VALUES ('NOPE', :u, now())", {"u": uuid.uuid4()}))
        assert name == "fk_hotel_staff_hotel"
