"""A hotel's order queue on the desk (issue 19): orders by status (ACTIVE, TEMPORARY, ENDED, LOGIC_DELETED; by
default the open ones, as GET /orders), found by confirmation number or group code, with the API's cursors; above
them the task at the head of each order's queue, oldest first (what to work next). The list is asked again by
htmx every few seconds, so tasks of a new AI batch appear without a reload.

One page is a fixed number of statements whatever the hotel holds: the session, the settings, the waiting tasks
and one page of orders with their counts (queries.orders, GET /orders' own). The hotel switcher is the hotels
page's (one link away), so the queue, asked again every few seconds, reads no more than it shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request, Response
from markupsafe import Markup, escape

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


def _words(words: Mapping[str, str]) -> Callable[[str], str]:
    escaped = {key: str(escape(value)) for key, value in words.items()}
    return lambda value: escaped.get(value) or str(escape(value))


def waiting_rows(rows: list[Any], task_states: Mapping[str, str], order_states: Mapping[str, str], *, prefix: str,
                 short: Callable[[datetime], str]) -> Markup:
    """The waiting tasks' rows, written here rather than by a Jinja loop: each cell escaped once, the words looked
    up in dicts escaped once per answer (a loop in the template cost more than the page's queries). Each link has
    an id, so htmx puts the keyboard's focus back on it after the list is asked again."""
    task_word, order_word = _words(task_states), _words(order_states)
    desk = str(escape(prefix)) + "/desk"
    return Markup("".join(  # noqa: S704 (every cell escaped above; ids are ints)
        f'<tr data-task="{w["task_id"]}"><td><a id="open-task-{w["task_id"]}" href="{desk}/tasks/{w["task_id"]}">'
        f'#{w["task_id"]}</a></td>'
        f'<td>{escape(w["task_card_type"])}</td><td>{task_word(w["task_status"])}</td>'
        f'<td><a id="waiting-order-{w["task_id"]}" href="{desk}/orders/{w["order_id"]}">'
        f'{escape(w["order_business_key"] or w["temporary_order_code"] or "")}</a> '
        f'({order_word(w["order_status"])})</td><td>{escape(short(w["created_at"]))}</td></tr>\n'
        for w in rows))


def order_rows(rows: list[Any], order_states: Mapping[str, str], *, prefix: str,
               short: Callable[[datetime], str]) -> Markup:
    """The orders' rows with their task counts (as `waiting_rows`)."""
    order_word = _words(order_states)
    desk = str(escape(prefix)) + "/desk"
    parts = []
    for o in rows:
        counts = o["task_counts"]
        name = str(escape(o["order_business_key"] or o["temporary_order_code"] or ""))
        if o["display_name"]:
            name += " · " + str(escape(o["display_name"]))
        parts.append(
            f'<tr data-order="{o["id"]}" data-status="{escape(o["order_status"])}"><td>'
            f'<a id="open-order-{o["id"]}" href="{desk}/orders/{o["id"]}">{name}</a></td>'
            f'<td>{order_word(o["order_status"])}</td>'
            f'<td>{counts["pending_confirm"]}</td><td>{counts["ready"]}</td><td>{counts["executing"]}</td>'
            f'<td>{counts["completed"]}</td><td>{counts["failed"]}</td><td>{escape(short(o["updated_at"]))}</td></tr>\n')
    return Markup("".join(parts))  # noqa: S704 (every cell escaped above; ids and counts are ints)


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
            "zone": zone, "short": short_time(zone), "waiting_rows": waiting_rows, "order_rows": order_rows}


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
