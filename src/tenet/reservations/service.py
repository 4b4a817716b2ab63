# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Order and task commands of the reservation workflow. Each runs inside the caller's unit of work and never
commits.

Serialisation: the order row is the serialisation point of its queue. Every command that changes the status
of a queue task, appends to a queue or closes an order first locks the order row (`lock_rows`, several in
ascending id order), then re-reads what it decides on. Task changes are conditional UPDATEs (the kernel's
`transition`) on the source states and on the version the caller read (If-Match or `expected_version`,
RSV-INV-17). A draft needs no order lock: it has no queue effect, and a stale "not blocked" is caught by its
version condition (only a move can block a free task, and a move bumps the version).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.iam.principal import Principal
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import Conflict, DomainError, ValidationFailed
from tenet.kernel.http import ExpectedVersion
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.reservations import audit, errors, lifecycles
from tenet.reservations.audit import AuditActor, Entry
from tenet.reservations.cards import validation
from tenet.reservations.cards.provider import PROVIDER, TaskCardFieldDefinitionProvider
from tenet.reservations.keys import UnusableKey, normalize_key
from tenet.reservations.models import CARDS_OF_TYPE, ORDER_ACTIVE_KEY_INDEX, Hotel, Order, Task, TaskCard
from tenet.reservations.permissions import Viewer, visible_sql

_T, _O = "reservation.workflow_reservation_task", "reservation.workflow_reservation_order"
OPEN = lifecycles.OPEN_TASK_STATES


