# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Reads of the reservation workflow: batches, orders, tasks, operations, hotels, staff and the audit log.

Each function takes a `kernel.reads.Runner` first: the transaction-free read path for a GET, or a command's
unit of work (`kernel.statements`), through which the command's route answers, so a POST answers what the GET
of the same thing answers (and reads its own writes). Each answer is one statement, with the caller's
visible-hotel rule inside it (permissions.visible_sql): a row of an invisible hotel is the same 404 as a
missing one, and the check and the rows come from one snapshot.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tenet.kernel.errors import ValidationFailed
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner
from tenet.reservations import errors, views
from tenet.reservations.permissions import Viewer, visible_sql

S = "reservation"
_T, _O = f"{S}.workflow_reservation_task", f"{S}.workflow_reservation_order"
_OPEN = "('PENDING_CONFIRM', 'READY', 'EXECUTING')"

BATCH_BY_KEY_SQL = f"""
    SELECT id, hotel_id, source_message_id, request_id, request_payload_sha256, batch_idempotency_key, item_count,
           response_items_json
      FROM {S}.workflow_reservation_ai_batch WHERE hotel_id = %(hotel_id)s AND batch_idempotency_key = %(key)s
"""

BATCH_SQL = f"""
    SELECT b.id, b.hotel_id, b.source_message_id, b.request_id, b.client_id, b.received_at, b.item_count,
           b.request_payload_sha256, b.batch_idempotency_key, b.ai_contract_version, b.response_items_json
      FROM {S}.workflow_reservation_ai_batch b WHERE b.id = %(batch_id)s AND {visible_sql("b.hotel_id")}
"""

# The columns of a task as the queue shows it (views.task_summary), its parent's status and the first open
# queue position of its order (for `blocked`).
_TASK_COLUMNS = """
    t.id AS task_id, t.hotel_id, t.order_id, t.system_task_type, t.task_card_type, t.task_subtype, t.result_type,
    t.ai_task_type, t.task_status, t.queue_participation, t.execution_order, t.parent_task_id,
    t.parent_source_event_index, t.linked_task_group_id, t.blocked_until_parent_completed, t.manual_review,
    t.manual_reason_code, t.last_failure_reason, t.source_message_id, t.ai_transition_id, t.confirmed_at,
    t.completed_at, t.failed_at, t.version, t.created_at, t.updated_at, p.task_status AS parent_status"""

TASK_SQL = f"""
    SELECT {_TASK_COLUMNS},
           fo.id AS first_open_id, fo.execution_order AS first_open_order,
           o.order_status, o.order_key_type, o.order_business_key, o.temporary_order_code,
           o.display_name AS order_display_name, o.version AS order_version,
           c.id AS card_id, c.field_contract_version, c.ai_payload_json AS card_ai_payload_json,
           c.draft_payload_json, c.draft_updated_by, c.draft_updated_at, c.confirmed_payload_json, c.confirmed_by,
           c.confirmed_at AS card_confirmed_at, c.updated_at AS card_updated_at,
           tr.system_process_category, tr.route_code, tr.adapter_error_code, tr.adapter_error_message,
           tr.item_payload_sha256,
           ops.total AS ops_total, ops.succeeded AS ops_succeeded, ops.failed AS ops_failed,
           ops.pending AS ops_pending, ops.failed_operation_id
      FROM {_T} t
      JOIN {_O} o ON o.hotel_id = t.hotel_id AND o.id = t.order_id
      JOIN {S}.workflow_reservation_task_card c ON c.hotel_id = t.hotel_id AND c.task_id = t.id
      JOIN {S}.workflow_reservation_ai_transition tr ON tr.hotel_id = t.hotel_id AND tr.id = t.ai_transition_id
      LEFT JOIN {_T} p ON p.hotel_id = t.hotel_id AND p.id = t.parent_task_id
      LEFT JOIN LATERAL (SELECT q.id, q.execution_order FROM {_T} q
                          WHERE q.hotel_id = t.hotel_id AND q.order_id = t.order_id AND q.queue_participation
                            AND q.task_status IN {_OPEN}
                          ORDER BY q.execution_order LIMIT 1) fo ON true
      LEFT JOIN LATERAL (SELECT count(*) AS total,
                                count(*) FILTER (WHERE x.operation_status = 'SUCCEEDED') AS succeeded,
                                count(*) FILTER (WHERE x.operation_status = 'FAILED') AS failed,
                                count(*) FILTER (WHERE x.operation_status = 'PENDING') AS pending,
                                min(x.id) FILTER (WHERE x.operation_status = 'FAILED') AS failed_operation_id
                           FROM {S}.workflow_reservation_opera_operation x
                          WHERE x.hotel_id = t.hotel_id AND x.task_id = t.id) ops ON true
     WHERE t.id = %(task_id)s AND {visible_sql("t.hotel_id")}
"""

