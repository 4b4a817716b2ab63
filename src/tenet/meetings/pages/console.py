"""The meeting-attendance console (issue 18), under `/console`: home (my meetings today and this week; for managers
the meetings of the week with their attendance counts), the meetings list (date range, status, the API's cursors),
and a meeting's page (details, required attendees with a people search, the QR code links, the live attendance
board, refreshed by htmx every few seconds).

Pages call the queries and services the API routes call, and offer an action only when the caller holds the
permission point the API route checks for it (`Permission.UPDATE` for the attendee list): a forged form is refused
here with the same point before the service runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError, PermissionDenied, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings import codes, queries, service
from tenet.meetings.permissions import TABLE, Action, Identity, Permission
from tenet.meetings.schemas import ClockStatus
from tenet.web import console, i18n
from tenet.web.console import PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

console.register_templates("tenet.meetings.pages")
router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
STATUSES = tuple(s.value for s in ClockStatus)
BOARD_SECONDS = 3  # the live board asks again this often


ATTENDANCE_LABELS = {"PRESENT": N_("Present"), "LATE": N_("Late"), "EXCUSED": N_("Excused"), "ABSENT": N_("Absent")}
KIND_LABELS = {"GUEST": N_("Guest"), "REQUIRED": N_("Required"), "WALK_IN": N_("Walk-in")}


# The meeting page's rows are computed here, each value once, and the templates only write them: with 200 attendees
# and 200 board rows, per-row macros, translations and permission checks in Jinja were most of the page's time
# (issue 18, bench console_meeting).

@dataclass(frozen=True, slots=True)
class AttendeeRow:
    user_id: str
    name: str
    email: str
    remove_label: str  # the button's accessible name, "Remove <name>"


@dataclass(frozen=True, slots=True)
class BoardRow:
    status: str
    name: str
    kind: str
    status_label: str
    checked_in: str  # the time of the check-in in the meeting's zone, or ""
    correction: str  # the correction form's address


def attendee_rows(viewer: Viewer, attendees: list[dict[str, Any]]) -> list[AttendeeRow]:
    remove = i18n.translations(viewer.language).gettext("Remove %(name)s")
    return [AttendeeRow(user_id=str(a["user_id"]), name=a["display_name"], email=a["email"],
                        remove_label=remove % {"name": a["display_name"]}) for a in attendees]


def board_rows(viewer: Viewer, meeting_id: str, attendances: list[dict[str, Any]], zone: str) -> list[BoardRow]:
    gettext = i18n.translations(viewer.language).gettext
    statuses = {status: gettext(label) for status, label in ATTENDANCE_LABELS.items()}
    kinds = {kind: gettext(label) for kind, label in KIND_LABELS.items()}
    clock_time = viewer.formats.clock_times(zone)
    correction = f"{PREFIX}/meetings/{meeting_id}/correction?"
    rows = []
    for a in attendances:
        status = a["status"]
        kind = "GUEST" if a["subject_type"] == "GUEST" else "REQUIRED" if a["required"] else "WALK_IN"
        rows.append(BoardRow(
            status=status, name=a["display_name"] or "", kind=kinds[kind],
            status_label=statuses.get(status) or status or "—",
            checked_in=clock_time(a["checked_in_at"]) if a["checked_in_at"] else "",
            correction=correction + (f"attendance_id={a['id']}" if a["id"] else f"user_id={a['user_id']}")))
    return rows


def _zone(request: Request, viewer: Viewer) -> str:
    settings: KernelSettings = request.app.state.settings
    return viewer.zone or settings.default_timezone


def _principal(viewer: Viewer) -> Any:
    assert viewer.principal is not None
    return viewer.principal


def _day_start(day: date, zone: str) -> datetime:
    return datetime.combine(day, time(0), tzinfo=ZoneInfo(zone))


@router.get("")
async def home(request: Request) -> Response:
    viewer = await console.signed_in(request)
    zone = _zone(request, viewer)
    now = console.now(request)
    today = now.astimezone(ZoneInfo(zone)).date()
    start, tomorrow, week_end = (_day_start(today, zone), _day_start(today + timedelta(days=1), zone),
                                 _day_start(today + timedelta(days=7), zone))
    mine: list[dict[str, Any]] = []
    managed: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    if viewer.can(Permission.READ):
        principal = _principal(viewer)
        mine, _ = await queries.meetings(reads(request), principal=principal, scope="mine", start=start,
                                         end=week_end, status=None, series_id=None, page=PageParams(limit=100),
                                         now=now)
        if queries.is_manager(principal):
            managed, _ = await queries.meetings(reads(request), principal=principal, scope="all", start=start,
                                                end=week_end, status=None, series_id=None,
                                                page=PageParams(limit=100), now=now)
            counts = await queries.attendance_counts(reads(request), principal=principal,
                                                     meeting_ids=[m["id"] for m in managed])
    return console.render(request, viewer, "meetings/home.html", active="home", zone=zone,
                          today=[m for m in mine if m["start_time"] < tomorrow],
                          week=[m for m in mine if m["start_time"] >= tomorrow], managed=managed, counts=counts)


def _parse_day(value: str | None, name: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationFailed(f"{name} must be a date YYYY-MM-DD", field=name) from None


def _series_id(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationFailed("series must be a series id", field="series") from None


@dataclass(frozen=True)
class ListFilters:
    """The meetings list's and the week view's filters, as the form sent them (empty: any)."""

    status: str | None
    scope: str
    series_id: uuid.UUID | None
    city: str
    organizer: str

    def query(self) -> dict[str, str]:
        """The filters as query parameters (the links between pages keep them)."""
        return {"status": self.status or "", "scope": self.scope, "series": str(self.series_id or ""),
                "city": self.city, "organizer": self.organizer}


def _list_filters(viewer: Viewer, *, status: str | None, scope: str | None, series: str | None, city: str | None,
                  organizer: str | None) -> ListFilters:
    manager = queries.is_manager(_principal(viewer))
    return ListFilters(status=status if status in STATUSES else None,
                       scope="all" if scope == "all" and manager else "mine", series_id=_series_id(series),
                       city=(city or "").strip(), organizer=(organizer or "").strip())


async def _meetings(request: Request, viewer: Viewer, filters: ListFilters, *, start: datetime | None,
                    end: datetime | None, page: PageParams) -> tuple[list[dict[str, Any]], str | None]:
    return await queries.meetings(
        reads(request), principal=_principal(viewer), scope=filters.scope, start=start, end=end,
        status=filters.status, series_id=filters.series_id, city=filters.city or None,
        organizer=filters.organizer or None, page=page, now=console.now(request))


async def _series_choices(request: Request, viewer: Viewer, chosen: uuid.UUID | None) -> list[dict[str, Any]]:
    """The series the filter offers: those the caller may see (managers: all, others: the ones they organize),
    by creation, at most 100; a chosen one not among them (a link from elsewhere) is kept, by its id."""
    rows, _ = await queries.series_page(reads(request), principal=_principal(viewer), page=PageParams(limit=100))
    choices = [{"id": str(r["id"]), "title": r["title"]} for r in rows]
    if chosen is not None and str(chosen) not in {c["id"] for c in choices}:
        choices.append({"id": str(chosen), "title": str(chosen)})
    return choices


Text = Annotated[str | None, Query(max_length=100)]


@router.get("/meetings")
async def meetings_list(
    request: Request,
    start: Annotated[str | None, Query(alias="from", max_length=10)] = None,
    end: Annotated[str | None, Query(alias="to", max_length=10)] = None,
    status: Annotated[str | None, Query(max_length=20)] = None,
    scope: Annotated[str | None, Query(max_length=4)] = None,
    series: Annotated[str | None, Query(max_length=40)] = None,
    city: Text = None,
    organizer: Text = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    zone = _zone(request, viewer)
    first, last = _parse_day(start, "from"), _parse_day(end, "to")
    filters = _list_filters(viewer, status=status, scope=scope, series=series, city=city, organizer=organizer)
    rows, next_cursor = await _meetings(
        request, viewer, filters, start=_day_start(first, zone) if first else None,
        end=_day_start(last + timedelta(days=1), zone) if last else None,
        page=PageParams(limit=50, cursor=cursor or None))
    return console.render(request, viewer, "meetings/list.html", active="meetings", rows=rows, zone=zone,
                          filters={"from": start or "", "to": end or "", **filters.query()}, statuses=STATUSES,
                          next_cursor=next_cursor, manager=queries.is_manager(_principal(viewer)),
                          series_choices=await _series_choices(request, viewer, filters.series_id))


WEEK_LIMIT = 500  # meetings one week view shows at most (pages of the list's query, read one after the other)
# The widest offsets of the zones a meeting may be in (UTC-12 .. UTC+14): the instants that may start on a day
# of the week somewhere, before each meeting is placed by the date of its start in its own zone.
_EARLIEST, _LATEST = timedelta(hours=14), timedelta(hours=12)


@router.get("/meetings/week")
async def week_view(
    request: Request,
    week: Annotated[str | None, Query(max_length=10)] = None,
    status: Annotated[str | None, Query(max_length=20)] = None,
    scope: Annotated[str | None, Query(max_length=4)] = None,
    series: Annotated[str | None, Query(max_length=40)] = None,
    city: Text = None,
    organizer: Text = None,
) -> Response:
    """Seven columns, Monday first: each meeting under the day it starts on in its business zone (a meeting at
    09:00 in Shanghai is on that Shanghai day, wherever the viewer is), by its start."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    zone = _zone(request, viewer)
    today = console.now(request).astimezone(ZoneInfo(zone)).date()
    day = _parse_day(week, "week") or today
    monday = day - timedelta(days=day.weekday())
    days = [monday + timedelta(days=n) for n in range(7)]
    filters = _list_filters(viewer, status=status, scope=scope, series=series, city=city, organizer=organizer)
    earliest = datetime.combine(monday, time(0), tzinfo=ZoneInfo("UTC")) - _EARLIEST
    latest = datetime.combine(monday + timedelta(days=7), time(0), tzinfo=ZoneInfo("UTC")) + _LATEST
    columns: dict[date, list[dict[str, Any]]] = {d: [] for d in days}
    cursor: str | None = None
    shown, more = 0, False
    while True:
        rows, cursor = await _meetings(request, viewer, filters, start=earliest, end=latest,
                                       page=PageParams(limit=100, cursor=cursor))
        for row in rows:
            local = row["start_time"].astimezone(ZoneInfo(row["timezone"]))
            if local.date() in columns:
                columns[local.date()].append({**row, "local_start": local})
                shown += 1
        if cursor is None:
            break
        if shown >= WEEK_LIMIT:
            more = True
            break
    return console.render(request, viewer, "meetings/week.html", active="meetings", zone=zone, days=days,
                          today=today, columns=columns, more=more, shown_limit=WEEK_LIMIT, filters=filters.query(),
                          statuses=STATUSES,
                          manager=queries.is_manager(_principal(viewer)), previous_week=monday - timedelta(days=7),
                          next_week=monday + timedelta(days=7), monday=monday,
                          series_choices=await _series_choices(request, viewer, filters.series_id))


