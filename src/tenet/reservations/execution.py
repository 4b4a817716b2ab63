# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Executing a task against OPERA (spec §11-§13): plan the operations, run them in sequence, record every
attempt as a new row, and complete the task only when all succeeded (RSV-INV-14/15).

`execute_task` (READY -> EXECUTING) and `retry_operation` run in one unit of work each, holding the order's
row lock, so two executes or two retries of one task run one after the other and the second sees what the
first committed. A failed attempt is an outcome, not an error: it is committed, the operation is FAILED,
the task stays EXECUTING (never FAILED: that would release the queue behind a change OPERA never got), and
only a retry of that operation continues — no skipping, no forced completion.

Completion of a NEW_BOOKING on a temporary order back-fills the order's business key (spec §13): the
confirmed key, else OPERA's answer. When that key is already ACTIVE elsewhere the temporary order's open
tasks join that order's queue and the temporary order is logically deleted, merged into it (RSV-INV-19).
The back-fill is the one place a second order is needed after the first is locked: it never *waits* for it
(lock_timeout on the activation, NOWAIT on the other order), so it cannot deadlock with an ingest or a move
holding that order; when busy, the whole execution is refused as ORDER_BUSY and nothing is recorded.
A completed CANCEL_BOOKING ends its order when nothing else is open on it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.principal import Principal
from tenet.kernel.db_errors import violated_constraint
from tenet.kernel.errors import DomainError
from tenet.kernel.http import ExpectedVersion
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, transition
from tenet.reservations import audit, errors, lifecycles, service
from tenet.reservations.audit import AuditActor, Entry
from tenet.reservations.models import (
    ORDER_ACTIVE_KEY_INDEX,
    OperaOperation,
    OperaOperationAttempt,
    Order,
    Task,
)
from tenet.reservations.opera import ADAPTER, OperaAdapter, OperationCall, Outcome
from tenet.reservations.permissions import Viewer, visible_sql

_T = "reservation.workflow_reservation_task"
_X = "reservation.workflow_reservation_opera_operation"
# How long the back-fill waits for a key another transaction is inserting before giving up (ORDER_BUSY).
BACKFILL_LOCK_TIMEOUT = "200ms"
_OPERATION_IDS_SQL = f"SELECT nextval(pg_get_serial_sequence('{_X}', 'id')) AS id FROM generate_series(1, %(n)s)"
_VISIBLE_OPERATION_SQL = f"""
    SELECT hotel_id, order_id, task_id FROM {_X} x WHERE x.id = %(id)s AND {visible_sql('x.hotel_id')}"""
_OPEN_TASKS_SQL = f"""
    SELECT id FROM {_T} WHERE hotel_id = %(h)s AND order_id = %(o)s
       AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING') ORDER BY execution_order"""
_ANY_OPEN_SQL = f"""
    SELECT EXISTS (SELECT 1 FROM {_T} WHERE hotel_id = %(h)s AND order_id = %(o)s
                      AND queue_participation AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING'))"""


async def execute_task(session: AsyncSession, *, task_id: int, want: ExpectedVersion | None, principal: Principal,
                       now: datetime, adapter: OperaAdapter = ADAPTER) -> None:
    """READY -> EXECUTING, then the operations in sequence; COMPLETED when all succeeded."""
    viewer = Viewer(principal)
    hotel_id, order_id = await service.resolve_task(session, task_id, viewer)
    await service.lock_orders(session, hotel_id, [order_id])
    task = await service.load_task(session, hotel_id, task_id)
    if task.task_status != "READY":
        raise errors.TaskNotReady(current_status=task.task_status)
    service.check_version(want, task.version)
    await service.refuse_if_blocked(session, task)
    card = await service.load_card(session, hotel_id, task_id)
    payload: dict[str, Any] = card.confirmed_payload_json or {}
    task = await transition(session, lifecycles.TASK, "start_execution", model=Task, id=task_id,
                            where=(Task.hotel_id == hotel_id,), values={"updated_at": now},
                            expected_version=None if want is None else want.value,
                            refuse=service.task_refusal(want, errors.TaskNotReady), status_attr="task_status")
    planned = adapter.plan(system_task_type=task.system_task_type, task_card_type=task.task_card_type,
                           confirmed_payload=payload)
    ids = [row["id"] for row in await (await statements(session)).all(_OPERATION_IDS_SQL, {"n": len(planned)})]
    await session.execute(insert(OperaOperation), [{
        "id": operation_id, "hotel_id": hotel_id, "order_id": task.order_id, "task_id": task_id,
        "operation_sequence": step.sequence, "operation_code": step.code, "operation_name": step.name,
        "operation_status": "PENDING", "adapter_name": adapter.name,
        "external_reference": f"tenet-rsv-op-{operation_id}", "request_payload_json": step.request,
        "attempt_count": 0, "created_at": now, "updated_at": now,
    } for operation_id, step in zip(sorted(ids), planned, strict=True)])
    actor = AuditActor.of(principal)
    await audit.record(session, Entry(hotel_id, "reservation.task.execution_started", order_id=task.order_id,
                                      task_id=task_id, before={"task_status": "READY"},
                                      after={"task_status": "EXECUTING", "version": task.version}),
                       actor=actor, now=now)
    await _run(session, task, payload, actor=actor, now=now, adapter=adapter)