def payload_sha256(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


# --- reads every command starts with -------------------------------------------------------------------------


_VISIBLE_TASK_SQL = f"SELECT hotel_id, order_id FROM {_T} t WHERE t.id = %(id)s AND {visible_sql('t.hotel_id')}"
_VISIBLE_ORDER_SQL = f"SELECT hotel_id FROM {_O} o WHERE o.id = %(id)s AND {visible_sql('o.hotel_id')}"
_VISIBLE_HOTEL_SQL = f"SELECT 1 FROM reservation.hotel h WHERE h.hotel_id = %(h)s AND {visible_sql('h.hotel_id')}"
# The first open queue task before a position, and a parent's status (RSV-INV-10/11).
_BLOCKING_SQL = f"""
    SELECT (SELECT q.id FROM {_T} q WHERE q.hotel_id = %(h)s AND q.order_id = %(o)s AND q.queue_participation
               AND q.task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING') AND q.execution_order < %(pos)s
             ORDER BY q.execution_order LIMIT 1) AS earlier,
           (SELECT p.task_status FROM {_T} p WHERE p.hotel_id = %(h)s AND p.id = %(parent)s) AS parent_status"""
_ACTIVE_KEY_SQL = f"""
    SELECT id FROM {_O} WHERE hotel_id = %(h)s AND order_key_type = %(t)s AND order_business_key = %(k)s
       AND order_status = 'ACTIVE'"""
_OPEN_TASKS_SQL = f"""
    SELECT id FROM {_T} WHERE hotel_id = %(h)s AND order_id = %(o)s AND queue_participation
       AND task_status IN ('PENDING_CONFIRM', 'READY', 'EXECUTING') ORDER BY execution_order LIMIT 20"""
_GRANT_SQL = """
    INSERT INTO reservation.hotel_staff (hotel_id, user_id, granted_at, granted_by)
    VALUES (%(h)s, %(u)s, %(now)s, %(by)s) ON CONFLICT DO NOTHING RETURNING user_id"""
_REVOKE_SQL = "DELETE FROM reservation.hotel_staff WHERE hotel_id = %(h)s AND user_id = %(u)s RETURNING hotel_id"
_REVOKE_ALL_SQL = "DELETE FROM reservation.hotel_staff WHERE user_id = %(u)s RETURNING hotel_id"


async def resolve_task(session: AsyncSession, task_id: int, viewer: Viewer) -> tuple[str, int]:
    """(hotel, order) of a task the caller may see; 404 otherwise."""
    row = await (await statements(session)).one(_VISIBLE_TASK_SQL, {"id": task_id, **viewer.params()})
    if row is None:
        raise errors.TaskNotFound()
    return row["hotel_id"], row["order_id"]


async def resolve_order(session: AsyncSession, order_id: int, viewer: Viewer) -> str:
    row = await (await statements(session)).one(_VISIBLE_ORDER_SQL, {"id": order_id, **viewer.params()})
    if row is None:
        raise errors.OrderNotFound()
    return str(row["hotel_id"])


async def lock_orders(session: AsyncSession, hotel_id: str, order_ids: list[int]) -> dict[int, Order]:
    """THE serialisation point of queues: row locks on the orders, ascending id, held to commit; then the rows
    as they are now."""
    await lock_rows(session, Order, order_ids, where=(Order.hotel_id == hotel_id,))
    rows = (await session.scalars(select(Order).where(Order.hotel_id == hotel_id, Order.id.in_(order_ids))
                                  .execution_options(populate_existing=True))).all()
    return {row.id: row for row in rows}


async def load_task(session: AsyncSession, hotel_id: str, task_id: int) -> Task:
    task = (await session.scalars(select(Task).where(Task.hotel_id == hotel_id, Task.id == task_id)
                                  .execution_options(populate_existing=True))).one()
    return task


async def load_card(session: AsyncSession, hotel_id: str, task_id: int) -> TaskCard:
    return (await session.scalars(select(TaskCard).where(TaskCard.hotel_id == hotel_id, TaskCard.task_id == task_id)
                                  .execution_options(populate_existing=True))).one()


async def blocked_by(session: AsyncSession, task: Task) -> tuple[str | None, int | None]:
    """RSV-INV-10/11 for one task: the earliest open queue task before it, else an unfinished parent."""
    if not task.queue_participation or task.task_status not in OPEN:
        return None, None
    row = await (await statements(session)).one(_BLOCKING_SQL, {
        "h": task.hotel_id, "o": task.order_id, "pos": task.execution_order, "parent": task.parent_task_id})
    assert row is not None
    if row["earlier"] is not None:
        return "EARLIER_TASK", row["earlier"]
    if task.blocked_until_parent_completed and row["parent_status"] != "COMPLETED":
        return "PARENT", task.parent_task_id
    return None, None


async def refuse_if_blocked(session: AsyncSession, task: Task) -> None:
    reason, blocking = await blocked_by(session, task)
    if reason is not None:
        raise errors.TaskBlocked(blocked_reason=reason, blocking_task_id=str(blocking))


def task_refusal(want: ExpectedVersion | None,
                 state_error: type[DomainError]) -> Callable[[Refusal[Task]], DomainError]:
    def refuse(refusal: Refusal[Task]) -> DomainError:
        if refusal.reason == "missing":
            return errors.TaskNotFound()
        if refusal.reason == "version" and want is not None:
            return want.stale(refusal.version)
        return state_error(current_status=refusal.status)

    return refuse


def check_version(want: ExpectedVersion | None, current: int) -> None:
    """The friendly early answer (before validating a payload against a card the caller has not seen); the
    conditional UPDATE decides races."""
    if want is not None and want.value != current:
        raise want.stale(current)


async def touch_order(session: AsyncSession, hotel_id: str, order_id: int, now: datetime) -> None:
    """The order list is sorted by activity: any change of the order or its queue moves it up."""
    await session.execute(update(Order).where(Order.hotel_id == hotel_id, Order.id == order_id).values(updated_at=now))


# --- task cards ----------------------------------------------------------------------------------------------


async def save_draft(session: AsyncSession, *, task_id: int, payload: dict[str, Any], want: ExpectedVersion,
                     principal: Principal, now: datetime,
                     provider: TaskCardFieldDefinitionProvider = PROVIDER) -> None:
    viewer = Viewer(principal)
    hotel_id, order_id = await resolve_task(session, task_id, viewer)
    task = await load_task(session, hotel_id, task_id)
    if task.task_status != "PENDING_CONFIRM" or task.task_card_type == "MESSAGE_NOTIFICATION":
        raise errors.TaskNotEditable(current_status=task.task_status)
    check_version(want, task.version)
    await refuse_if_blocked(session, task)
    definition = provider.definition(task.task_card_type)
    values, issues = validation.validate(definition, payload, mode="draft")
    if issues:
        raise errors.TaskCardPayloadInvalid(errors=[issue.as_dict() for issue in issues])
    card = await load_card(session, hotel_id, task_id)
    # (read before the writes: the ORM refreshes these objects from the UPDATEs' results)
    before = {"version": task.version, "field_contract_version": card.field_contract_version}
    previous_draft = card.draft_payload_json
    moved = await transition(session, lifecycles.TASK, "save_draft", model=Task, id=task_id,
                             where=(Task.hotel_id == hotel_id,), values={"updated_at": now},
                             expected_version=want.value, refuse=task_refusal(want, errors.TaskNotEditable),
                             status_attr="task_status")
    await session.execute(update(TaskCard).where(TaskCard.hotel_id == hotel_id, TaskCard.task_id == task_id).values(
        draft_payload_json=values, draft_updated_by=viewer.user_id, draft_updated_at=now,
        field_contract_version=definition.field_contract_version, updated_at=now))
    await audit.record(session, Entry(
        hotel_id, "reservation.task.draft_saved", order_id=order_id, task_id=task_id, before=before,
        after={"version": moved.version, "field_contract_version": definition.field_contract_version,
               "changed_fields": validation.changed_fields(previous_draft, values),
               "payload_sha256": payload_sha256(values)}), actor=AuditActor.of(principal), now=now)


async def confirm_task(session: AsyncSession, *, task_id: int, payload: dict[str, Any], want: ExpectedVersion,
                       principal: Principal, now: datetime,
                       provider: TaskCardFieldDefinitionProvider = PROVIDER) -> None:
    """PENDING_CONFIRM -> READY with the card's confirmed payload (what OPERA will read), who and when."""
    viewer = Viewer(principal)
    hotel_id, order_id = await resolve_task(session, task_id, viewer)
    await lock_orders(session, hotel_id, [order_id])
    task = await load_task(session, hotel_id, task_id)
    if task.order_id != order_id:
        raise Conflict("The task moved to another order meanwhile; read it again", current_version=task.version)
    if task.task_status != "PENDING_CONFIRM" or not task.queue_participation:
        raise errors.TaskNotEditable(current_status=task.task_status)
    check_version(want, task.version)
    await refuse_if_blocked(session, task)
    definition = provider.definition(task.task_card_type)
    card = await load_card(session, hotel_id, task_id)
    prefill, _ = validation.prefill(definition, card.ai_payload_json)
    values, issues = validation.validate(definition, payload, mode="confirm", prefill=prefill)
    if issues:
        raise errors.TaskCardPayloadInvalid(errors=[issue.as_dict() for issue in issues])
    before = {"task_status": task.task_status, "version": task.version}
    moved = await transition(session, lifecycles.TASK, "confirm", model=Task, id=task_id,
                             where=(Task.hotel_id == hotel_id,), values={"confirmed_at": now, "updated_at": now},
                             expected_version=want.value, refuse=task_refusal(want, errors.TaskNotEditable),
                             status_attr="task_status")
    await session.execute(update(TaskCard).where(TaskCard.hotel_id == hotel_id, TaskCard.task_id == task_id).values(
        confirmed_payload_json=values, confirmed_by=viewer.user_id, confirmed_at=now,
        field_contract_version=definition.field_contract_version, updated_at=now))
    await touch_order(session, hotel_id, order_id, now)
    await audit.record(session, Entry(
        hotel_id, "reservation.task.confirmed", order_id=order_id, task_id=task_id, before=before,
        after={"task_status": moved.task_status, "version": moved.version, "payload_sha256": payload_sha256(values),
               "changed_fields": validation.changed_fields(prefill, values)}),
        actor=AuditActor.of(principal), now=now)


async def convert_task(session: AsyncSession, *, task_id: int, task_card_type: str, want: ExpectedVersion,
                       principal: Principal, now: datetime,
                       provider: TaskCardFieldDefinitionProvider = PROVIDER) -> None:
    """A manual review becomes a typed task (spec §3.2 "waiting for manual conversion"): the task and its card
    take the card type (and its system task type); the draft is cleared; the AI item stays."""
    viewer = Viewer(principal)
    hotel_id, order_id = await resolve_task(session, task_id, viewer)
    await lock_orders(session, hotel_id, [order_id])
    task = await load_task(session, hotel_id, task_id)
    if task.task_status != "PENDING_CONFIRM":
        raise errors.TaskNotEditable(current_status=task.task_status)
    if task.system_task_type != "MANUAL_REVIEW":
        raise errors.TaskNotConvertible(system_task_type=task.system_task_type)
    check_version(want, task.version)
    await refuse_if_blocked(session, task)
    system_task_type = next(t for t, cards in CARDS_OF_TYPE.items() if task_card_type in cards)
    version = provider.current_version(task_card_type)
    before = {"system_task_type": task.system_task_type, "task_card_type": task.task_card_type,
              "version": task.version}
    moved = await transition(session, lifecycles.TASK, "convert", model=Task, id=task_id,
                             where=(Task.hotel_id == hotel_id, Task.system_task_type == "MANUAL_REVIEW"),
                             values={"system_task_type": system_task_type, "task_card_type": task_card_type,
                                     "updated_at": now},
                             expected_version=want.value, refuse=task_refusal(want, errors.TaskNotEditable),
                             status_attr="task_status")
    await session.execute(update(TaskCard).where(TaskCard.hotel_id == hotel_id, TaskCard.task_id == task_id).values(
        task_card_type=task_card_type, field_contract_version=version, draft_payload_json=None,
        draft_updated_by=None, draft_updated_at=None, updated_at=now))
    await touch_order(session, hotel_id, order_id, now)
    await audit.record(session, Entry(
        hotel_id, "reservation.task.converted", order_id=order_id, task_id=task_id, before=before,
        after={"system_task_type": system_task_type, "task_card_type": task_card_type, "version": moved.version}),
        actor=AuditActor.of(principal), now=now)


async def abandon_task(session: AsyncSession, *, task_id: int, reason: str, want: ExpectedVersion,
                       principal: Principal, now: datetime) -> None:
    """An open queue task ends FAILED by a person's decision, with a reason (never automatically: an OPERA
    failure leaves the task EXECUTING, spec §12). Nothing is written to OPERA; the queue moves on."""
    viewer = Viewer(principal)
    hotel_id, order_id = await resolve_task(session, task_id, viewer)
    await lock_orders(session, hotel_id, [order_id])
    task = await load_task(session, hotel_id, task_id)
    if task.task_status not in OPEN or not task.queue_participation:
        raise errors.TaskAlreadyFinished(current_status=task.task_status)
    before = {"task_status": task.task_status, "version": task.version}
    moved = await transition(session, lifecycles.TASK, "abandon", model=Task, id=task_id,
                             where=(Task.hotel_id == hotel_id,),
                             values={"failed_at": now, "last_failure_reason": reason, "updated_at": now},
                             expected_version=want.value, refuse=task_refusal(want, errors.TaskAlreadyFinished),
                             status_attr="task_status")
    await touch_order(session, hotel_id, order_id, now)
    await audit.record(session, Entry(
        hotel_id, "reservation.task.abandoned", order_id=order_id, task_id=task_id, reason=reason, before=before,
        after={"task_status": moved.task_status, "version": moved.version}),
        actor=AuditActor.of(principal), now=now)


# --- moves ---------------------------------------------------------------------------------------------------


async def append_to_queue(session: AsyncSession, *, hotel_id: str, task_ids: list[int], target: Order,
                          want: ExpectedVersion | None, now: datetime) -> list[Task]:
    """Move PENDING_CONFIRM tasks to the end of `target`'s queue, in the given order (the caller holds both
    orders' locks). Positions come from the target's counter, so a moved task never overtakes."""
    start = (await session.execute(
        update(Order).where(Order.hotel_id == hotel_id, Order.id == target.id)
        .values(last_execution_order=Order.last_execution_order + len(task_ids), updated_at=now)
        .returning(Order.last_execution_order))).scalar_one() - len(task_ids)
    moved = []
    for offset, task_id in enumerate(task_ids, start=1):
        moved.append(await transition(
            session, lifecycles.TASK, "move", model=Task, id=task_id, where=(Task.hotel_id == hotel_id,),
            values={"order_id": target.id, "execution_order": start + offset, "updated_at": now},
            expected_version=None if want is None else want.value,
            refuse=task_refusal(want, errors.TaskNotMovable), status_attr="task_status"))
    return moved


async def move_task(session: AsyncSession, *, task_id: int, target_order_id: int, want: ExpectedVersion,
                    principal: Principal, now: datetime) -> None:
    viewer = Viewer(principal)
    hotel_id, source_id = await resolve_task(session, task_id, viewer)
    target_hotel = await resolve_order(session, target_order_id, viewer)
    if target_hotel != hotel_id:
        raise errors.TaskMoveCrossHotel()
    if target_order_id == source_id:
        task = await load_task(session, hotel_id, task_id)
        check_version(want, task.version)
        return  # already there: nothing to do
    orders = await lock_orders(session, hotel_id, [source_id, target_order_id])
    task = await load_task(session, hotel_id, task_id)
    if task.order_id != source_id:
        raise Conflict("The task moved to another order meanwhile; read it again", current_version=task.version)
    if task.task_status != "PENDING_CONFIRM":
        raise errors.TaskNotMovable(current_status=task.task_status)
    check_version(want, task.version)
    target = orders[target_order_id]
    if target.order_status not in lifecycles.OPEN_ORDER_STATES:
        raise errors.OrderNotAcceptingTasks(order_status=target.order_status)
    before = {"order_id": source_id, "execution_order": task.execution_order, "version": task.version}
    (moved,) = await append_to_queue(session, hotel_id=hotel_id, task_ids=[task_id], target=target, want=want,
                                     now=now)
    entries = [Entry(hotel_id, "reservation.task.moved", order_id=target_order_id, task_id=task_id,
                     before=before,
                     after={"order_id": target_order_id, "execution_order": moved.execution_order,
                            "version": moved.version})]
    source = orders[source_id]
    remaining = await session.scalar(select(func.count()).select_from(Task).where(Task.hotel_id == hotel_id,
                                                                                   Task.order_id == source_id))
    if source.order_status == "TEMPORARY" and remaining == 0:
        # An emptied temporary order is closed at once (decisions.md): an empty container only confuses.
        await transition(session, lifecycles.ORDER, "logic_delete", model=Order, id=source_id,
                         where=(Order.hotel_id == hotel_id,), status_attr="order_status",
                         values={"logic_deleted_at": now, "logic_deleted_reason": "EMPTIED_BY_MOVE", "updated_at": now})
        entries.append(Entry(hotel_id, "reservation.order.logic_deleted", order_id=source_id,
                             reason="EMPTIED_BY_MOVE", before={"order_status": "TEMPORARY"},
                             after={"order_status": "LOGIC_DELETED"}))
    else:
        await touch_order(session, hotel_id, source_id, now)
    await audit.record(session, *entries, actor=AuditActor.of(principal), now=now)


# --- orders --------------------------------------------------------------------------------------------------


async def create_order(session: AsyncSession, *, hotel_id: str, key_type: str, business_key: str,
                       display_name: str | None, principal: Principal, now: datetime) -> int:
    """An ACTIVE order an agent knows of (a booking the system has not seen), so that misfiled tasks have
    somewhere to go. RSV-INV-07: the partial unique index decides races; the pre-check only names the order."""
    viewer = Viewer(principal)
    if await (await statements(session)).one(_VISIBLE_HOTEL_SQL, {"h": hotel_id, **viewer.params()}) is None:
        raise errors.HotelNotFound()
    try:
        key = normalize_key(business_key)
    except UnusableKey:
        raise ValidationFailed(errors=[{"loc": ["body", "order_business_key"], "msg": "not a usable business key",
                                        "type": "business_key"}]) from None
    existing = await (await statements(session)).value(_ACTIVE_KEY_SQL, {"h": hotel_id, "t": key_type, "k": key})
    if existing is not None:
        raise errors.OrderKeyAlreadyActive(order_id=str(existing))
    order = Order(hotel_id=hotel_id, order_key_type=key_type, order_business_key=key, order_status="ACTIVE",
                  business_key_source="USER_CONFIRMED", display_name=display_name or f"{key_type} {key}",
                  last_execution_order=0, version=1, created_at=now, updated_at=now)
    await add_unique(session, order, on_violation={ORDER_ACTIVE_KEY_INDEX: errors.OrderKeyAlreadyActive})
    await audit.record(session, Entry(
        hotel_id, "reservation.order.created", order_id=order.id,
        after={"order_status": "ACTIVE", "order_key_type": key_type, "order_business_key": key,
               "business_key_source": "USER_CONFIRMED"}), actor=AuditActor.of(principal), now=now)
    return order.id


async def close_order(session: AsyncSession, *, order_id: int, to: str, reason: str | None,
                      want: ExpectedVersion | None, principal: Principal, now: datetime) -> None:
    """end (-> ENDED) or logic_delete (-> LOGIC_DELETED), by a person."""
    viewer = Viewer(principal)
    hotel_id = await resolve_order(session, order_id, viewer)
    order = (await lock_orders(session, hotel_id, [order_id]))[order_id]
    await close_locked(session, order, to=to, reason=reason, want=want, actor=AuditActor.of(principal),
                       now=now)


async def close_locked(session: AsyncSession, order: Order, *, to: str, reason: str | None,
                       want: ExpectedVersion | None, actor: AuditActor, now: datetime) -> Order:
    """Close an order whose row lock the caller holds; only with no open task left (RSV-INV-09)."""
    if order.order_status not in lifecycles.OPEN_ORDER_STATES:
        raise errors.OrderNotOpen(current_status=order.order_status)
    check_version(want, order.version)
    open_tasks = [row["id"] for row in await (await statements(session)).all(
        _OPEN_TASKS_SQL, {"h": order.hotel_id, "o": order.id})]
    if open_tasks:
        raise errors.OrderHasUnfinishedTasks(open_task_ids=[str(t) for t in open_tasks])
    before = {"order_status": order.order_status, "version": order.version}
    values: dict[str, Any] = {"updated_at": now}
    if to == "ENDED":
        values["ended_at"] = now
    else:
        values.update(logic_deleted_at=now, logic_deleted_reason=reason)

    def refuse(refusal: Refusal[Order]) -> DomainError:
        if refusal.reason == "version" and want is not None:
            return want.stale(refusal.version)
        return errors.OrderNotOpen(current_status=refusal.status)

    closed = await transition(session, lifecycles.ORDER, "end" if to == "ENDED" else "logic_delete", model=Order,
                              id=order.id, where=(Order.hotel_id == order.hotel_id,), values=values,
                              expected_version=None if want is None else want.value, refuse=refuse,
                              status_attr="order_status")
    action = "reservation.order.ended" if to == "ENDED" else "reservation.order.logic_deleted"
    await audit.record(session, Entry(order.hotel_id, action, order_id=order.id, reason=reason, before=before,
                                      after={"order_status": to, "version": closed.version}), actor=actor, now=now)
    return closed


# --- hotels --------------------------------------------------------------------------------------------------


async def register_hotel(session: AsyncSession, *, hotel_id: str, display_name: str | None, principal: Principal,
                         now: datetime) -> Hotel:
    hotel = Hotel(hotel_id=hotel_id, display_name=display_name, created_at=now, updated_at=now)
    await add_unique(session, hotel, on_violation={"pk_hotel": lambda: errors.HotelAlreadyExists(hotel_id=hotel_id)})
    await audit.record(session, Entry(hotel_id, "reservation.hotel.registered", after={"hotel_id": hotel_id}),
                       actor=AuditActor.of(principal), now=now)
    return hotel


async def grant_staff(session: AsyncSession, *, hotel_id: str, user_id: uuid.UUID, principal: Principal,
                      now: datetime) -> None:
    """The account works this hotel's queue from now on (idempotent). The account is share-locked and must
    be active, so a concurrent deletion either removes this grant too or finds nothing to remove."""
    viewer = Viewer(principal)
    if await session.get(Hotel, hotel_id) is None:
        raise errors.HotelNotFound()
    await iam_service.require_active_accounts(session, [user_id])
    granted = await (await statements(session)).one(_GRANT_SQL, {"h": hotel_id, "u": user_id, "now": now,
                                                                "by": viewer.user_id})
    if granted is not None:
        await audit.record(session, Entry(hotel_id, "reservation.hotel.staff_granted", after={"user_id": user_id}),
                           actor=AuditActor.of(principal), now=now)


async def revoke_staff(session: AsyncSession, *, hotel_id: str, user_id: uuid.UUID, principal: Principal,
                       now: datetime) -> None:
    revoked = await (await statements(session)).one(_REVOKE_SQL, {"h": hotel_id, "u": user_id})
    if revoked is None:
        raise errors.HotelStaffNotFound()
    await audit.record(session, Entry(hotel_id, "reservation.hotel.staff_revoked", before={"user_id": user_id}),
                       actor=AuditActor.of(principal), now=now)


async def remove_deleted_account(session: AsyncSession, *, user_id: uuid.UUID, actor: AuditActor,
                                 now: datetime) -> None:
    """identity's AccountDeleted (the account row is locked FOR UPDATE): the account's assignments end in the
    same transaction (RSV-INV-21). Never refuses the deletion; history keeps the account's id."""
    hotels = [row["hotel_id"] for row in await (await statements(session)).all(_REVOKE_ALL_SQL, {"u": user_id})]
    await audit.record(session, *(Entry(hotel_id, "reservation.hotel.staff_revoked", reason="ACCOUNT_DELETED",
                                        before={"user_id": user_id}) for hotel_id in sorted(hotels)),
                       actor=actor, now=now)
