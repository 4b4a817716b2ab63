"""The Outlook sync in the console (issues 17 and 18), under `/console/outlook`, for holders of
`meeting:outlook:manage` (the point every Outlook route checks): the sync's state per mailbox with a chart of its
recent runs (what each round created, updated, cancelled, skipped: drift at a glance, and the same numbers in a
table), adding a mailbox (the access check asks Graph, as the API's route does), resync and disable; the candidate
pool with its filters and the API's cursor, and binding a candidate. Bindings and the launch clean-up are
`outlook_bindings.py`.

With the credentials unset the pages say the sync is off (and what to set) instead of refusing; the actions refuse
with OUTLOOK_SYNC_OFF in words. Every action is the API's own command; nothing here talks to Graph or the database
on its own."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError, PermissionDenied, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.kernel.settings import section
from tenet.meetings.outlook import bindings, mailboxes, policy, queries
from tenet.meetings.outlook.permissions import MANAGE
from tenet.meetings.settings import MeetingSettings
from tenet.web import charts, console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
HOME = f"{PREFIX}/outlook"
RUN_COUNTS = ("created", "updated", "cancelled", "excluded", "skipped", "superseded")
_COUNT_WORDS = {"created": N_("created"), "updated": N_("updated"), "cancelled": N_("cancelled"),
                "excluded": N_("excluded"), "skipped": N_("skipped (before sync from)"),
                "superseded": N_("superseded (taken over)")}
# The runs' kinds and statuses (models.RUN_KINDS, RUN_STATES) and the hints the service stores (mailboxes.HINTS, by
# code), as the pages say them; tests/web/test_console_i18n.py holds them to every value and to a Chinese word.
RUN_KIND_WORDS = {"DELTA": N_("Delta round"), "FULL": N_("Full pass"), "BINDING": N_("First sync of a binding"),
                  "RECONCILE": N_("Reconciliation"), "REPLAY": N_("Replay of notifications")}
RUN_STATUS_WORDS = {"RUNNING": N_("Running"), "DONE": N_("Done"), "FAILED": N_("Failed")}
HINT_WORDS = {
    "ACCESS_DENIED": N_("Exchange refuses this application the mailbox (RBAC for Applications or an Application "
                        "Access Policy scopes the app's Calendars.Read). Add the mailbox to the app's management "
                        "scope, allow for the change to take effect (it can take over an hour), then press Full "
                        "resync."),
    "INVALID": N_("Graph knows no mailbox at this address, or the mailbox is not enabled for the REST API "
                  "(on-premises, unlicensed or inactive). Check the address and the mailbox, then press Full resync."),
    "ACCESS_DENIED_IN_ROUND": N_("Exchange refused this application the mailbox during a sync: add the mailbox to "
                                 "the app's management scope again, then press Full resync."),
    "ROUND_FAILED": N_("Graph failed during a delta round; the sync tries again by itself."),
}
CHART_RUNS = 20
PAGE = 50


def manager(viewer: Viewer) -> Any:
    """The caller, when they hold the Outlook point; the page refuses as the API does otherwise."""
    if not viewer.can(MANAGE):
        raise PermissionDenied(f"Requires the permission {MANAGE}", permission=MANAGE)
    return viewer.principal


def graph_settings(request: Request) -> MeetingSettings:
    return section(request.app.state.settings, MeetingSettings)


def sync_on(request: Request) -> MeetingSettings:
    """The Graph settings, or 409 OUTLOOK_SYNC_OFF (in words) for an action while the credentials are unset."""
    settings = graph_settings(request)
    policy.require_sync_on(settings)
    return settings


def parse_uuid(value: object, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationFailed(f"{name} must be an id", field=name) from None


def parse_local_instant(value: object, name: str, zone: str) -> datetime | None:
    """An `<input type=datetime-local>` value in the viewer's zone, as an aware instant; empty is None."""
    text = str(value or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationFailed(f"{name} is not a date and time", field=name) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(zone))
    return moment


def viewer_zone(request: Request, viewer: Viewer) -> str:
    return viewer.zone or request.app.state.settings.default_timezone


def _run_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**run, "counts": {name: int((run["counts"] or {}).get(name, 0)) for name in RUN_COUNTS}}
            for run in runs]