async def retry_operation(session: AsyncSession, *, operation_id: int, want: ExpectedVersion, principal: Principal,
                          now: datetime, adapter: OperaAdapter = ADAPTER) -> int:
    """A new attempt of the task's FAILED operation (its attempt count must be the one the caller saw), then
    the operations after it; answers the task id."""
    viewer = Viewer(principal)
    row = await (await statements(session)).one(_VISIBLE_OPERATION_SQL, {"id": operation_id, **viewer.params()})
    if row is None:
        raise errors.OperationNotFound()
    hotel_id, task_id = row["hotel_id"], row["task_id"]
    await service.lock_orders(session, hotel_id, [row["order_id"]])
    task = await service.load_task(session, hotel_id, task_id)
    if task.task_status == "FAILED":
        raise errors.TaskAlreadyFinished(current_status=task.task_status)
    operation = (await session.scalars(select(OperaOperation).where(
        OperaOperation.hotel_id == hotel_id, OperaOperation.id == operation_id)
        .execution_options(populate_existing=True))).one()
    if task.task_status != "EXECUTING" or operation.operation_status != "FAILED":
        raise errors.OperationNotFailed(current_status=operation.operation_status)
    # The claim: only the attempt count the caller saw may be retried (RSV-INV-15).
    claimed = (await session.execute(
        update(OperaOperation).where(OperaOperation.hotel_id == hotel_id, OperaOperation.id == operation_id,
                                     OperaOperation.operation_status == "FAILED",
                                     OperaOperation.attempt_count == want.value)
        .values(updated_at=now).returning(OperaOperation.id)
        .execution_options(synchronize_session=False))).scalar_one_or_none()
    if claimed is None:
        raise want.stale(operation.attempt_count)
    card = await service.load_card(session, hotel_id, task_id)
    await _run(session, task, card.confirmed_payload_json or {}, actor=AuditActor.of(principal), now=now,
               adapter=adapter)
    return task_id


