"""Bound events becoming meetings (spec layers 2-4; docs/design/outlook.md §5, §8): the binding sync.

A SINGLE binding: `GET /events/{id}`, then its meeting is created or updated. A SERIES binding: the master and its
`/instances` over the policy's window; the Tenet series row describes the pattern, each occurrence is one meeting
keyed by (binding, original start) (MA-INV-34). An occurrence whose link has no instance any more is read by its
id: 404 confirms the deletion (the meeting is cancelled), an answer means it only moved (it is updated from it).

Graph is read first, outside any transaction; then one unit of work per batch of occurrences. Each unit of work
starts by reading the binding FOR SHARE (the lock MA-INV-35's trigger takes): a takeover or release that committed
meanwhile makes this sync of the old source stop (`superseded`); the exclusions (MA-INV-33) and `sync_from`
(MA-INV-32) are read under that lock and the occurrences they cover are not written (`excluded`, `skipped`). The
triggers on outlook_event_links stay the backstop. Meetings are written through the meetings services as the
system actor (the user columns name the binding's administrator), with `outlook_sync=True`, the one writer the
OUTLOOK_MANAGED rule lets change the fields Outlook owns."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.db.database import Database
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import violated_constraint
from tenet.kernel.errors import DomainError
from tenet.kernel.statements import statements
from tenet.kernel.transitions import transition
from tenet.meetings import series as series_service
from tenet.meetings import service
from tenet.meetings.models import Meeting, MeetingRequiredAttendee, MeetingSeries
from tenet.meetings.outlook import lifecycles, mirror, times
from tenet.meetings.outlook.graph import GraphClient, GraphError
from tenet.meetings.outlook.mirror import Occurrence
from tenet.meetings.outlook.models import (
    LINK_EXCLUSION_TRIGGER,
    LINK_SOURCE_TRIGGER,
    LINK_SYNC_FROM_TRIGGER,
    OutlookBinding,
    OutlookEventLink,
)
from tenet.meetings.outlook.policy import Policy

log = logging.getLogger(__name__)

COUNT_KINDS = ("created", "updated", "cancelled", "excluded", "skipped", "superseded")
CANCEL_REASON = "Cancelled in Outlook"
SYSTEM = Actor.system()

_TARGET = """
    SELECT b.id, b.kind, b.mailbox_id, b.graph_event_id, b.status, b.sync_from, b.meeting_id, b.series_id,
           b.bound_by_id, m.graph_user_id, m.state AS mailbox_state
      FROM meeting_attendance.outlook_bindings b
      JOIN meeting_attendance.outlook_mailboxes m ON m.id = b.mailbox_id
     WHERE b.id = %(id)s"""
_GUARD = """
    SELECT b.mailbox_id, b.status, b.sync_from,
           coalesce((SELECT array_agg(e.original_start) FROM meeting_attendance.outlook_exclusions e
                      WHERE e.binding_id = b.id), ARRAY[]::timestamptz[]) AS exclusions
      FROM meeting_attendance.outlook_bindings b WHERE b.id = %(id)s FOR SHARE OF b"""
_LINKS = """
    SELECT l.meeting_id, l.original_start, l.graph_event_id, l.change_key, l.synced_attendee_ids, l.mailbox_id,
           x.graph_user_id AS link_user, x.state AS link_mailbox_state, m.status, m.series_occurrence_date
      FROM meeting_attendance.outlook_event_links l
      JOIN meeting_attendance.meetings m ON m.id = l.meeting_id
      JOIN meeting_attendance.outlook_mailboxes x ON x.id = l.mailbox_id
     WHERE l.binding_id = %(binding)s"""
_KNOWN = """
    SELECT EXISTS (SELECT 1 FROM meeting_attendance.outlook_candidates
                    WHERE mailbox_id = %(mailbox)s AND graph_event_id = %(event)s) AS known"""
READABLE = ("OK", "DEGRADED")
_USERS = """
    SELECT id, email_normalized FROM iam.user_account WHERE email_normalized = ANY(%(emails)s) AND status = 'active'"""


def new_counts() -> dict[str, int]:
    return dict.fromkeys(COUNT_KINDS, 0)


class Superseded(Exception):
    """The binding's source changed (takeover) or it was released while this sync ran (MA-INV-35)."""


