# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Reads of hotels, staff assignments and the audit log, on the transaction-free read path."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tenet.kernel.errors import ValidationFailed
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Reads
from tenet.reservations import errors
from tenet.reservations.permissions import Viewer, visible_sql

HOTELS_KEYSET = SqlKeyset(("h.hotel_id",), (str,))
HOTELS_SQL = f"""
    SELECT h.hotel_id, h.display_name, h.created_at,
           EXISTS (SELECT 1 FROM reservation.hotel_staff s WHERE s.hotel_id = h.hotel_id
                      AND s.user_id = %(v_user)s) AS assigned
      FROM reservation.hotel h
     WHERE {visible_sql("h.hotel_id")} AND {{after}}
     ORDER BY {{order}} LIMIT %(limit)s
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


async def hotels(reads: Reads, *, viewer: Viewer, page: PageParams) -> tuple[list[Any], str | None]:
    after, params = HOTELS_KEYSET.after(page)
    rows = await reads.all(HOTELS_SQL.format(after=after, order=HOTELS_KEYSET.order_by),
                           {**viewer.params(), "limit": HOTELS_KEYSET.fetch_limit(page), **params})
    return HOTELS_KEYSET.page(rows, page, key=lambda r: (r["hotel_id"],))


async def staff(reads: Reads, *, hotel_id: str, page: PageParams) -> tuple[list[Any], str | None]:
    after, params = STAFF_KEYSET.after(page)
    rows = await reads.all(STAFF_SQL.format(after=after, order=STAFF_KEYSET.order_by),
                           {"hotel_id": hotel_id, "limit": STAFF_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.HotelNotFound()
    found = [row for row in rows if row["user_id"] is not None]
    return STAFF_KEYSET.page(found, page, key=lambda r: (r["granted_at"], r["user_id"]))


async def audit_logs(reads: Reads, *, viewer: Viewer, hotel_id: str | None, order_id: int | None,
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