async def _run(session: AsyncSession, task: Task, payload: dict[str, Any], *, actor: AuditActor, now: datetime,
               adapter: OperaAdapter) -> None:
    """The operations not yet SUCCEEDED, in sequence, stopping at the first failure."""
    hotel_id = task.hotel_id
    operations = (await session.scalars(select(OperaOperation).where(
        OperaOperation.hotel_id == hotel_id, OperaOperation.task_id == task.id,
        OperaOperation.operation_status != "SUCCEEDED").order_by(OperaOperation.operation_sequence)
        .execution_options(populate_existing=True))).all()
    last_outcome: Outcome | None = None
    for operation in operations:
        call = OperationCall(
            hotel_id=hotel_id, task_id=task.id, operation_id=operation.id, operation_code=operation.operation_code,
            external_reference=operation.external_reference, attempt_number=operation.attempt_count + 1,
            system_task_type=task.system_task_type, task_card_type=task.task_card_type,
            request=operation.request_payload_json, confirmed_payload=payload, now=now)
        outcome = None
        if adapter.is_write(operation.operation_code) and call.attempt_number > 1:
            # Before writing again: did an earlier attempt reach OPERA after all? (a lost answer, a timeout)
            outcome = await adapter.lookup(session, call)
        if outcome is None:
            outcome = await adapter.perform(session, call)
        await _record(session, task, call, outcome, actor=actor, now=now)
        if not outcome.succeeded:
            await transition(session, lifecycles.TASK, "record_failure", model=Task, id=task.id,
                             where=(Task.hotel_id == hotel_id,), status_attr="task_status",
                             values={"last_failure_reason": outcome.error_message, "updated_at": now})
            await service.touch_order(session, hotel_id, task.order_id, now)
            return
        last_outcome = outcome
    completed = await transition(session, lifecycles.TASK, "complete", model=Task, id=task.id,
                                 where=(Task.hotel_id == hotel_id,), status_attr="task_status",
                                 values={"completed_at": now, "updated_at": now})
    await audit.record(session, Entry(hotel_id, "reservation.task.completed", order_id=task.order_id, task_id=task.id,
                                      before={"task_status": "EXECUTING"},
                                      after={"task_status": "COMPLETED", "version": completed.version}),
                       actor=actor, now=now)
    order = (await session.scalars(select(Order).where(Order.hotel_id == hotel_id, Order.id == task.order_id)
                                   .execution_options(populate_existing=True))).one()
    if task.system_task_type == "NEW_BOOKING" and order.order_status == "TEMPORARY":
        await _backfill(session, order, payload, last_outcome, now=now)
    elif task.system_task_type == "CANCEL_BOOKING":
        await _end_if_nothing_open(session, order, now=now)
    else:
        await service.touch_order(session, hotel_id, order.id, now)


async def _record(session: AsyncSession, task: Task, call: OperationCall, outcome: Outcome, *,
                  actor: AuditActor, now: datetime) -> None:
    """A new attempt row (never an update of an old one) and the operation's count, status and last attempt."""
    operation_id, number = call.operation_id, call.attempt_number
    status = "SUCCEEDED" if outcome.succeeded else "FAILED"
    attempt_id = (await session.execute(insert(OperaOperationAttempt).values(
        hotel_id=task.hotel_id, order_id=task.order_id, task_id=task.id, operation_id=operation_id,
        attempt_number=number, attempt_status=status,
        request_payload_json={**call.request, "attempt_number": number, "external_reference": call.external_reference},
        response_payload_json=outcome.response, error_code=outcome.error_code,
        error_message=None if outcome.succeeded else (outcome.error_message or "failed")[:512],
        via_lookup=outcome.via_lookup, outcome_unknown=outcome.outcome_unknown, started_at=now, finished_at=now,
        created_at=now).returning(OperaOperationAttempt.id))).scalar_one()
    values: dict[str, Any] = {"attempt_count": number, "last_attempt_id": attempt_id, "updated_at": now}
    if not outcome.succeeded:
        values["last_error_message"] = (outcome.error_message or "failed")[:512]
    await transition(session, lifecycles.OPERATION, "attempt_succeeded" if outcome.succeeded else "attempt_failed",
                     model=OperaOperation, id=operation_id, where=(OperaOperation.hotel_id == task.hotel_id,),
                     values=values, status_attr="operation_status")
    await audit.record(session, Entry(
        task.hotel_id, "reservation.operation.attempted", order_id=task.order_id, task_id=task.id,
        operation_id=operation_id,
        after={"attempt_number": number, "attempt_status": status, "error_code": outcome.error_code,
               "via_lookup": outcome.via_lookup}), actor=actor, now=now)


def _backfill_key(payload: dict[str, Any], outcome: Outcome | None) -> tuple[str, str, str] | None:
    """(key type, key, source): the confirmed key first (the agent named the booking), else OPERA's answer."""
    if payload.get("confirmation_number"):
        return "CONFIRMATION_NUMBER", payload["confirmation_number"], "USER_CONFIRMED"
    if payload.get("group_code"):
        return "GROUP_CODE", payload["group_code"], "USER_CONFIRMED"
    for candidate in outcome.business_key_candidates if outcome else ():
        if candidate.get("key_type") in ("CONFIRMATION_NUMBER", "GROUP_CODE") and candidate.get("business_key"):
            return candidate["key_type"], candidate["business_key"], "OPERA_SIMULATION_RESULT"
    return None