@dataclass(frozen=True)
class Target:
    id: uuid.UUID
    kind: str
    mailbox_id: uuid.UUID
    graph_event_id: str
    sync_from: datetime
    meeting_id: str | None
    series_id: uuid.UUID | None
    bound_by_id: uuid.UUID
    user: str


@dataclass
class Item:
    """One unit of the plan: what Graph says (None: confirmed deleted) and the link it updates (None: new)."""

    occurrence: Occurrence | None
    link: dict[str, Any] | None


@dataclass(frozen=True)
class Guard:
    sync_from: datetime
    exclusions: frozenset[datetime]


async def read_target(db: Database, binding_id: uuid.UUID) -> Target | None:
    """The binding as a sync needs it; None when it is released, missing, or its mailbox is not readable."""
    async with db.read_only() as session:
        row = await (await statements(session)).one(_TARGET, {"id": binding_id})
    if row is None or row["status"] == "RELEASED" or row["mailbox_state"] not in READABLE \
            or not row["graph_user_id"]:
        return None
    return Target(row["id"], row["kind"], row["mailbox_id"], row["graph_event_id"], row["sync_from"],
                  row["meeting_id"], row["series_id"], row["bound_by_id"], row["graph_user_id"])


async def _guard(session: AsyncSession, target: Target) -> Guard:
    """The binding FOR SHARE (MA-INV-35's lock, before anything is written), its sync_from and exclusions."""
    row = await (await statements(session)).one(_GUARD, {"id": target.id})
    if row is None or row["status"] == "RELEASED" or row["mailbox_id"] != target.mailbox_id:
        raise Superseded()
    return Guard(row["sync_from"], frozenset(row["exclusions"] or ()))


async def _links(db: Database, binding_id: uuid.UUID) -> list[dict[str, Any]]:
    async with db.read_only() as session:
        return await (await statements(session)).all(_LINKS, {"binding": binding_id})


async def _known(db: Database, target: Target) -> bool:
    """Whether the binding's event id is one its mailbox's candidate pool ever held (rows are never deleted, a
    confirmed deletion only sets gone_at). A 404 of an id the mailbox never held says nothing about the event: ids
    are per mailbox, so it is another mailbox's id (a binding a takeover left pointing at the old source's id)."""
    async with db.read_only() as session:
        row = await (await statements(session)).one(_KNOWN, {"mailbox": target.mailbox_id,
                                                             "event": target.graph_event_id})
    return bool(row and row["known"])