async def _overview(request: Request, viewer: Viewer, *, problem: str | None = None, address: str = "",
                    status_code: int = 200) -> Response:
    settings = graph_settings(request)
    items = await queries.sync_status(reads(request)) if settings.graph_configured else []
    now = console.now(request)
    for item in items:
        last = item["last_delta_round_at"]
        item["cursor_age_minutes"] = int((now - last).total_seconds() // 60) if last is not None else None
        item["runs"] = _run_rows(await queries.recent_runs(reads(request), mailbox_id=item["mailbox_id"], limit=5))
        # A hint Tenet wrote is said in the viewer's language; any other text (none today) as it was stored.
        item["hint_words"] = HINT_WORDS.get(mailboxes.hint_code(item["last_error_hint"]) or "")
    return console.render(request, viewer, "meetings/outlook.html", status_code=status_code, active="outlook",
                          sync_on=settings.graph_configured,
                          client_state_set=settings.graph_notification_client_state is not None,
                          items=items, problem=problem, address=address,
                          run_counts=[(name, _COUNT_WORDS[name]) for name in RUN_COUNTS],
                          run_kinds=RUN_KIND_WORDS, run_statuses=RUN_STATUS_WORDS)


@router.get("/outlook")
async def overview(request: Request) -> Response:
    viewer = await console.signed_in(request)
    manager(viewer)
    return await _overview(request, viewer)


@router.post("/outlook/mailboxes")
async def add_mailbox(request: Request) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = manager(viewer)
    raw = str(form.get("address", ""))[:320]
    kind = str(form.get("kind", "SHARED"))
    try:
        settings = sync_on(request)
        if kind not in ("SHARED", "PERSONAL"):
            raise ValidationFailed("kind is SHARED or PERSONAL", field="kind")
        address = mailboxes.normalise(raw)
        access = await mailboxes.check_access_with_policy(reads(request), settings, address)
        async with request.app.state.db.unit_of_work() as session:
            await mailboxes.add_mailbox(session, principal_id=principal.id, address=address, kind=kind, access=access,
                                        now=console.now(request))
    except DomainError as exc:
        if exc.status in (401, 403):
            raise
        return await _overview(request, viewer, problem=str(exc.code), address=raw, status_code=exc.status)
    return console.see_other(HOME)


@router.post("/outlook/mailboxes/{mailbox_id}/{action}")
async def mailbox_action(request: Request, mailbox_id: uuid.UUID, action: Literal["resync", "disable"]) -> Response:
    viewer = await console.signed_in(request)
    await console.posted(request, viewer)
    principal = manager(viewer)
    sync_on(request)
    async with request.app.state.db.unit_of_work() as session:
        if action == "resync":
            await mailboxes.request_resync(session, principal_id=principal.id, mailbox_id=mailbox_id,
                                           now=console.now(request))
        else:
            await mailboxes.disable(session, principal_id=principal.id, mailbox_id=mailbox_id,
                                    now=console.now(request))
    return console.see_other(HOME)


@router.get("/outlook/mailboxes/{mailbox_id}/runs.svg")
async def runs_chart(request: Request, mailbox_id: uuid.UUID) -> Response:
    """The mailbox's last CHART_RUNS runs, oldest first, stacked by what each did (the overview's table says the
    same in numbers)."""
    viewer = await console.signed_in(request)
    manager(viewer)
    runs = list(reversed(_run_rows(await queries.recent_runs(reads(request), mailbox_id=mailbox_id,
                                                             limit=CHART_RUNS))))
    fmt = viewer.formats
    zone = viewer_zone(request, viewer)
    labels = [fmt.time(run["started_at"], zone) for run in runs]
    series = {viewer.gettext(_COUNT_WORDS[name]): [run["counts"][name] or None for run in runs]
              for name in RUN_COUNTS}
    return charts.svg_response(charts.bars(viewer.gettext(N_("What the last sync runs changed")), labels, series))



@router.get("/outlook/candidates")
async def candidates(request: Request,
                     mailbox_id: Annotated[uuid.UUID | None, Query()] = None,
                     type: Annotated[Literal["singleInstance", "seriesMaster"] | None, Query()] = None,
                     q: Annotated[str | None, Query(max_length=200)] = None,
                     cursor: Annotated[str | None, Query(max_length=500)] = None) -> Response:
    viewer = await console.signed_in(request)
    manager(viewer)
    return await _candidates_page(request, viewer, mailbox_id=mailbox_id, type=type, q=q, cursor=cursor)


async def _candidates_page(request: Request, viewer: Viewer, *, mailbox_id: uuid.UUID | None, type: str | None,
                           q: str | None, cursor: str | None, problem: str | None = None,
                           problem_event: str | None = None, status_code: int = 200) -> Response:
    settings = graph_settings(request)
    rows: list[dict[str, Any]] = []
    next_cursor = None
    boxes: list[dict[str, Any]] = []
    if settings.graph_configured:
        page = PageParams(limit=PAGE, cursor=cursor)
        queries.check_cursors(page, queries.CANDIDATES_KEYSET)
        rows, next_cursor = await queries.candidates(reads(request), page=page, mailbox_id=mailbox_id, type=type,
                                                     q=q or None)
        boxes = await queries.mailboxes(reads(request))
    return console.render(request, viewer, "meetings/outlook_candidates.html", status_code=status_code,
                          active="outlook", sync_on=settings.graph_configured, rows=rows, next_cursor=next_cursor,
                          mailboxes=boxes, filters={"mailbox_id": str(mailbox_id or ""), "type": type or "",
                                                    "q": q or ""},
                          problem=problem, problem_event=problem_event)


@router.post("/outlook/bindings")
async def bind(request: Request) -> Response:
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = manager(viewer)
    event = str(form.get("graph_event_id", ""))[:512]
    try:
        sync_on(request)
        mailbox_id = parse_uuid(form.get("mailbox_id"), "mailbox_id")
        sync_from = parse_local_instant(form.get("sync_from"), "sync_from", viewer_zone(request, viewer))
        async with request.app.state.db.unit_of_work() as session:
            row = await bindings.create_binding(session, principal_id=principal.id, mailbox_id=mailbox_id,
                                                graph_event_id=event, sync_from=sync_from, now=console.now(request))
            binding_id = row.id
    except DomainError as exc:
        if exc.status in (401, 403):
            raise
        return await _candidates_page(request, viewer, mailbox_id=None, type=None, q=None, cursor=None,
                                      problem=str(exc.code), problem_event=event, status_code=exc.status)
    return console.see_other(f"{HOME}/bindings/{binding_id}")