async def _backfill(session: AsyncSession, order: Order, payload: dict[str, Any], outcome: Outcome | None, *,
                    now: datetime) -> None:
    """spec §13 / RSV-INV-19: the temporary order becomes ACTIVE with the booking's key, or, when that key is
    already ACTIVE, is merged into that order."""
    found = _backfill_key(payload, outcome)
    if found is None:
        await service.touch_order(session, order.hotel_id, order.id, now)
        return  # nothing to key the order by: it stays TEMPORARY (the agent can end it)
    key_type, key, source = found
    system = AuditActor.system()
    plain = await statements(session)
    previous = await plain.value("SELECT current_setting('lock_timeout')")
    await plain.execute(f"SET LOCAL lock_timeout = '{BACKFILL_LOCK_TIMEOUT}'")
    try:
        try:
            async with session.begin_nested():
                activated = await transition(
                    session, lifecycles.ORDER, "activate", model=Order, id=order.id,
                    where=(Order.hotel_id == order.hotel_id,), status_attr="order_status",
                    values={"order_key_type": key_type, "order_business_key": key, "business_key_source": source,
                            "business_key_backfilled_at": now, "display_name": f"{key_type} {key}",
                            "updated_at": now})
            await audit.record(session, Entry(
                order.hotel_id, "reservation.order.activated", order_id=order.id,
                before={"order_status": "TEMPORARY", "order_key_type": "TEMPORARY"},
                after={"order_status": "ACTIVE", "order_key_type": key_type, "order_business_key": key,
                       "business_key_source": source, "version": activated.version}), actor=system, now=now)
            return
        except IntegrityError as exc:
            if violated_constraint(exc) != ORDER_ACTIVE_KEY_INDEX:
                raise
        await _merge(session, order, key_type, key, now=now)
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise errors.OrderBusy(order_id=str(order.id)) from None
        raise
    finally:
        await plain.execute("SELECT set_config('lock_timeout', %(v)s, true)", {"v": previous})


async def _merge(session: AsyncSession, temporary: Order, key_type: str, key: str, *, now: datetime) -> None:
    async with session.begin_nested():  # NOWAIT: the other order is never waited for (see the module doc)
        target = (await session.scalars(select(Order).where(
            Order.hotel_id == temporary.hotel_id, Order.order_key_type == key_type, Order.order_business_key == key,
            Order.order_status == "ACTIVE").with_for_update(nowait=True)
            .execution_options(populate_existing=True))).one_or_none()
    if target is None:
        raise errors.OrderBusy(order_id=str(temporary.id))  # it was closed in between: try again
    open_ids = [row["id"] for row in await (await statements(session)).all(
        _OPEN_TASKS_SQL, {"h": temporary.hotel_id, "o": temporary.id})]
    if open_ids:
        await service.append_to_queue(session, hotel_id=temporary.hotel_id, task_ids=list(open_ids), target=target,
                                      want=None, now=now)

    def refuse(refusal: Refusal[Order]) -> DomainError:
        return errors.OrderNotOpen(current_status=refusal.status)

    await transition(session, lifecycles.ORDER, "logic_delete", model=Order, id=temporary.id,
                     where=(Order.hotel_id == temporary.hotel_id,), status_attr="order_status", refuse=refuse,
                     values={"logic_deleted_at": now, "logic_deleted_reason": "MERGED_INTO_ACTIVE_ORDER",
                             "merged_into_order_id": target.id, "updated_at": now})
    await audit.record(session, Entry(
        temporary.hotel_id, "reservation.order.merged", order_id=temporary.id, reason="MERGED_INTO_ACTIVE_ORDER",
        before={"order_status": "TEMPORARY"},
        after={"order_status": "LOGIC_DELETED", "merged_into_order_id": target.id,
               "moved_task_ids": [str(t) for t in open_ids], "order_business_key": key}),
        actor=AuditActor.system(), now=now)


async def _end_if_nothing_open(session: AsyncSession, order: Order, *, now: datetime) -> None:
    """A completed cancellation ends its order when nothing else is open (decisions.md: ENDED is the end of
    a booking's life in the system); the key is then free for a new ACTIVE order."""
    still_open = await (await statements(session)).value(_ANY_OPEN_SQL, {"h": order.hotel_id, "o": order.id})
    if still_open or order.order_status not in lifecycles.OPEN_ORDER_STATES:
        await service.touch_order(session, order.hotel_id, order.id, now)
        return
    await service.close_locked(session, order, to="ENDED", reason="CANCEL_BOOKING_COMPLETED", want=None,
                               actor=AuditActor.system(), now=now)