_ORDER_COLUMNS = """
    o.id, o.hotel_id, o.order_key_type, o.order_business_key, o.temporary_order_code, o.order_status,
    o.business_key_source, o.business_key_backfilled_at, o.display_name, o.source_message_id,
    o.created_from_task_id, o.merged_into_order_id, o.ended_at, o.logic_deleted_at, o.logic_deleted_reason,
    o.version, o.created_at, o.updated_at"""

_COUNTS = f"""
    LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE k.task_status = 'PENDING_CONFIRM') AS pending_confirm,
               count(*) FILTER (WHERE k.task_status = 'READY') AS ready,
               count(*) FILTER (WHERE k.task_status = 'EXECUTING') AS executing,
               count(*) FILTER (WHERE k.task_status = 'COMPLETED') AS completed,
               count(*) FILTER (WHERE k.task_status = 'FAILED') AS failed
          FROM {_T} k WHERE k.hotel_id = o.hotel_id AND k.order_id = o.id) cnt ON true
    LEFT JOIN LATERAL (
        SELECT q.id AS next_task_id, q.execution_order AS first_open_order FROM {_T} q
         WHERE q.hotel_id = o.hotel_id AND q.order_id = o.id AND q.queue_participation AND q.task_status IN {_OPEN}
         ORDER BY q.execution_order LIMIT 1) nxt ON true"""

ORDER_TASK_PAGE = 200
# The order, its counts and first open task, and one page of its tasks in queue order (LEFT JOIN: an order
# without tasks is one row with NULL task columns; no row at all is 404).
_ORDER_FIELDS = ("id", "hotel_id", "order_key_type", "order_business_key", "temporary_order_code", "order_status",
                 "business_key_source", "business_key_backfilled_at", "display_name", "source_message_id",
                 "created_from_task_id", "merged_into_order_id", "ended_at", "logic_deleted_at",
                 "logic_deleted_reason", "version", "created_at", "updated_at")
ORDER_SQL = f"""
    WITH o AS (SELECT * FROM {_O} o WHERE o.id = %(order_id)s AND {visible_sql("o.hotel_id")})
    SELECT {", ".join(f"o.{name} AS o_{name}" for name in _ORDER_FIELDS)}, cnt.*, nxt.next_task_id,
           nxt.next_task_id AS first_open_id, nxt.first_open_order, {_TASK_COLUMNS}
      FROM o {_COUNTS}
      LEFT JOIN LATERAL (SELECT * FROM {_T} t WHERE t.hotel_id = o.hotel_id AND t.order_id = o.id
                            AND t.execution_order > %(after)s
                          ORDER BY t.execution_order LIMIT %(limit)s) t ON true
      LEFT JOIN {_T} p ON p.hotel_id = t.hotel_id AND p.id = t.parent_task_id
     ORDER BY t.execution_order
"""

ORDERS_KEYSET = SqlKeyset(("o.updated_at", "o.id"), (datetime, int), descending=True)
# One index range per status (ix_rsv_order_status_updated), merged: PostgreSQL cannot read
# `status = ANY(..) ORDER BY updated_at` from one index in order.
_ORDERS_BRANCH = f"""
    (SELECT o.* FROM {_O} o WHERE o.hotel_id = h.hotel_id AND o.order_status = %({{name}})s AND {{after}}
                              AND {{key_filter}}
      ORDER BY o.updated_at DESC, o.id DESC LIMIT %(limit)s)"""