async def _meeting_context(request: Request, viewer: Viewer, meeting_id: str, *, search: str = "") -> dict[str, Any]:
    """What the meeting page shows, each part read by the query its API route uses."""
    principal = _principal(viewer)
    state = request.app.state
    meeting = await queries.meeting(reads(request), meeting_id=meeting_id, principal=principal,
                                    now=console.now(request), base_url=section(state.settings, KernelSettings)
                                    .public_base_url, signer=codes.signer(state))
    restricted = meeting.get("view") == "restricted"
    who = Identity(meeting["my_identity"])
    attendees: list[dict[str, Any]] = []
    attendees_cursor = None
    if not restricted:
        attendees, attendees_cursor = await queries.required_attendees(
            reads(request), meeting_id=meeting_id, principal=principal, page=PageParams(limit=200))
    editable = not restricted and viewer.can(Permission.UPDATE) and meeting["status"] != "CANCELLED"
    found = await queries.people(reads(request), text=search) if editable and search else []
    listed = {a["user_id"] for a in attendees}
    return {"meeting": meeting, "restricted": restricted, "attendees": attendees,
            "attendee_rows": attendee_rows(viewer, attendees),
            "attendees_more": attendees_cursor is not None, "editable": editable, "search": search,
            "found": [p for p in found if p["user_id"] not in listed],
            "board": who in TABLE[Action.LIST_ATTENDANCES], "board_seconds": BOARD_SECONDS,
            "zone": _zone(request, viewer), "attendee_error": None}