class BindingSync:
    """One binding's sync with one GraphClient (the caller holds the mailbox's job lock)."""

    def __init__(self, db: Database, client: GraphClient, *, rules: Policy, default_zone: str,
                 meeting_policy: service.MeetingPolicy, span: tuple[datetime, datetime]) -> None:
        self.db, self.client, self.rules, self.default_zone = db, client, rules, default_zone
        self.meeting_policy, self.span = meeting_policy, span

    async def run(self, binding_id: uuid.UUID, *, now: datetime, counts: dict[str, int]) -> None:
        """Bring the binding's meetings in step with Graph, adding what it did to `counts`."""
        target = await read_target(self.db, binding_id)
        if target is None:
            return
        try:
            if target.kind == "SINGLE":
                await self._single(target, now, counts)
            else:
                await self._series(target, now, counts)
        except Superseded:
            counts["superseded"] += 1
            log.info("outlook binding sync superseded", extra={"binding_id": str(binding_id)})

    async def _get(self, target: Target, event_id: str) -> dict[str, Any] | None:
        try:
            return await self.client.event(target.user, event_id, select=mirror.SELECT)
        except GraphError as exc:
            if exc.status == 404:
                return None
            raise

    # --- a single event ---------------------------------------------------------------------------------------

    async def _unknown(self, target: Target, counts: dict[str, int]) -> bool:
        """A 404 of the binding's event: a deletion only if the mailbox's pool knows the id; otherwise nothing is
        cancelled (counted `skipped`, logged) until a takeover names the mailbox's own copy."""
        if await _known(self.db, target):
            return False
        counts["skipped"] += 1
        log.warning("outlook binding names an event its mailbox never held: nothing cancelled",
                    extra={"binding_id": str(target.id), "mailbox_id": str(target.mailbox_id)})
        return True

    async def _single(self, target: Target, now: datetime, counts: dict[str, int]) -> None:
        event = await self._get(target, target.graph_event_id)
        if event is None and await self._unknown(target, counts):
            return
        made = mirror.occurrence(event) if event is not None else None
        if event is not None and made is None:
            counts["skipped"] += 1
            return
        if event is not None and made is not None:
            made.fields["timezone"] = times.event_zone(event, default=self.default_zone)
        links = await _links(self.db, target.id)
        async with self.db.unit_of_work() as session:
            guard = await _guard(session, target)
            users = await self._users(session, [made] if made else [])
            await self._apply(session, target, None, Item(made, links[0] if links else None), guard, users, now,
                              counts)
            await self._touch(session, target, now)

    # --- a series ---------------------------------------------------------------------------------------------

    async def _series(self, target: Target, now: datetime, counts: dict[str, int]) -> None:
        master = await self._get(target, target.graph_event_id)
        if master is None and await self._unknown(target, counts):
            return
        links = await _links(self.db, target.id)
        if master is None:  # the series is gone from Outlook: each of its live meetings is cancelled
            await self._batches(target, None, [Item(None, link) for link in links], now, counts)
            return
        zone = times.event_zone(master, default=self.default_zone)
        fields = mirror.series_fields(master, zone=zone, bound=self.span[1])
        if fields is None:
            counts["skipped"] += 1
            return
        found = await self.client.instances(target.user, target.graph_event_id, self.span,
                                            page_size=self.rules.batch_size, select=mirror.SELECT)
        items = await self._plan(target, master, found, links, zone, counts)
        series_id = await self._ensure_series(target, fields, now)
        await self._batches(target, series_id, items, now, counts)

    async def _plan(self, target: Target, master: dict[str, Any], found: list[dict[str, Any]],
                    links: list[dict[str, Any]], zone: str, counts: dict[str, int]) -> list[Item]:
        """Each instance with the link it updates: by original start, else by the local date of an unmatched link
        (a rescheduled master moves original starts and ids; the day stays the occurrence's). A link in the window
        left without an instance is read by its id, in the mailbox that id belongs to (the link's: after a takeover
        a link not yet matched still holds the old source's id): 404 confirms a deletion. A link of another mailbox
        that mailbox can no longer answer for, or does answer for (the occurrence only moved there), is left as it
        is (`skipped`): the new source's id for it is unknown, and an unknown id proves nothing."""
        by_start = {link["original_start"]: link for link in links}
        by_day = {link["series_occurrence_date"]: link for link in links}
        used: set[str] = set()
        items: list[Item] = []
        pending: list[Occurrence] = []
        for event in found:
            made = mirror.occurrence(event, master=master)
            if made is None:
                continue
            link = by_start.get(made.original_start)
            if link is not None:
                used.add(link["meeting_id"])
                items.append(Item(made, link))
            else:
                pending.append(made)
        for made in pending:
            link = by_day.get(mirror.local_date(made.original_start, zone))
            if link is not None and link["meeting_id"] in used:
                link = None
            if link is not None:
                used.add(link["meeting_id"])
            items.append(Item(made, link))
        for orphan in links:
            if orphan["meeting_id"] in used or orphan["status"] != "ACTIVE":
                continue
            if not self.span[0] <= orphan["original_start"] < self.span[1]:
                continue  # outside the window: not compared (it may only have left it)
            if orphan["mailbox_id"] != target.mailbox_id:
                gone = await self._gone_elsewhere(orphan)
                if gone:
                    items.append(Item(None, orphan))
                else:
                    counts["skipped"] += 1
                continue
            answer = await self._get(target, orphan["graph_event_id"])
            items.append(Item(mirror.occurrence(answer, master=master) if answer is not None else None, orphan))
        return items

    async def _gone_elsewhere(self, link: dict[str, Any]) -> bool:
        """Whether the mailbox a link's id belongs to confirms, by a 404, that the occurrence was deleted; False when
        that mailbox cannot be read or still has it."""
        if link["link_mailbox_state"] not in READABLE or not link["link_user"]:
            return False
        try:
            await self.client.event(link["link_user"], link["graph_event_id"], select="id")
        except GraphError as exc:
            if exc.status == 404:
                return True
            if exc.access_denied:
                return False
            raise
        return False

    async def _ensure_series(self, target: Target, fields: dict[str, Any], now: datetime) -> uuid.UUID:
        """The Tenet series the binding writes (made and the binding activated on the first sync), its row as the
        master describes it now (its zone stays the first one: every occurrence has its series' zone)."""
        async with self.db.unit_of_work() as session:
            await _guard(session, target)
            binding = await session.get(OutlookBinding, target.id, populate_existing=True)
            assert binding is not None
            if binding.series_id is not None:
                values = {k: v for k, v in fields.items() if k not in ("timezone", "start_date")}
                await series_service.mirror_series_fields(session, series_id=binding.series_id, values=values,
                                                          actor=SYSTEM, now=now)
                return binding.series_id
            made = await series_service.create_mirrored_series(
                session, principal_id=target.bound_by_id, fields=fields, policy=self.meeting_policy, actor=SYSTEM,
                now=now)
            await transition(session, lifecycles.BINDING, "activate", model=OutlookBinding, id=target.id,
                             values={"series_id": made.id, "updated_at": now})
            return made.id

    async def _batches(self, target: Target, series_id: uuid.UUID | None, items: list[Item], now: datetime,
                       counts: dict[str, int]) -> None:
        size = self.rules.batch_size
        for offset in range(0, max(len(items), 1), size):
            batch = items[offset:offset + size]
            try:
                async with self.db.unit_of_work() as session:
                    guard = await _guard(session, target)
                    series = await session.get(MeetingSeries, series_id) if series_id else None
                    users = await self._users(session, [i.occurrence for i in batch if i.occurrence])
                    for item in batch:
                        await self._apply(session, target, series, item, guard, users, now, counts)
                    await self._touch(session, target, now)
            except Superseded:
                counts["superseded"] += max(len(items) - offset, 1) - 1  # the items left; the caller counts one
                raise

    async def _touch(self, session: AsyncSession, target: Target, now: datetime) -> None:
        await session.execute(update(OutlookBinding).where(OutlookBinding.id == target.id)
                              .values(last_synced_at=now))

    async def _users(self, session: AsyncSession, made: list[Occurrence]) -> dict[str, uuid.UUID]:
        """Platform users by normalised email (active accounts only: an inactive one cannot be an attendee)."""
        wanted = sorted({e for m in made for e in m.attendee_emails})
        if not wanted:
            return {}
        rows = await (await statements(session)).all(_USERS, {"emails": wanted})
        return {r["email_normalized"]: r["id"] for r in rows}

    # --- one occurrence ---------------------------------------------------------------------------------------

    async def _apply(self, session: AsyncSession, target: Target, series: MeetingSeries | None, item: Item,
                     guard: Guard, users: dict[str, uuid.UUID], now: datetime, counts: dict[str, int]) -> None:
        """One occurrence under a savepoint: a refusal of the meetings service skips it, never the batch."""
        made, link = item.occurrence, item.link
        keys = {k for k in (made.original_start if made else None, link["original_start"] if link else None) if k}
        if series is not None and keys & guard.exclusions:
            counts["excluded"] += 1
            return
        # The original start the link will carry: a single event keeps its first one; an occurrence takes Graph's.
        if target.kind == "SINGLE" or made is None:
            written = link["original_start"] if link else (made.original_start if made else None)
        else:
            written = made.original_start
        if written is None or written < guard.sync_from:
            counts["skipped"] += 1
            return
        try:
            async with session.begin_nested():
                kind = await self._write(session, target, series, made, link, users, now)
        except DomainError as exc:
            log.info("outlook occurrence not written", extra={"binding_id": str(target.id), "code": str(exc.code)})
            kind = "skipped"
        except IntegrityError as exc:
            name = violated_constraint(exc)
            if name == LINK_SOURCE_TRIGGER:
                raise Superseded() from None
            if name not in (LINK_EXCLUSION_TRIGGER, LINK_SYNC_FROM_TRIGGER):
                raise
            kind = "excluded" if name == LINK_EXCLUSION_TRIGGER else "skipped"
        if kind:
            counts[kind] += 1

    async def _write(self, session: AsyncSession, target: Target, series: MeetingSeries | None,
                     made: Occurrence | None, link: dict[str, Any] | None, users: dict[str, uuid.UUID],
                     now: datetime) -> str | None:
        if made is None or made.cancelled:
            if link is None or link["status"] != "ACTIVE":
                return None
            await service.cancel_meeting(session, meeting_id=link["meeting_id"], principal_id=target.bound_by_id,
                                         reason=CANCEL_REASON, now=now, actor=SYSTEM, outlook_sync=True)
            return "cancelled"
        wanted = sorted({users[e] for e in made.attendee_emails if e in users})
        if link is None:
            meeting_id = await self._create(session, target, series, made, wanted, now)
            if meeting_id is None:
                return "skipped"
            session.add(OutlookEventLink(meeting_id=meeting_id, binding_id=target.id, mailbox_id=target.mailbox_id,
                                         original_start=made.original_start, graph_event_id=made.graph_event_id,
                                         change_key=made.change_key, synced_attendee_ids=wanted,
                                         last_synced_at=now))
            await session.flush()
            return "created"
        if link["status"] != "ACTIVE":
            return "skipped"  # cancelled or deleted in Tenet: Outlook's later changes do not bring it back
        changed = await self._update(session, target, series, made, link, wanted, now)
        return "updated" if changed else None

    async def _create(self, session: AsyncSession, target: Target, series: MeetingSeries | None, made: Occurrence,
                      wanted: list[uuid.UUID], now: datetime) -> str | None:
        if series is not None:
            return await series_service.add_occurrence(
                session, series, day=mirror.local_date(made.original_start, series.timezone), fields=made.fields,
                attendees=wanted, policy=self.meeting_policy, principal_id=target.bound_by_id, actor=SYSTEM, now=now)
        meeting, _ = await service.create_meeting(
            session, principal_id=target.bound_by_id, fields={"timezone": self.default_zone, **made.fields},
            attendee_ids=wanted, template_id=None, policy=self.meeting_policy, now=now, actor=SYSTEM)
        await transition(session, lifecycles.BINDING, "activate", model=OutlookBinding, id=target.id,
                         where=(OutlookBinding.meeting_id.is_(None),),
                         values={"meeting_id": meeting.id, "updated_at": now})
        return meeting.id

    async def _update(self, session: AsyncSession, target: Target, series: MeetingSeries | None, made: Occurrence,
                      link: dict[str, Any], wanted: list[uuid.UUID], now: datetime) -> bool:
        meeting_id = link["meeting_id"]
        meeting = await session.get(Meeting, meeting_id, populate_existing=True)
        assert meeting is not None
        fields = {k: v for k, v in made.fields.items() if k != "timezone" or series is None}
        changes = {k: v for k, v in fields.items() if getattr(meeting, k) != v}
        if changes:
            await service.update_meeting(session, meeting_id=meeting_id, principal_id=target.bound_by_id,
                                         changes=changes, expected_version=None, now=now, mark_exception=False,
                                         actor=SYSTEM, outlook_sync=True)
        synced = await self._attendees(session, target, meeting_id, set(wanted),
                                       set(link["synced_attendee_ids"] or ()), now)
        # The mailbox is the binding's now (after a takeover the new source writes: MA-INV-35).
        values: dict[str, Any] = {"mailbox_id": target.mailbox_id, "graph_event_id": made.graph_event_id,
                                  "change_key": made.change_key,
                                  "synced_attendee_ids": synced.kept, "last_synced_at": now}
        if series is not None and made.original_start != link["original_start"]:
            values["original_start"] = made.original_start  # re-keyed: the master was rescheduled
        await session.execute(update(OutlookEventLink).where(OutlookEventLink.meeting_id == meeting_id)
                              .values(**values))
        return bool(changes) or synced.changed

    async def _attendees(self, session: AsyncSession, target: Target, meeting_id: str, wanted: set[uuid.UUID],
                         synced: set[uuid.UUID], now: datetime) -> _Synced:
        """Outlook's attendees that are platform users are required attendees; one removed in Outlook is removed
        only if the sync added it (someone a manager added in Tenet stays)."""
        current = set((await session.scalars(select(MeetingRequiredAttendee.user_id).where(
            MeetingRequiredAttendee.meeting_id == meeting_id))).all())
        added = wanted - current
        removed = (synced - wanted) & current
        kept = sorted((synced & wanted & current) | added)
        if added or removed:
            await service.set_required_attendees(
                session, meeting_id=meeting_id, principal_id=target.bound_by_id,
                user_ids=(current - removed) | added, expected_version=None, now=now, actor=SYSTEM,
                mark_exception=False)
        return _Synced(kept, bool(added or removed))


@dataclass(frozen=True)
class _Synced:
    kept: list[uuid.UUID]
    changed: bool