ORDERS_SQL = f"""
    SELECT h.hotel_id AS visible_hotel, {_ORDER_COLUMNS}, cnt.*, nxt.next_task_id
      FROM {S}.hotel h
      LEFT JOIN LATERAL (
           SELECT * FROM ({{branches}}) u ORDER BY u.updated_at DESC, u.id DESC LIMIT %(limit)s) o ON true
      {_COUNTS}
     WHERE h.hotel_id = %(hotel_id)s AND {visible_sql("h.hotel_id")}
     ORDER BY o.updated_at DESC, o.id DESC
"""

OPERATIONS_SQL = f"""
    SELECT k.task_status, x.id, x.task_id, x.order_id, x.operation_sequence, x.operation_code, x.operation_name,
           x.operation_status, x.adapter_name, x.external_reference, x.request_payload_json, x.attempt_count,
           x.last_attempt_id, x.last_error_message, x.created_at, x.updated_at,
           coalesce(a.attempts, '[]'::json) AS attempts
      FROM {_T} k
      LEFT JOIN {S}.workflow_reservation_opera_operation x ON x.hotel_id = k.hotel_id AND x.task_id = k.id
      LEFT JOIN LATERAL (
           SELECT json_agg(json_build_object(
                    'id', y.id, 'attempt_number', y.attempt_number, 'attempt_status', y.attempt_status,
                    'request_payload', y.request_payload_json, 'response_payload', y.response_payload_json,
                    'error_code', y.error_code, 'error_message', y.error_message, 'via_lookup', y.via_lookup,
                    'outcome_unknown', y.outcome_unknown, 'started_at', y.started_at, 'finished_at', y.finished_at)
                    ORDER BY y.attempt_number) AS attempts
             FROM {S}.workflow_reservation_opera_operation_attempt y
            WHERE y.hotel_id = x.hotel_id AND y.operation_id = x.id) a ON true
     WHERE k.id = %(task_id)s AND {visible_sql("k.hotel_id")}
     ORDER BY x.operation_sequence
"""


def _viewer(viewer: Viewer, **params: Any) -> dict[str, Any]:
    return {**viewer.params(), **params}


async def batch_by_key(reads: Runner, *, hotel_id: str, key: str) -> Row | None:
    return await reads.one(BATCH_BY_KEY_SQL, {"hotel_id": hotel_id, "key": key})


async def batch(reads: Runner, *, batch_id: int, viewer: Viewer) -> Row:
    row = await reads.one(BATCH_SQL, _viewer(viewer, batch_id=batch_id))
    if row is None:
        raise errors.AiBatchNotFound()
    return row


async def task(reads: Runner, *, task_id: int, viewer: Viewer) -> dict[str, Any]:
    row = await reads.one(TASK_SQL, _viewer(viewer, task_id=task_id))
    if row is None:
        raise errors.TaskNotFound()
    return views.task_read(row, viewer)


async def operations(reads: Runner, *, task_id: int, viewer: Viewer) -> list[dict[str, Any]]:
    rows = await reads.all(OPERATIONS_SQL, _viewer(viewer, task_id=task_id))
    if not rows:
        raise errors.TaskNotFound()
    return [views.operation_read(row, viewer) for row in rows if row["id"] is not None]


def _order(row: Row, prefix: str = "") -> dict[str, Any]:
    return {**{key: row[prefix + key] for key in _ORDER_FIELDS}, "next_task_id": row["next_task_id"],
            "task_counts": {key: row[key] for key in ("pending_confirm", "ready", "executing", "completed", "failed")}}


