"""Bindings and the launch clean-up in the console (issues 17 and 18), under `/console/outlook`, for holders of
`meeting:outlook:manage`: the bindings with their status filter and the API's cursor; one binding with its excluded
occurrences (add, remove), the forced takeover (another source mailbox, optionally another event id there and a new
`sync_from`) and the release; the launch checklist with its operations steps and, for each local series, its
Outlook look-alikes and the truncation, confirmed by the person first (it deletes the meetings that have not
started). Each action is the API's own command (tenet.meetings.outlook.bindings, .cleanup) and a refusal comes back
in words on the page it was made from."""

from __future__ import annotations

import uuid
from datetime import date
from functools import partial
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.meetings.outlook import bindings, cleanup, queries
from tenet.meetings.pages.outlook import (
    HOME,
    PAGE,
    graph_settings,
    manager,
    parse_local_instant,
    parse_uuid,
    sync_on,
    viewer_zone,
)
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
STATUSES = ("PENDING", "ACTIVE", "RELEASED")


@router.get("/outlook/bindings")
async def binding_list(request: Request,
                       status: Annotated[Literal["PENDING", "ACTIVE", "RELEASED"] | None, Query()] = None,
                       cursor: Annotated[str | None, Query(max_length=500)] = None) -> Response:
    viewer = await console.signed_in(request)
    manager(viewer)
    settings = graph_settings(request)
    rows: list[dict[str, Any]] = []
    next_cursor = None
    if settings.graph_configured:
        page = PageParams(limit=PAGE, cursor=cursor)
        queries.check_cursors(page, queries.BINDINGS_KEYSET)
        rows, next_cursor = await queries.bindings(reads(request), page=page, status=status, mailbox_id=None)
    boxes = {m["id"]: m["address"] for m in await queries.mailboxes(reads(request))} if settings.graph_configured \
        else {}
    return console.render(request, viewer, "meetings/outlook_bindings.html", active="outlook",
                          sync_on=settings.graph_configured, rows=rows, next_cursor=next_cursor, statuses=STATUSES,
                          status=status or "", addresses=boxes)


async def _binding_page(request: Request, viewer: Viewer, binding_id: uuid.UUID, *, problem: str | None = None,
                        problem_form: str | None = None, status_code: int = 200) -> Response:
    sync_on(request)
    row = await queries.binding(reads(request), binding_id=binding_id)
    boxes = await queries.mailboxes(reads(request))
    return console.render(request, viewer, "meetings/outlook_binding.html", status_code=status_code,
                          active="outlook", binding=row, mailboxes=boxes,
                          addresses={m["id"]: m["address"] for m in boxes}, problem=problem,
                          problem_form=problem_form)


@router.get("/outlook/bindings/{binding_id}")
async def binding_page(request: Request, binding_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    manager(viewer)
    return await _binding_page(request, viewer, binding_id)


@router.post("/outlook/bindings/{binding_id}/{action}")
async def binding_action(request: Request, binding_id: uuid.UUID,
                         action: Literal["takeover", "release", "exclude", "include"]) -> Response:
    """One of the binding's commands; a refusal (409, 412, 422) comes back on the binding's page next to the form
    it came from, with the binding as it is now."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = manager(viewer)
    now = console.now(request)
    try:
        sync_on(request)
        zone = viewer_zone(request, viewer)
        async with request.app.state.db.unit_of_work() as session:
            if action == "takeover":
                version = str(form.get("version", ""))
                await bindings.take_over(
                    session, principal_id=principal.id, binding_id=binding_id,
                    mailbox_id=parse_uuid(form.get("mailbox_id"), "mailbox_id"),
                    graph_event_id=str(form.get("graph_event_id", "")).strip()[:512] or None,
                    sync_from=parse_local_instant(form.get("sync_from"), "sync_from", zone), now=now,
                    expected_version=int(version) if version.isdigit() else None)
            elif action == "release":
                await bindings.release(session, principal_id=principal.id, binding_id=binding_id, now=now)
            else:
                original = parse_local_instant(form.get("original_start"), "original_start", zone)
                if original is None:
                    raise ValidationFailed("Give the occurrence's original start", field="original_start")
                command = bindings.exclude if action == "exclude" else bindings.include_again
                await command(session, principal_id=principal.id, binding_id=binding_id, original_start=original,
                              now=now)
    except DomainError as exc:
        if exc.status in (401, 403, 404):
            raise
        return await _binding_page(request, viewer, binding_id, problem=str(exc.code), problem_form=action,
                                   status_code=exc.status)
    return console.see_other(f"{HOME}/bindings/{binding_id}")


# --- launch clean-up -----------------------------------------------------------------------------------------

async def _cleanup_page(request: Request, viewer: Viewer, *, problem: str | None = None,
                        problem_series: str | None = None, done: dict[str, Any] | None = None,
                        status_code: int = 200) -> Response:
    settings = sync_on(request)
    now = console.now(request)
    series_rows, masters, counts = await queries.cleanup_rows(reads(request), now=now)
    answer = await anyio.to_thread.run_sync(partial(cleanup.checklist, series_rows, masters, counts,
                                                    credentials=settings.graph_configured))
    return console.render(request, viewer, "meetings/outlook_cleanup.html", status_code=status_code,
                          active="outlook", checklist=answer, problem=problem, problem_series=problem_series,
                          listed=[str(s["series_id"]) for s in answer["series"]], done=done)


@router.get("/outlook/cleanup")
async def cleanup_page(request: Request, truncated: Annotated[uuid.UUID | None, Query()] = None,
                       deleted: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
                       until: Annotated[date | None, Query()] = None) -> Response:
    """After a truncation (a redirect, so a reload does not send it again) the page says what it did."""
    viewer = await console.signed_in(request)
    manager(viewer)
    done = {"series_id": truncated, "deleted": deleted or 0, "until": until} if truncated else None
    return await _cleanup_page(request, viewer, done=done)


@router.post("/outlook/cleanup/series/{series_id}/truncate")
async def truncate(request: Request, series_id: uuid.UUID) -> Response:
    """Only with the box ticked that says what it does; the version the person saw is sent (a 412 shows the list as
    it is now)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = manager(viewer)
    version = str(form.get("version", ""))
    try:
        sync_on(request)
        if form.get("confirm") != "yes":
            raise ValidationFailed("Tick the box to confirm the truncation", field="confirm")
        async with request.app.state.db.unit_of_work() as session:
            done = await cleanup.truncate_series(session, principal_id=principal.id, series_id=series_id,
                                                 expected_version=int(version) if version.isdigit() else None,
                                                 now=console.now(request))
    except DomainError as exc:
        if exc.status in (401, 403):
            raise
        return await _cleanup_page(request, viewer, problem=str(exc.code), problem_series=str(series_id),
                                   status_code=exc.status)
    until = f"&until={done.until.isoformat()}" if done.until else ""
    return console.see_other(f"{HOME}/cleanup?truncated={series_id}&deleted={len(done.deleted_meeting_ids)}{until}")