@router.get("/meetings/{meeting_id}")
async def meeting_page(request: Request, meeting_id: str,
                       q: Annotated[str, Query(max_length=100)] = "") -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    context = await _meeting_context(request, viewer, meeting_id, search=q)
    if context["board"]:  # page: session, settings, meeting, attendees, board rows (five statements, whatever the size)
        context.update(await _board(request, viewer, meeting_id, context["meeting"]))
    return console.render(request, viewer, "meetings/meeting.html", active="meetings", **context)


async def _board(request: Request, viewer: Viewer, meeting_id: str,
                 meeting: dict[str, Any] | None = None) -> dict[str, Any]:
    """The board's counts (the meeting's summary: the page's own read when it has one) and its first 200 rows."""
    principal = _principal(viewer)
    rows, more = await queries.attendances(reads(request), meeting_id=meeting_id, principal=principal, status=None,
                                           subject_type=None, page=PageParams(limit=200))
    if meeting is None:
        meeting = await queries.meeting(reads(request), meeting_id=meeting_id, principal=principal,
                                        now=console.now(request), base_url="", signer=codes.signer(request.app.state))
    return {"summary": meeting["attendance_summary"], "attendances": rows, "attendances_more": more is not None,
            "board_rows": board_rows(viewer, meeting_id, rows, meeting["timezone"]),  # times of the meeting's zone
            "refreshed_at": console.now(request), "board_zone": meeting["timezone"]}