async def order(reads: Runner, *, order_id: int, viewer: Viewer, after: int = 0,
                limit: int = ORDER_TASK_PAGE) -> dict[str, Any]:
    rows = await reads.all(ORDER_SQL, _viewer(viewer, order_id=order_id, after=after, limit=limit + 1))
    if not rows:
        raise errors.OrderNotFound()
    tasks = [row for row in rows if row["task_id"] is not None]
    more = len(tasks) > limit
    tasks = tasks[:limit]
    return {**_order(rows[0], "o_"), "tasks": [views.task_summary(row, viewer) for row in tasks],
            "tasks_next_cursor": str(tasks[-1]["execution_order"]) if more else None}


async def orders(reads: Runner, *, hotel_id: str, statuses: list[str], business_key: str | None, viewer: Viewer,
                 page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    after, params = ORDERS_KEYSET.after(page)
    key_filter = "TRUE" if business_key is None else \
        "(o.order_business_key = %(business_key)s OR o.temporary_order_code = %(business_key)s)"
    names = {f"status_{i}": status for i, status in enumerate(statuses)}
    branches = " UNION ALL ".join(_ORDERS_BRANCH.format(name=name, after=after, key_filter=key_filter)
                                  for name in names)
    rows = await reads.all(ORDERS_SQL.format(branches=branches), _viewer(
        viewer, hotel_id=hotel_id, limit=ORDERS_KEYSET.fetch_limit(page), business_key=business_key, **names,
        **params))
    if not rows:
        raise errors.HotelNotFound()
    found = [row for row in rows if row["id"] is not None]
    items, cursor = ORDERS_KEYSET.page(found, page, key=lambda r: (r["updated_at"], r["id"]))
    return [_order(row) for row in items], cursor


# --- hotels, staff, audit ------------------------------------------------------------------------------------

HOTELS_KEYSET = SqlKeyset(("h.hotel_id",), (str,))
_HOTEL_COLUMNS = """
    h.hotel_id, h.display_name, h.created_at,
    EXISTS (SELECT 1 FROM reservation.hotel_staff s WHERE s.hotel_id = h.hotel_id
               AND s.user_id = %(v_user)s) AS assigned"""
HOTELS_SQL = f"""
    SELECT {_HOTEL_COLUMNS}
      FROM reservation.hotel h
     WHERE {visible_sql("h.hotel_id")} AND {{after}}
     ORDER BY {{order}} LIMIT %(limit)s
"""
HOTEL_SQL = f"""
    SELECT {_HOTEL_COLUMNS} FROM reservation.hotel h WHERE h.hotel_id = %(hotel_id)s AND {visible_sql("h.hotel_id")}
"""

STAFF_KEYSET = SqlKeyset(("s.granted_at", "s.user_id"), (datetime, uuid.UUID))
STAFF_SQL = """
    WITH h AS (SELECT hotel_id FROM reservation.hotel WHERE hotel_id = %(hotel_id)s)
    SELECT h.hotel_id AS hotel, s.* FROM h
      LEFT JOIN LATERAL (
           SELECT s.hotel_id, s.user_id, u.display_name, u.email, s.granted_at, s.granted_by
             FROM reservation.hotel_staff s JOIN iam.user_account u ON u.id = s.user_id
            WHERE s.hotel_id = h.hotel_id AND {after}
            ORDER BY {order} LIMIT %(limit)s) s ON true
     ORDER BY s.granted_at, s.user_id
"""

AUDIT_KEYSET = SqlKeyset(("a.occurred_at", "a.id"), (datetime, int), descending=True)
AUDIT_SQL = f"""
    WITH scope AS (
        SELECT h.hotel_id FROM reservation.hotel h WHERE h.hotel_id = ({{hotel}}) AND {visible_sql("h.hotel_id")})
    SELECT scope.hotel_id AS visible_hotel, a.* FROM scope
      LEFT JOIN LATERAL (
           SELECT a.id, a.hotel_id, a.order_id, a.task_id, a.operation_id, a.batch_id, a.actor_type, a.actor_id,
                  a.action, a.reason, a.before_snapshot_json AS before_snapshot,
                  a.after_snapshot_json AS after_snapshot, a.request_id, a.occurred_at
             FROM reservation.workflow_reservation_audit_log a
            WHERE a.hotel_id = scope.hotel_id AND {{filters}} AND {{after}}
            ORDER BY {{order}} LIMIT %(limit)s) a ON true
     ORDER BY a.occurred_at DESC, a.id DESC
"""


async def hotels(reads: Runner, *, viewer: Viewer, page: PageParams) -> tuple[list[Any], str | None]:
    after, params = HOTELS_KEYSET.after(page)
    rows = await reads.all(HOTELS_SQL.format(after=after, order=HOTELS_KEYSET.order_by),
                           {**viewer.params(), "limit": HOTELS_KEYSET.fetch_limit(page), **params})
    return HOTELS_KEYSET.page(rows, page, key=lambda r: (r["hotel_id"],))


async def hotel(reads: Runner, *, hotel_id: str, viewer: Viewer) -> Row:
    """One hotel as GET /hotels lists it (a registration answers it)."""
    row = await reads.one(HOTEL_SQL, {**viewer.params(), "hotel_id": hotel_id})
    if row is None:
        raise errors.HotelNotFound()
    return row


async def staff(reads: Runner, *, hotel_id: str, page: PageParams) -> tuple[list[Any], str | None]:
    after, params = STAFF_KEYSET.after(page)
    rows = await reads.all(STAFF_SQL.format(after=after, order=STAFF_KEYSET.order_by),
                           {"hotel_id": hotel_id, "limit": STAFF_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.HotelNotFound()
    found = [row for row in rows if row["user_id"] is not None]
    return STAFF_KEYSET.page(found, page, key=lambda r: (r["granted_at"], r["user_id"]))


async def audit_logs(reads: Runner, *, viewer: Viewer, hotel_id: str | None, order_id: int | None,
                     task_id: int | None, action: str | None, page: PageParams) -> tuple[list[Any], str | None]:
    """Newest first. The hotel comes from `hotel_id`, else from the order or task named (404 when invisible)."""
    if hotel_id is None and order_id is None and task_id is None:
        raise ValidationFailed(errors=[{"loc": ["query", "hotel_id"], "msg": "give hotel_id, order_id or task_id",
                                        "type": "missing"}])
    if hotel_id is not None:
        hotel = "%(hotel_id)s"
    elif order_id is not None:
        hotel = "SELECT hotel_id FROM reservation.workflow_reservation_order WHERE id = %(order_id)s"
    else:
        hotel = "SELECT hotel_id FROM reservation.workflow_reservation_task WHERE id = %(task_id)s"
    filters = ["TRUE"]
    if order_id is not None:
        filters.append("a.order_id = %(order_id)s")
    if task_id is not None:
        filters.append("a.task_id = %(task_id)s")
    if action is not None:
        filters.append("a.action = %(action)s")
    after, params = AUDIT_KEYSET.after(page)
    rows = await reads.all(AUDIT_SQL.format(hotel=hotel, filters=" AND ".join(filters), after=after,
                                            order=AUDIT_KEYSET.order_by),
                           {**viewer.params(), "hotel_id": hotel_id, "order_id": order_id, "task_id": task_id,
                            "action": action, "limit": AUDIT_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.HotelNotFound()
    found = [row for row in rows if row["id"] is not None]
    return AUDIT_KEYSET.page(found, page, key=lambda r: (r["occurred_at"], r["id"]))


# --- the desk's own reads (issue 19): what the agents' pages show beyond the API's rows ---------------------

# Open tasks of each visible hotel by state, and how many wait behind an earlier one (blocked by EARLIER_TASK).
HOTEL_TASK_COUNTS_SQL = f"""
    SELECT h.hotel_id,
           count(t.id) FILTER (WHERE t.task_status = 'PENDING_CONFIRM') AS pending_confirm,
           count(t.id) FILTER (WHERE t.task_status = 'READY') AS ready,
           count(t.id) FILTER (WHERE t.task_status = 'EXECUTING') AS executing
      FROM reservation.hotel h
      LEFT JOIN {_T} t ON t.hotel_id = h.hotel_id AND t.task_status IN {_OPEN}
     WHERE h.hotel_id = ANY(CAST(%(hotel_ids)s AS text[])) AND {visible_sql("h.hotel_id")}
     GROUP BY h.hotel_id
"""

# The first open queue task of each order of a hotel (the one an agent can work on now), oldest first: the open
# tasks are read by age (ix_rsv_task_open_by_age) and each kept when no open task of its order comes before it
# (ix_rsv_task_open_queue), so the scan stops after the rows shown whatever the hotel holds (a DISTINCT ON over
# the open queue read every open task of the hotel); only the rows shown join their order.
WAITING_TASKS_SQL = f"""
    SELECT h.hotel_id AS visible_hotel, w.* FROM {S}.hotel h
      LEFT JOIN LATERAL (
           SELECT f.*, o.order_status, o.order_business_key, o.temporary_order_code, o.display_name
             FROM (SELECT t.id AS task_id, t.order_id, t.task_card_type, t.system_task_type, t.task_status,
                          t.created_at
                     FROM {_T} t
                    WHERE t.hotel_id = h.hotel_id AND t.queue_participation AND t.task_status IN {_OPEN}
                      AND NOT EXISTS (
                          SELECT 1 FROM {_T} e
                           WHERE e.hotel_id = t.hotel_id AND e.order_id = t.order_id AND e.queue_participation
                             AND e.task_status IN {_OPEN} AND e.execution_order < t.execution_order)
                    ORDER BY t.created_at, t.id LIMIT %(limit)s) f
             JOIN {_O} o ON o.hotel_id = h.hotel_id AND o.id = f.order_id
            ORDER BY f.created_at, f.task_id) w ON true
     WHERE h.hotel_id = %(hotel_id)s AND {visible_sql("h.hotel_id")}
"""


async def hotel_task_counts(reads: Runner, *, hotel_ids: list[str], viewer: Viewer) -> dict[str, dict[str, int]]:
    """Open tasks by state for each of `hotel_ids` the viewer may see (the hotels page's counts)."""
    rows = await reads.all(HOTEL_TASK_COUNTS_SQL, _viewer(viewer, hotel_ids=hotel_ids))
    return {row["hotel_id"]: {key: row[key] for key in ("pending_confirm", "ready", "executing")} for row in rows}


async def waiting_tasks(reads: Runner, *, hotel_id: str, viewer: Viewer, limit: int = 20) -> list[Row]:
    """The task at the head of each order's queue, oldest first (404 for a hotel the viewer may not see)."""
    rows = await reads.all(WAITING_TASKS_SQL, _viewer(viewer, hotel_id=hotel_id, limit=limit))
    if not rows:
        raise errors.HotelNotFound()
    return [row for row in rows if row["task_id"] is not None]


# The AI item a task came from, with its batch: what the desk's "AI's view" shows (issue 19).
AI_ITEM_SQL = f"""
    SELECT t.id AS task_id, t.hotel_id, t.order_id, tr.id AS transition_id, tr.batch_id, tr.source_message_id,
           tr.source_list, tr.array_index, tr.source_event_index, tr.route_code, tr.system_process_category,
           tr.result_type, tr.ai_task_type, tr.adapter_error_code, tr.adapter_error_message, tr.ai_payload_json,
           tr.item_payload_sha256, b.received_at, b.request_id, b.item_count, b.ai_contract_version,
           b.extraction_warnings_json
      FROM {_T} t
      JOIN {S}.workflow_reservation_ai_transition tr ON tr.hotel_id = t.hotel_id AND tr.id = t.ai_transition_id
      JOIN {S}.workflow_reservation_ai_batch b ON b.hotel_id = tr.hotel_id AND b.id = tr.batch_id
     WHERE t.id = %(task_id)s AND {visible_sql("t.hotel_id")}
"""


async def ai_item(reads: Runner, *, task_id: int, viewer: Viewer) -> Row:
    """The task's AI item (its exact text) and its batch (404 as the task's own read)."""
    row = await reads.one(AI_ITEM_SQL, _viewer(viewer, task_id=task_id))
    if row is None:
        raise errors.TaskNotFound()
    return row
