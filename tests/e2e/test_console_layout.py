"""Every page of the meeting-attendance console fits a phone and a desktop in real Chromium (issue 18: "the pages
work at 1280 px and on a phone-sized screen"): at 390x844 and at 1280x800 no page scrolls sideways
(`document.documentElement.scrollWidth <= window.innerWidth`); a table wider than the screen scrolls inside its own
region, which the keyboard can focus and which has a name. The pages are filled with what they show on a working
day (a meeting with attendees, an agenda, files, a series, a template, Outlook mailboxes with runs and a binding; a
refused mailbox with its long hint), made through the API on a server configured for the Graph emulator, and the
list of pages visited is held to the console's routes, so a new page cannot be forgotten. The reservation desk's
pages (issue 19) are held to the same, with an agent's hotel, orders and tasks. No page trips the CSP."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tenet.meetings.api import ROUTERS
from tenet.reservations.pages import ROUTERS as DESK_ROUTERS
from tenet.web import account
from tests.e2e.test_console_pages import BASE, _person, _shoot, _sign_in, _token
from tests.e2e.test_desk_pages import REVIEW, _hotel, _ingest, _new_booking, _update
from tests.e2e.test_outlook_pages import outlook_service  # noqa: F401  (the server and worker on the emulator)

pytestmark = pytest.mark.live_server
VIEWPORTS = ({"width": 390, "height": 844}, {"width": 1280, "height": 800})
# GET routes of the console that are not pages: images, downloads, the fragments htmx swaps in, redirects.
NOT_PAGES = {
    "/console/outlook/mailboxes/{mailbox_id}/runs.svg", "/console/reports/series/{series_id}/chart.svg",
    "/console/reports/status-distribution/chart.svg", "/console/files/{kind}/{attachment_id}/download",
    "/console/meetings/{meeting_id}/board", "/console/meetings/{meeting_id}/people",
    "/console/meetings/{meeting_id}/qrcode", "/console/meetings/{meeting_id}/agenda/presenters",
    "/console/reports/open-meeting", "/console/reports/open-series", "/console/{rest}",
    "/console/desk/hotels/{hotel_id}/orders/live", "/console/desk/tasks/{task_id}/ai/raw",
}
# Pages before sign-in (visited signed out).
SIGNED_OUT = {"/console/sign-in", "/console/password-reset", "/console/password-reset/new"}


def console_pages(routers: tuple = (*ROUTERS, account.router)) -> set[str]:
    """The page routes of a console: the meeting-attendance console's, or the reservation desk's (DESK_ROUTERS)."""
    found = set()
    for router in routers:
        for route in router.routes:
            path = getattr(route, "path", "")
            if path.startswith("/console") and "GET" in (getattr(route, "methods", None) or ()):
                found.add(path)
    return found - NOT_PAGES


def _api(server, token: str, method: str, path: str, **kwargs) -> dict:
    response = httpx.request(method, f"{server.url}{BASE}{path}", headers={"Authorization": f"Bearer {token}"},
                             timeout=30, **kwargs)
    assert response.status_code in (200, 201, 202, 204), (path, response.text)
    return response.json() if response.content else {}


def _working_day(server, admin: str, graph) -> dict[str, str]:
    """What the pages show, made through the API; the path of every page, by its route."""
    manager = _person(server, admin, "Mona Manager-Longname", ["MeetingManager"])
    people = [_person(server, admin, f"Employee{n} With-A-Rather-Long-Name", ["Employee"]) for n in range(3)]
    start = datetime.now(UTC) - timedelta(minutes=5)
    meeting = _api(server, admin, "POST", "/meetings", json={
        "title": "Quarterly planning review with the regional operations and finance teams",
        "location": "Building 7, conference room 3 (second floor, east wing)", "city": "Shanghai",
        "online_link": "https://meet.example.com/j/0123456789012345678901234567890123456789",
        "timezone": "Asia/Shanghai", "start_time": start.isoformat(),
        "end_time": (start + timedelta(hours=2)).isoformat(), "organizer_id": manager["id"],
        "required_attendee_ids": [p["id"] for p in people]})
    meeting_id = meeting["id"]
    _api(server, admin, "POST", f"/meetings/{meeting_id}/attendances",
         json={"user_id": people[0]["id"], "status": "EXCUSED", "note": "On a customer visit in another city"})
    section = _api(server, admin, "POST", f"/meetings/{meeting_id}/agenda/sections",
                   json={"title": "Numbers of the quarter"})
    item = _api(server, admin, "POST", f"/agenda/sections/{section['id']}/items",
                json={"title": "Forecast slides for every region", "time_minutes": 20})
    _api(server, admin, "POST", f"/agenda/items/{item['id']}/upload-tasks",
         json={"assignee_user_ids": [people[1]["id"]], "due_at": (start + timedelta(days=1)).isoformat()})
    _api(server, admin, "POST", f"/agenda/items/{item['id']}/upload-tasks",
         json={"assignee_user_ids": [people[2]["id"]], "due_at": (start + timedelta(days=1)).isoformat()})
    pdf = b"%PDF-1.7\n" + b"0" * 2048 + b"\n%%EOF\n"
    uploaded = _api(server, _token(server, people[1]["email"]), "POST", f"/agenda-items/{item['id']}/attachments",
                    files={"file": ("forecast-for-every-region-of-the-company-2026-q3-final-version.pdf", pdf,
                                    "application/pdf")})
    kept = _api(server, admin, "POST", f"/meetings/{meeting_id}/attachments",
                files={"file": ("minutes-of-the-previous-quarterly-planning-review.pdf", pdf, "application/pdf")})
    deleted = _api(server, admin, "POST", f"/meetings/{meeting_id}/attachments",
                   files={"file": ("draft-minutes-that-were-replaced-by-the-final-ones.pdf", pdf, "application/pdf")})
    _api(server, admin, "DELETE", f"/attachments/meeting/{deleted['id']}")
    assert uploaded and kept

    first_day = (datetime.now(UTC) + timedelta(days=1)).date()
    made = _api(server, admin, "POST", "/series", json={
        "title": "Weekly operations sync", "timezone": "Asia/Shanghai", "start_date": first_day.isoformat(),
        "start_local_time": "09:30", "duration_minutes": 45, "rrule": "FREQ=WEEKLY;BYDAY=MO,WE,FR;COUNT=9",
        "organizer_id": manager["id"], "required_attendee_ids": [p["id"] for p in people]})
    series_id = made["series"]["id"]
    occurrences = _api(server, admin, "GET", "/meetings", params={"series_id": series_id, "limit": 20})["items"]
    template = _api(server, admin, "POST", "/templates", json={
        "label": "Quarterly planning (two hours, finance)", "title": "Quarterly planning", "duration_minutes": 120,
        "timezone": "Asia/Shanghai", "attendee_user_ids": [p["id"] for p in people]})

    # Outlook: one mailbox Graph serves (a series in its pool, bound), one Exchange refuses (its long hint).
    box = graph.add_mailbox("room-7-east-wing@contoso.com")
    monday = first_day + timedelta(days=7 - first_day.weekday())
    box.create_series("Weekly operations sync", f"{monday}T09:30", f"{monday}T10:15",
                      pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                      until=monday + timedelta(days=70), zone="China Standard Time")
    graph.deny(graph.add_mailbox("denied-shared-mailbox-of-the-finance-team@contoso.com"))
    mailbox = _api(server, admin, "POST", "/outlook/mailboxes", json={"address": "room-7-east-wing@contoso.com"})
    _api(server, admin, "POST", "/outlook/mailboxes",
         json={"address": "denied-shared-mailbox-of-the-finance-team@contoso.com"})
    deadline = time.monotonic() + 30
    candidates: list[dict] = []
    while not candidates and time.monotonic() < deadline:
        candidates = _api(server, admin, "GET", "/outlook/candidates",
                          params={"mailbox_id": mailbox["id"], "type": "seriesMaster"})["items"]
        time.sleep(0.5)
    assert candidates, "the worker's first delta round did not fill the pool"
    binding = _api(server, admin, "POST", "/outlook/bindings",
                   json={"mailbox_id": mailbox["id"], "graph_event_id": candidates[0]["graph_event_id"]})
    admin_person = _person(server, admin, "Ada Admin", ["Administrator"])

    today = datetime.now(UTC).date()
    span = {"from": (today - timedelta(days=7)).isoformat(), "to": (today + timedelta(days=30)).isoformat()}
    query = f"?from={span['from']}&to={span['to']}"
    m, s = f"/console/meetings/{meeting_id}", f"/console/series/{series_id}"
    pages = {
        "/console": "/console", "/console/meetings": f"/console/meetings{query}&scope=all",
        "/console/meetings/week": "/console/meetings/week", "/console/meetings/new": "/console/meetings/new",
        "/console/meetings/{meeting_id}": m, "/console/meetings/{meeting_id}/edit": f"{m}/edit",
        "/console/meetings/{meeting_id}/correction": f"{m}/correction?user_id={people[1]['id']}",
        "/console/meetings/{meeting_id}/cancel": f"{m}/cancel", "/console/meetings/{meeting_id}/audit": f"{m}/audit",
        "/console/meetings/{meeting_id}/template": f"{m}/template",
        "/console/meetings/{meeting_id}/files": f"{m}/files",
        "/console/meetings/{meeting_id}/files/{kind}/{attachment_id}/delete": f"{m}/files/meeting/{kept['id']}/delete",
        "/console/meetings/{meeting_id}/files/deleted": f"{m}/files/deleted",
        "/console/meetings/{meeting_id}/agenda": f"{m}/agenda",
        "/console/meetings/{meeting_id}/agenda/sections/{section_id}/items/new":
            f"{m}/agenda/sections/{section['id']}/items/new",
        "/console/meetings/{meeting_id}/agenda/items/{item_id}/edit": f"{m}/agenda/items/{item['id']}/edit",
        "/console/series": "/console/series", "/console/series/new": "/console/series/new",
        "/console/series/{series_id}": s, "/console/series/{series_id}/edit": f"{s}/edit",
        "/console/series/{series_id}/reschedule": f"{s}/reschedule?from={occurrences[1]['id']}",
        "/console/templates": "/console/templates",
        "/console/templates/{template_id}/meeting": f"/console/templates/{template['id']}/meeting",
        "/console/templates/{template_id}/edit": f"/console/templates/{template['id']}/edit",
        "/console/upload-tasks": "/console/upload-tasks",
        "/console/reports": "/console/reports",
        "/console/reports/meetings/{meeting_id}": f"/console/reports/meetings/{meeting_id}",
        "/console/reports/series/{series_id}": f"/console/reports/series/{series_id}",
        "/console/reports/status-distribution": f"/console/reports/status-distribution{query}",
        "/console/reports/low-attendance": f"/console/reports/low-attendance{query}",
        "/console/admin/people": "/console/admin/people", "/console/admin/audit": "/console/admin/audit",
        "/console/outlook": "/console/outlook", "/console/outlook/candidates": "/console/outlook/candidates",
        "/console/outlook/bindings": "/console/outlook/bindings",
        "/console/outlook/bindings/{binding_id}": f"/console/outlook/bindings/{binding['id']}",
        "/console/outlook/cleanup": "/console/outlook/cleanup",
        "/console/outlook/settings": "/console/outlook/settings",
        "/console/sign-in": "/console/sign-in", "/console/password-reset": "/console/password-reset",
        "/console/password-reset/new": "/console/password-reset/new?token=prr_not-a-live-link",
    }
    return {"admin": admin_person["email"], "employee": people[1]["email"], **{f"page:{k}": v for k, v in
                                                                              pages.items()}}


# The page scrolls sideways when the document is wider than the window; and a table wider than its place must
# scroll inside a region the keyboard can reach and a screen reader can name.
_MEASURE = """() => {
    const doc = document.documentElement;
    const wide = [];
    for (const table of document.querySelectorAll("main table")) {
        const box = table.parentElement;
        if (table.scrollWidth <= box.clientWidth + 1) continue;
        const region = table.closest(".table-scroll");
        const ok = region && region.tabIndex === 0 && region.getAttribute("role") === "region"
            && (region.getAttribute("aria-label") || region.getAttribute("aria-labelledby"))
            && getComputedStyle(region).overflowX === "auto";
        if (!ok) wide.push(table.id || table.closest("[id]")?.id || "a table");
    }
    const culprits = [];
    if (doc.scrollWidth > window.innerWidth) {
        for (const el of document.querySelectorAll("body *")) {
            const r = el.getBoundingClientRect();
            if (r.right > window.innerWidth + 1 && !el.closest(".table-scroll")) {
                culprits.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
                              + (el.className && typeof el.className === "string" ? "." + el.className : "")
                              + " " + Math.round(r.right));
            }
        }
    }
    return {scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, unreachable: wide,
            culprits: culprits.slice(0, 8)};
}"""


async def _check(page, server, path: str, problems: list[str], viewport: dict) -> None:
    response = await page.goto(f"{server.url}{path}")
    assert response is not None and response.status < 500, (path, response and response.status)
    await page.wait_for_load_state("networkidle")
    found = await page.evaluate(_MEASURE)
    if found["scrollWidth"] > found["innerWidth"] or found["unreachable"]:
        problems.append(f"{viewport['width']}px {path}: {found}")


async def test_no_console_page_scrolls_sideways_on_a_phone_or_a_desktop(outlook_service, graph,  # noqa: F811
                                                                         watched):
    server, token, _ = outlook_service
    open_page, violations = watched
    made = _working_day(server, token, graph)
    pages = {key.removeprefix("page:"): path for key, path in made.items() if key.startswith("page:")}
    assert set(pages) == console_pages()  # every page of the console, no more

    problems: list[str] = []
    for viewport in VIEWPORTS:
        signed_out = await open_page(viewport=viewport)
        for route in sorted(SIGNED_OUT):
            await _check(signed_out, server, pages[route], problems, viewport)
        admin = await open_page(viewport=viewport)
        await _sign_in(admin, server, made["admin"], "/console")
        for route in sorted(set(pages) - SIGNED_OUT):
            await _check(admin, server, pages[route], problems, viewport)
        if viewport["width"] < 400:
            await admin.goto(f"{server.url}/console/outlook")
            await _shoot(admin, "outlook-phone")
        # What an attendee sees of their tasks and of the meeting (the upload forms).
        employee = await open_page(viewport=viewport)
        await _sign_in(employee, server, made["employee"], "/console/upload-tasks")
        await _check(employee, server, "/console/upload-tasks", problems, viewport)
        await _check(employee, server, pages["/console/meetings/{meeting_id}/files"], problems, viewport)
    assert problems == [], "\n".join(problems)
    assert violations == []


async def test_no_desk_page_scrolls_sideways_on_a_phone_or_a_desktop(live_server, live_admin_token, watched):
    open_page, violations = watched
    agent = _person(live_server, live_admin_token, "Rita Agent-With-A-Long-Name", ["ReservationAgent"])
    hotel, client_token = _hotel(live_server, live_admin_token, agent)
    booking = _new_booking("CNF0123456789", {"guest_name": "Ada Guest-With-A-Rather-Long-Family-Name",
                                             "arrival_date": "2026-02-30", "departure_date": "2026-03-03",
                                             "room_type": "KING", "adults": 2})
    first, _, review = _ingest(live_server, client_token, hotel, [booking, _update("CNF0123456789"), REVIEW])
    task, order = first["task_id"], first["order_id"]
    pages = {
        "/console/desk": "/console/desk",
        "/console/desk/hotels/{hotel_id}/orders": f"/console/desk/hotels/{hotel}/orders",
        "/console/desk/orders/{order_id}": f"/console/desk/orders/{order}",
        "/console/desk/tasks/{task_id}": f"/console/desk/tasks/{task}",
        "/console/desk/tasks/{task_id}/ai": f"/console/desk/tasks/{task}/ai",
        "/console/desk/tasks/{task_id}/audit": f"/console/desk/tasks/{task}/audit",
    }
    assert set(pages) == console_pages(DESK_ROUTERS)
    problems: list[str] = []
    for viewport in VIEWPORTS:
        page = await open_page(viewport=viewport)
        await _sign_in(page, live_server, agent["email"], "/console/desk")
        for path in [*pages.values(), f"/console/desk/tasks/{review['task_id']}"]:
            await _check(page, live_server, path, problems, viewport)
    assert problems == [], "\n".join(problems)
    assert violations == []
