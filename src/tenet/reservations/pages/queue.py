"""A hotel's order queue on the desk (issue 19): orders by status (ACTIVE, TEMPORARY, ENDED, LOGIC_DELETED; by
default the open ones, as GET /orders), found by confirmation number or group code, with the API's cursors; above
them the task at the head of each order's queue, oldest first (what to work next). The list is asked again by
htmx every few seconds, so tasks of a new AI batch appear without a reload.

One page is a fixed number of statements whatever the hotel holds: the session, the settings, the waiting tasks
and one page of orders with their counts (queries.orders, GET /orders' own). The hotel switcher is the hotels
page's (one link away), so the queue, asked again every few seconds, reads no more than it shows."""

from __future__ import annotations

from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.pagination import PageParams
from tenet.reservations import queries
from tenet.reservations.pages.common import DESK, HOTEL_COOKIE, QUEUE_SECONDS, reader, search_key, short_time
from tenet.reservations.schemas import OrderStatus
from tenet.web import console
from tenet.web.console import ConsoleRoute, Viewer

router = APIRouter(prefix=DESK, include_in_schema=False, route_class=ConsoleRoute)
STATUSES: tuple[str, ...] = get_args(OrderStatus)
QUEUE_PAGE = 50
Text = Annotated[str, Query(max_length=128)]


async def _queue(request: Request, viewer: Viewer, hotel_id: str, *, status: str, q: str,
                 cursor: str) -> dict[str, Any]:
    caller = reader(viewer)
    zone = viewer.zone or request.app.state.settings.default_timezone
    key = search_key(q)
    chosen = status if status in STATUSES else ""
    statuses = [chosen] if chosen else (list(STATUSES) if key is not None else ["ACTIVE", "TEMPORARY"])
    orders, next_cursor = await queries.orders(reads(request), hotel_id=hotel_id, statuses=sorted(statuses),
                                               business_key=key, viewer=caller,
                                               page=PageParams(limit=QUEUE_PAGE, cursor=cursor or None))
    waiting = await queries.waiting_tasks(reads(request), hotel_id=hotel_id, viewer=caller)
    return {"hotel_id": hotel_id, "orders": orders, "next_cursor": next_cursor, "waiting": waiting,
            "status": chosen, "q": q.strip(), "cursor": cursor, "statuses": STATUSES,
            "queue_seconds": QUEUE_SECONDS, "refreshed_at": console.now(request),
            "zone": zone, "short": short_time(zone)}


@router.get("/hotels/{hotel_id}/orders")
async def queue_page(request: Request, hotel_id: str, status: Annotated[str, Query(max_length=20)] = "",
                     q: Text = "", cursor: Annotated[str, Query(max_length=512)] = "") -> Response:
    viewer = await console.signed_in(request)
    context = await _queue(request, viewer, hotel_id, status=status, q=q, cursor=cursor)
    response = console.render(request, viewer, "desk/queue.html", active="desk", **context)
    console.set_cookie(request, response, HOTEL_COOKIE, hotel_id)  # the hotel one works is the session's hotel
    return response


@router.get("/hotels/{hotel_id}/orders/live")
async def queue_live(request: Request, hotel_id: str, status: Annotated[str, Query(max_length=20)] = "",
                     q: Text = "", cursor: Annotated[str, Query(max_length=512)] = "") -> Response:
    """The waiting tasks and the orders alone (what htmx swaps in every few seconds)."""
    viewer = await console.signed_in(request)
    context = await _queue(request, viewer, hotel_id, status=status, q=q, cursor=cursor)
    return console.render(request, viewer, "desk/queue_live.html", **context)
