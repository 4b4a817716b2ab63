"""An order on the desk (issue 19): its tasks in queue order with their state and the computed `blocked` (and
which earlier task or parent holds it), the actions its `can_*` flags allow; end the order, or logic-delete a
temporary one with a reason (POST /orders/{id}/end and /logic-delete, on the same service)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.reservations import queries, service
from tenet.reservations.lifecycles import OPEN_ORDER_STATES
from tenet.reservations.pages.common import DESK, parsed, principal, reader, require, text, version_read
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.schemas import MAX_ID, OrderLogicDelete
from tenet.web import console
from tenet.web.console import ConsoleRoute, Viewer

OrderId = Annotated[int, Path(ge=1, le=MAX_ID)]
router = APIRouter(prefix=DESK, include_in_schema=False, route_class=ConsoleRoute)


def closable(order: dict[str, Any], caller: Any) -> dict[str, bool]:
    """What the page offers for the order itself: what POST /end and /logic-delete would accept from this caller
    (an open order without open tasks, reservation:order:manage; logic-delete for temporary orders only)."""
    counts = order["task_counts"]
    nothing_open = counts["pending_confirm"] + counts["ready"] + counts["executing"] == 0
    may = caller.can(P.ORDER_MANAGE) and order["order_status"] in OPEN_ORDER_STATES and nothing_open
    return {"can_end": may, "can_logic_delete": may and order["order_status"] == "TEMPORARY"}


async def _page(request: Request, viewer: Viewer, order_id: int, *, status_code: int = 200,
                error: str | None = None, reason: str = "", current: dict[str, Any] | None = None) -> Response:
    caller = reader(viewer)
    order = current or await queries.order(reads(request), order_id=order_id, viewer=caller)
    offered: dict[str, Any] = closable(order, caller)
    return console.render(request, viewer, "desk/order.html", status_code=status_code, active="desk", order=order,
                          error=error, reason=reason, **offered,
                          zone=viewer.zone or request.app.state.settings.default_timezone)


@router.get("/orders/{order_id}")
async def order_page(request: Request, order_id: OrderId) -> Response:
    viewer = await console.signed_in(request)
    return await _page(request, viewer, order_id)


async def _close(request: Request, order_id: int, *, to: str) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.ORDER_MANAGE)
    reason = text(form, "reason", 2000)
    try:
        want = version_read(form)
        checked = parsed(OrderLogicDelete, {"reason": reason}).reason if to == "LOGIC_DELETED" else None
        async with request.app.state.db.unit_of_work() as session:
            await service.close_order(session, order_id=order_id, to=to, reason=checked, want=want,
                                      principal=principal(viewer), now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 404):
            raise
        return await _page(request, viewer, order_id, status_code=exc.status, error=str(exc.code), reason=reason)
    return console.see_other(f"{DESK}/orders/{order_id}")


@router.post("/orders/{order_id}/end")
async def end_order(request: Request, order_id: OrderId) -> Response:
    return await _close(request, order_id, to="ENDED")


@router.post("/orders/{order_id}/logic-delete")
async def logic_delete_order(request: Request, order_id: OrderId) -> Response:
    return await _close(request, order_id, to="LOGIC_DELETED")