@router.get("/meetings/{meeting_id}/people")
async def people_found(request: Request, meeting_id: str, q: Annotated[str, Query(max_length=100)] = "") -> Response:
    """The people search's results alone (what htmx swaps in as one types); the page's own search without JS."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    context = await _meeting_context(request, viewer, meeting_id, search=q)
    if not context["editable"]:
        raise PermissionDenied(f"Requires the permission {Permission.UPDATE}", permission=Permission.UPDATE.value)
    return console.render(request, viewer, "meetings/people_found.html", **context)


@router.get("/meetings/{meeting_id}/board")
async def board(request: Request, meeting_id: str) -> Response:
    """The live attendance board alone (what htmx swaps in every few seconds)."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    context = await _board(request, viewer, meeting_id)
    return console.render(request, viewer, "meetings/board.html", meeting_id=meeting_id,
                          board_seconds=BOARD_SECONDS, zone=_zone(request, viewer), **context)


@router.get("/meetings/{meeting_id}/qrcode")
async def qr_code_image(request: Request, meeting_id: str,
                        mode: Annotated[str, Query(pattern="^(online|offline)$")] = "online",
                        image_format: Annotated[str, Query(alias="format", pattern="^(svg|png)$")] = "svg",
                        download: bool = False) -> Response:
    """A QR code as the API's image route draws it (the same query, so the same people: managers, the creator and
    the organizer), to show on the page or download."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    row = await queries.qr_code(reads(request), meeting_id=meeting_id, mode=mode, principal=_principal(viewer))
    url = codes.scan_url(row, mode, codes.signer(request.app.state), console.now(request))
    if url is not None:
        rendered = codes.render(url)
        body = rendered.svg.encode() if image_format == "svg" else rendered.png
    else:
        body = row["svg"].encode() if image_format == "svg" else bytes(row["png"])
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
    if download:
        headers["Content-Disposition"] = f'attachment; filename="meeting-{row["id"]}-{mode}.{image_format}"'
    return Response(body, media_type="image/svg+xml" if image_format == "svg" else "image/png", headers=headers)


def _form_uuid(form: Any, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(form.get(name, "")))
    except ValueError:
        raise ValidationFailed(f"{name} must be a person's id", field=name) from None


def _form_version(form: Any) -> int | None:
    value = str(form.get("version", ""))
    return int(value) if value.isdigit() else None


async def _change_attendees(request: Request, meeting_id: str, *, add: bool) -> Response:
    """Add or remove one required attendee: the API's PUT (the whole list, the meeting's version as If-Match),
    with the list read by the GET's query in the same transaction."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    viewer.require(Permission.UPDATE)
    principal = _principal(viewer)
    user_id, version = _form_uuid(form, "user_id"), _form_version(form)
    valid_id = queries.valid_meeting_id(meeting_id)
    try:
        async with request.app.state.db.unit_of_work() as session:
            current = await queries.all_required_ids(await statements(session), meeting_id=valid_id,
                                                     principal=principal)
            wanted = [*current, user_id] if add else [u for u in current if u != user_id]
            await service.set_required_attendees(session, meeting_id=valid_id, principal_id=principal.id,
                                                 user_ids=wanted, expected_version=version,
                                                 now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 404):
            raise
        context = await _meeting_context(request, viewer, meeting_id)
        if context["board"]:
            context.update(await _board(request, viewer, meeting_id))
        context["attendee_error"] = str(exc.code)
        return console.render(request, viewer, "meetings/meeting.html", status_code=exc.status, active="meetings",
                              **context)
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}#attendees")


@router.post("/meetings/{meeting_id}/attendees")
async def add_attendee(request: Request, meeting_id: str) -> Response:
    return await _change_attendees(request, meeting_id, add=True)


@router.post("/meetings/{meeting_id}/attendees/remove")
async def remove_attendee(request: Request, meeting_id: str) -> Response:
    return await _change_attendees(request, meeting_id, add=False)
