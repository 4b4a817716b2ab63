"""The desk's hotels page (issue 19): the hotels an agent is assigned to (administrators: every hotel), with their
open tasks by state; the switcher keeps the chosen hotel for the session; administrators register hotels and assign
agents (the API's POST /hotels and PUT/DELETE /hotels/{id}/staff/{user}, on the same services)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.meetings import queries as people_queries
from tenet.reservations import queries, service
from tenet.reservations.pages.common import (
    DESK,
    HOTEL_COOKIE,
    chosen_hotel,
    parsed,
    principal,
    reader,
    require,
    text,
)
from tenet.reservations.permissions import ReservationPermission as P
from tenet.reservations.schemas import HotelCreate
from tenet.web import console
from tenet.web.console import ConsoleRoute, Viewer

router = APIRouter(prefix=DESK, include_in_schema=False, route_class=ConsoleRoute)


async def _context(request: Request, viewer: Viewer, *, staff_of: str = "", people: str = "") -> dict[str, Any]:
    caller = reader(viewer)
    hotels, _ = await queries.hotels(reads(request), viewer=caller, page=PageParams(limit=200))
    counts = await queries.hotel_task_counts(reads(request), hotel_ids=[h["hotel_id"] for h in hotels],
                                             viewer=caller)
    manager = caller.can(P.HOTEL_MANAGE)
    staff: list[Any] = []
    found: list[Any] = []
    if manager and staff_of:
        staff, _ = await queries.staff(reads(request), hotel_id=staff_of, page=PageParams(limit=200))
        if people:
            listed = {s["user_id"] for s in staff}
            found = [p for p in await people_queries.people(reads(request), text=people) if p["user_id"] not in listed]
    return {"hotels": hotels, "counts": counts, "manager": manager, "current": chosen_hotel(request),
            "staff_of": staff_of, "staff": staff, "people": people, "found": found, "error": None}


@router.get("")
async def hotels_page(request: Request, staff: Annotated[str, Query(max_length=64)] = "",
                      people: Annotated[str, Query(max_length=100)] = "") -> Response:
    viewer = await console.signed_in(request)
    context = await _context(request, viewer, staff_of=staff.strip(), people=people)
    return console.render(request, viewer, "desk/hotels.html", active="desk", **context)


@router.post("/hotel")
async def switch_hotel(request: Request) -> Response:
    """The switcher: remember the hotel for this session and open its queue (which 404s an invisible one)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    hotel_id = text(form, "hotel_id", 64)
    await queries.hotel(reads(request), hotel_id=hotel_id, viewer=reader(viewer))
    response = console.see_other(f"{DESK}/hotels/{quote(hotel_id, safe='')}/orders")
    console.set_cookie(request, response, HOTEL_COOKIE, hotel_id)
    return response


async def _refused(request: Request, viewer: Viewer, exc: DomainError, **kwargs: str) -> Response:
    if exc.status >= 500 or exc.status == 401:
        raise exc
    context = await _context(request, viewer, **kwargs)
    context["error"] = str(exc.code)
    return console.render(request, viewer, "desk/hotels.html", status_code=exc.status, active="desk", **context)


@router.post("/hotels")
async def register_hotel(request: Request) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.HOTEL_MANAGE)
    hotel_id = text(form, "hotel_id", 1000)
    try:
        body = parsed(HotelCreate, {"hotel_id": hotel_id, "display_name": text(form, "display_name", 1000) or None})
        async with request.app.state.db.unit_of_work() as session:
            await service.register_hotel(session, hotel_id=body.hotel_id, display_name=body.display_name,
                                         principal=principal(viewer), now=console.now(request))
    except DomainError as exc:
        return await _refused(request, viewer, exc)
    return console.see_other(f"{DESK}?staff={quote(body.hotel_id, safe='')}#staff")


def _user_id(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed("user_id must be an account's id", field="user_id") from None


async def _change_staff(request: Request, hotel_id: str, *, grant: bool) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    require(viewer, P.HOTEL_MANAGE)
    try:
        user_id = _user_id(form.get("user_id"))
        async with request.app.state.db.unit_of_work() as session:
            change = service.grant_staff if grant else service.revoke_staff
            await change(session, hotel_id=hotel_id, user_id=user_id, principal=principal(viewer),
                         now=console.now(request))
    except DomainError as exc:
        return await _refused(request, viewer, exc, staff_of=hotel_id)
    return console.see_other(f"{DESK}?staff={quote(hotel_id, safe='')}#staff")


@router.post("/hotels/{hotel_id}/staff")
async def assign_agent(request: Request, hotel_id: str) -> Response:
    return await _change_staff(request, hotel_id, grant=True)


@router.post("/hotels/{hotel_id}/staff/remove")
async def remove_agent(request: Request, hotel_id: str) -> Response:
    return await _change_staff(request, hotel_id, grant=False)
