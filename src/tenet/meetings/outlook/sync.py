"""A mailbox's delta round (spec layer 5; GRAPH.md "Delta"): `calendarView/delta` over the policy's window,
`@odata.nextLink` to `@odata.deltaLink`, `Prefer: odata.maxpagesize`.

One unit of work per page (MA-INV-37): the page's candidates and the link it yields are stored together, so a crash
resumes at the page that was not applied. Delta carries occurrences without their masters (and occurrences only as
id/type/seriesMasterId/start/end): the master is read with `GET /events/{id}` once per round and becomes the
candidate. `@removed` does not mean deleted (an event may only have left the window): a GET answering 404 confirms
it. A 410 or `syncStateNotFound` (any case) drops the links and starts a full pass over the window; candidates are
keyed by (mailbox, event id), so the pass creates no duplicates. A 403 ErrorAccessDenied stores the mailbox's
ACCESS_DENIED state (no retries); other Graph failures mark it DEGRADED and leave the retry to the job.

Bound events: before a page's cursor moves, every live binding the page touches (a bound single event, an occurrence
of a bound master, an `@removed` id a link names) is synced by `apply.BindingSync` (the GET of the event or the
master's `/instances`; a confirmed deletion cancels its meeting, an event that only left the window is untouched),
once per round; a crash before the cursor's unit of work replays the page, and the sync is idempotent."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import update

from tenet.db.database import Database
from tenet.kernel.statements import statements
from tenet.kernel.transitions import transition
from tenet.meetings.outlook import apply, lifecycles, mailboxes, times
from tenet.meetings.outlook.graph import GraphClient, GraphError
from tenet.meetings.outlook.models import OutlookDeltaCursor, OutlookMailbox, OutlookSyncRun
from tenet.meetings.outlook.policy import Policy

log = logging.getLogger(__name__)

_STATE = """
    SELECT m.id, m.address, m.state, m.graph_user_id, c.window_start, c.window_end, c.next_link, c.delta_link
      FROM meeting_attendance.outlook_mailboxes m
      JOIN meeting_attendance.outlook_delta_cursors c ON c.mailbox_id = m.id
     WHERE m.id = %(id)s"""
_UPSERT = """
    INSERT INTO meeting_attendance.outlook_candidates AS c
           (mailbox_id, graph_event_id, type, subject, start_at, end_at, timezone, recurrence, organizer_email,
            change_key, ical_uid, last_seen_at, gone_at)
    SELECT %(mailbox)s, r.graph_event_id, r.type, r.subject, r.start_at, r.end_at, r.timezone, r.recurrence,
           r.organizer_email, r.change_key, r.ical_uid, %(now)s, NULL
      FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(graph_event_id text, type text, subject text, start_at timestamptz,
           end_at timestamptz, timezone text, recurrence jsonb, organizer_email text, change_key text, ical_uid text)
    ON CONFLICT (mailbox_id, graph_event_id) DO UPDATE SET
           type = excluded.type, subject = excluded.subject, start_at = excluded.start_at, end_at = excluded.end_at,
           timezone = excluded.timezone, recurrence = excluded.recurrence, organizer_email = excluded.organizer_email,
           change_key = excluded.change_key, ical_uid = coalesce(excluded.ical_uid, c.ical_uid),
           last_seen_at = excluded.last_seen_at, gone_at = NULL"""
_GONE = """
    UPDATE meeting_attendance.outlook_candidates SET gone_at = %(now)s
     WHERE mailbox_id = %(mailbox)s AND graph_event_id = ANY(%(ids)s) AND gone_at IS NULL"""
_TOUCHED = """
    SELECT b.id FROM meeting_attendance.outlook_bindings b
     WHERE b.mailbox_id = %(mailbox)s AND b.status IN ('PENDING', 'ACTIVE')
       AND (b.graph_event_id = ANY(%(ids)s) OR EXISTS (
            SELECT 1 FROM meeting_attendance.outlook_event_links l
             WHERE l.binding_id = b.id AND l.graph_event_id = ANY(%(ids)s)))
     ORDER BY b.id"""
CANDIDATE_TYPES = ("singleInstance", "seriesMaster")
ICAL_UID_MAX = 1024  # Graph's are about 100 characters; a longer one is not kept (it would only bloat the index)


@dataclass
class RoundState:
    mailbox_id: uuid.UUID
    user: str
    run_id: uuid.UUID
    kind: str
    window: tuple[datetime, datetime]
    masters: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"pages": 0, "events": 0, "candidates": 0, "removed": 0,
                                                           "left_window": 0, "resets": 0,
                                                           **apply.new_counts()})
    synced: set[uuid.UUID] = field(default_factory=set)  # bindings this round already synced


def window(now: datetime, rules: Policy) -> tuple[datetime, datetime]:
    midnight = datetime.combine(now.astimezone(UTC).date(), time(), tzinfo=UTC)
    return midnight - timedelta(days=rules.window_days_back), midnight + timedelta(days=rules.window_days_ahead)


def first_request(user: str, span: tuple[datetime, datetime]) -> tuple[str, dict[str, str]]:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (f"/users/{user}/calendarView/delta",
            {"startDateTime": span[0].strftime(fmt), "endDateTime": span[1].strftime(fmt)})


def candidate(event: dict[str, Any], default_zone: str) -> dict[str, Any] | None:
    """The candidate row of a single event or a series master (None for anything else or unreadable times), with
    its `iCalUId` (the same in every mailbox's copy of the event: a takeover finds the new source's copy by it)."""
    if event.get("type") not in CANDIDATE_TYPES or not isinstance(event.get("id"), str):
        return None
    start, end = times.instant(event.get("start")), times.instant(event.get("end"))
    if start is None or end is None:
        return None
    organizer = ((event.get("organizer") or {}).get("emailAddress") or {}).get("address")
    uid = event.get("iCalUId")
    return {"graph_event_id": event["id"], "type": event["type"], "subject": event.get("subject"),
            "start_at": start.isoformat(), "end_at": max(start, end).isoformat(),
            "timezone": times.event_zone(event, default=default_zone), "recurrence": event.get("recurrence"),
            "organizer_email": organizer.lower() if isinstance(organizer, str) else None,
            "change_key": event.get("changeKey"),
            "ical_uid": uid if isinstance(uid, str) and 0 < len(uid) <= ICAL_UID_MAX else None}


class DeltaRound:
    """One round for one mailbox with one GraphClient (the job holds the mailbox's lock)."""

    def __init__(self, db: Database, client: GraphClient, *, rules: Policy, default_zone: str,
                 binder: apply.BindingSync | None = None) -> None:
        self.db, self.client, self.rules, self.default_zone = db, client, rules, default_zone
        self.binder = binder

    async def run(self, mailbox_id: uuid.UUID, *, now: datetime, full: bool = False) -> dict[str, Any]:
        async with self.db.read_only() as session:
            row = await (await statements(session)).one(_STATE, {"id": mailbox_id})
        if row is not None and row["state"] == "PENDING":
            row = await self._recheck(row, now)
        if row is None or row["state"] not in ("OK", "DEGRADED") or not row["graph_user_id"]:
            return {"skipped": row["state"] if row else "missing"}
        link, params, span, kind = self._start(row, now, full)
        state = RoundState(mailbox_id, row["graph_user_id"], uuid.uuid4(), kind, span)
        await self._begin(state, now, full=kind == "FULL")
        while True:
            try:
                page = await self.client.delta_page(link, params=params, page_size=self.rules.batch_size)
            except GraphError as exc:
                if exc.sync_reset and state.counts["resets"] == 0:
                    state.counts["resets"] += 1
                    state.kind, state.window = "FULL", window(now, self.rules)
                    (link, params) = first_request(state.user, state.window)
                    await self._drop_links(state, now)
                    continue
                await self._fail(state, exc, now)
                if exc.access_denied:  # an answer, not a failure: no retries until an operator resyncs
                    return {"kind": state.kind, **state.counts, "failed": exc.code}
                raise
            next_link = page.get("@odata.nextLink")
            await self._apply(state, page, now)
            if not next_link:
                break
            link, params = next_link, None
        await self._finish(state, now)
        return {"kind": state.kind, **state.counts, "graph_requests": self.client.requests}

    async def _recheck(self, row: dict[str, Any], now: datetime) -> dict[str, Any]:
        """A PENDING mailbox (an operator's resync of a denied one): its access is checked again first."""
        access = await mailboxes.check_access(self.client, row["address"])
        name = {"OK": "verified", "ACCESS_DENIED": "denied", "INVALID": "invalid"}[access.state]
        user = access.graph_user_id or row["graph_user_id"]
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.MAILBOX, name, model=OutlookMailbox, id=row["id"], status_attr="state",
                             values={"updated_at": now, "graph_user_id": user, **mailboxes.error_columns(access, now)})
        return {**row, "state": access.state, "graph_user_id": user}

    def _start(self, row: dict[str, Any], now: datetime, full: bool
               ) -> tuple[str, dict[str, str] | None, tuple[datetime, datetime], str]:
        if not full and row["next_link"] and row["window_start"]:
            return row["next_link"], None, (row["window_start"], row["window_end"]), "DELTA"
        if not full and row["delta_link"] and row["window_start"]:
            return row["delta_link"], None, (row["window_start"], row["window_end"]), "DELTA"
        span = window(now, self.rules)
        path, params = first_request(row["graph_user_id"], span)
        return path, params, span, "FULL"

    async def _begin(self, state: RoundState, now: datetime, *, full: bool) -> None:
        async with self.db.unit_of_work() as session:
            session.add(OutlookSyncRun(id=state.run_id, mailbox_id=state.mailbox_id, kind=state.kind, started_at=now,
                                       status="RUNNING", counts={}, graph_requests=0))
            values: dict[str, Any] = {"round_started_at": now}
            if full:
                values.update(next_link=None, delta_link=None)
            await session.execute(update(OutlookDeltaCursor).where(
                OutlookDeltaCursor.mailbox_id == state.mailbox_id).values(**values))

    async def _drop_links(self, state: RoundState, now: datetime) -> None:
        async with self.db.unit_of_work() as session:
            await session.execute(update(OutlookDeltaCursor).where(
                OutlookDeltaCursor.mailbox_id == state.mailbox_id).values(next_link=None, delta_link=None))
            await session.execute(update(OutlookSyncRun).where(OutlookSyncRun.id == state.run_id).values(kind="FULL"))

    async def _master(self, state: RoundState, master_id: str) -> dict[str, Any] | None:
        if master_id not in state.masters:
            try:
                state.masters[master_id] = await self.client.event(state.user, master_id)
            except GraphError as exc:
                if exc.status != 404:
                    raise
                state.masters[master_id] = None
        return state.masters[master_id]

    async def _read_page(self, state: RoundState, items: list[dict[str, Any]]) -> tuple[list[dict], list[str]]:
        """The page's candidate rows and confirmed deletions (Graph reads happen here, before the transaction)."""
        rows: dict[str, dict[str, Any]] = {}
        gone: list[str] = []
        for item in items:
            event_id = item.get("id")
            if not isinstance(event_id, str):
                continue
            if "@removed" in item:
                try:
                    await self.client.event(state.user, event_id)
                    state.counts["left_window"] += 1
                except GraphError as exc:
                    if exc.status != 404:
                        raise
                    gone.append(event_id)
                continue
            master_id = item.get("seriesMasterId")
            source = await self._master(state, master_id) if isinstance(master_id, str) else item
            made = candidate(source, self.default_zone) if source else None
            if made is not None:
                rows[made["graph_event_id"]] = made
        return list(rows.values()), gone

    async def _apply(self, state: RoundState, page: dict[str, Any], now: datetime) -> None:
        items = [i for i in page.get("value") or [] if isinstance(i, dict)]
        rows, gone = await self._read_page(state, items)
        state.counts["pages"] += 1
        state.counts["events"] += len(items)
        state.counts["candidates"] += len(rows)
        state.counts["removed"] += len(gone)
        link = page.get("@odata.nextLink"), page.get("@odata.deltaLink")
        await self._sync_bound(state, items, now)
        async with self.db.unit_of_work() as session:
            run = await statements(session)
            if rows:
                await run.execute(_UPSERT, {"mailbox": state.mailbox_id, "now": now, "rows": Jsonb(rows)})
            if gone:
                await run.execute(_GONE, {"mailbox": state.mailbox_id, "now": now, "ids": gone})
            # MA-INV-37: the link this page yields moves with what it covered, in the same transaction.
            await session.execute(update(OutlookDeltaCursor).where(
                OutlookDeltaCursor.mailbox_id == state.mailbox_id).values(
                next_link=link[0], delta_link=link[1],
                window_start=state.window[0], window_end=state.window[1]))
            await session.execute(update(OutlookSyncRun).where(OutlookSyncRun.id == state.run_id).values(
                counts=dict(state.counts), graph_requests=self.client.requests))

    async def _sync_bound(self, state: RoundState, items: list[dict[str, Any]], now: datetime) -> None:
        """The page's bound events, each binding once per round (its sync reads Graph's state as it is now)."""
        if self.binder is None:
            return
        ids = sorted({v for i in items for v in (i.get("id"), i.get("seriesMasterId")) if isinstance(v, str)})
        if not ids:
            return
        async with self.db.read_only() as session:
            rows = await (await statements(session)).all(_TOUCHED, {"mailbox": state.mailbox_id, "ids": ids})
        for row in rows:
            if row["id"] in state.synced:
                continue
            state.synced.add(row["id"])
            try:
                await self.binder.run(row["id"], now=now, counts=state.counts)
            except GraphError as exc:
                # One binding's failed read must not hold the mailbox's cursor: reconciliation repairs it.
                state.counts["binding_failures"] = state.counts.get("binding_failures", 0) + 1
                log.warning("outlook binding sync failed in a delta round", extra={
                    "binding_id": str(row["id"]), "graph_status": exc.status, "graph_code": exc.code,
                    "graph_request_id": exc.request_id})

    async def _finish(self, state: RoundState, now: datetime) -> None:
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.SYNC_RUN, "finish", model=OutlookSyncRun, id=state.run_id,
                             values={"finished_at": now, "counts": dict(state.counts),
                                     "graph_requests": self.client.requests})
            await session.execute(update(OutlookDeltaCursor).where(
                OutlookDeltaCursor.mailbox_id == state.mailbox_id).values(
                last_round_at=now, round_started_at=None, full_pass_requested_at=None))
            await transition(session, lifecycles.MAILBOX, "verified", model=OutlookMailbox, status_attr="state",
                             where=(OutlookMailbox.id == state.mailbox_id, OutlookMailbox.state == "DEGRADED"),
                             values={"updated_at": now, "last_error_code": None, "last_error_request_id": None,
                                     "last_error_hint": None, "last_error_at": None})

    async def _fail(self, state: RoundState, exc: GraphError, now: datetime) -> None:
        name, hint = ("denied", mailboxes.HINT_DENIED_IN_ROUND) if exc.access_denied \
            else ("degraded", mailboxes.HINT_ROUND_FAILED)
        async with self.db.unit_of_work() as session:
            await transition(session, lifecycles.SYNC_RUN, "fail", model=OutlookSyncRun, id=state.run_id,
                             values={"finished_at": now, "counts": dict(state.counts), "error_code": exc.code,
                                     "error_request_id": exc.request_id, "graph_requests": self.client.requests})
            await session.execute(update(OutlookDeltaCursor).where(
                OutlookDeltaCursor.mailbox_id == state.mailbox_id).values(round_started_at=None))
            sources = ("PENDING", "OK", "DEGRADED") if name == "denied" else ("OK", "DEGRADED")
            await transition(session, lifecycles.MAILBOX, name, model=OutlookMailbox, status_attr="state",
                             where=(OutlookMailbox.id == state.mailbox_id, OutlookMailbox.state.in_(sources)),
                             values={"updated_at": now, "last_error_code": exc.code, "last_error_at": now,
                                     "last_error_request_id": exc.request_id, "last_error_hint": hint})
