"""Bindings and exclusions (spec layers 3 and 4; docs/design/outlook.md §5): an administrator's decision that one
Graph event (a single event or a series master from the candidate pool) is managed, from which mailbox and from
when on (`sync_from`); the forced takeover; the release; the excluded occurrences of a bound series.

Locks: every command here locks the binding row FOR UPDATE first (the sync's MA-INV-35 trigger reads it FOR SHARE,
so a takeover and a racing round of the old source serialise there). Each change is audited in the same
transaction (MA-INV-40). The first sync of a binding (which writes its meeting or series and activates it) is the
sync layer's; the commands that need one (a new binding, a takeover, an exclusion removed) queue it in their
transaction, so the API and the console get the same behaviour."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique, violated_constraint
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.transitions import Refusal, transition
from tenet.meetings import audit, times
from tenet.meetings.errors import MeetingTimeInvalid
from tenet.meetings.outlook import errors, lifecycles, webhook
from tenet.meetings.outlook.models import (
    BINDING_EVENT_ACTIVE,
    BINDING_LIVE,
    OutlookBinding,
    OutlookCandidate,
    OutlookExclusion,
    OutlookMailbox,
)

KIND_OF = {"singleInstance": "SINGLE", "seriesMaster": "SERIES"}
TYPE_OF = {kind: graph_type for graph_type, kind in KIND_OF.items()}
UNREADABLE = ("ACCESS_DENIED", "INVALID")  # Graph refused the mailbox or does not know it


def _supported(moment: datetime | None, field: str) -> None:
    """An instant a command stores lies in the range Tenet supports (meetings.times, the meetings' own rule and code:
    422 MEETING_TIME_INVALID, reason out_of_range, the `field` named). Checked before anything is read or written:
    PostgreSQL stores `10000-01-01`, which psycopg then cannot read, so the binding would be unreadable for good.
    A naive instant (no offset) is refused too: which instant it names is unknown."""
    if moment is None:
        return
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise MeetingTimeInvalid(f"{field} needs a time zone offset", reason="no_offset", field=field)
    if not times.in_range(moment):
        raise MeetingTimeInvalid(f"{field} must lie {times.RANGE_TEXT}", reason="out_of_range", field=field)


def _refuse(refusal: Refusal[OutlookBinding]) -> DomainError:
    if refusal.reason == "missing":
        return errors.BindingNotFound()
    if refusal.reason == "version":  # If-Match named another version
        return PreconditionFailed(current_version=refusal.version)
    return errors.BindingReleased(current_status=refusal.status)


async def _source_mailbox(session: AsyncSession, mailbox_id: uuid.UUID) -> OutlookMailbox:
    """A mailbox that can be a binding's source: not DISABLED (409 OUTLOOK_MAILBOX_DISABLED), and not one Graph
    refused or does not know (409 OUTLOOK_MAILBOX_NOT_READABLE): its sync would read nothing, and a takeover onto it
    would leave the binding's meetings with no source."""
    row = await session.scalar(select(OutlookMailbox).where(OutlookMailbox.id == mailbox_id))
    if row is None:
        raise errors.MailboxNotFound(mailbox_id=str(mailbox_id))
    if row.state == "DISABLED":
        raise errors.MailboxDisabled(current_state=row.state)
    if row.state in UNREADABLE:
        raise errors.MailboxNotReadable(f"Mailbox {row.address} is {row.state}: resync it once Graph lets Tenet "
                                        "read it", current_state=row.state, mailbox_id=str(mailbox_id))
    return row


async def _candidate(session: AsyncSession, mailbox_id: uuid.UUID, graph_event_id: str) -> OutlookCandidate:
    row = await session.scalar(select(OutlookCandidate).where(
        OutlookCandidate.mailbox_id == mailbox_id, OutlookCandidate.graph_event_id == graph_event_id,
        OutlookCandidate.gone_at.is_(None)))
    if row is None:
        raise errors.CandidateNotFound(graph_event_id=graph_event_id)
    return row


async def _already_bound(session: AsyncSession, graph_event_id: str, *, other_than: uuid.UUID | None = None) -> None:
    existing = await session.scalar(select(OutlookBinding.id).where(
        OutlookBinding.graph_event_id == graph_event_id, OutlookBinding.status.in_(BINDING_LIVE),
        OutlookBinding.id != (other_than or uuid.UUID(int=0))))
    if existing is not None:
        raise errors.EventAlreadyBound(binding_id=str(existing))


async def create_binding(session: AsyncSession, *, principal_id: uuid.UUID, mailbox_id: uuid.UUID,
                         graph_event_id: str, sync_from: datetime | None, now: datetime) -> OutlookBinding:
    """PENDING until the first sync writes its meeting or series. One live binding per event (MA-INV-30: the
    pre-check answers the friendly 409 with the live binding's id, the partial unique index decides races)."""
    _supported(sync_from, "sync_from")
    await _source_mailbox(session, mailbox_id)
    found = await _candidate(session, mailbox_id, graph_event_id)
    await _already_bound(session, graph_event_id)
    row = OutlookBinding(id=uuid.uuid4(), graph_event_id=graph_event_id, kind=KIND_OF[found.type],
                         mailbox_id=mailbox_id, bound_by_id=principal_id, sync_from=sync_from or now,
                         status="PENDING", created_at=now, updated_at=now, version=1)
    await add_unique(session, row, on_violation={BINDING_EVENT_ACTIVE: lambda: errors.EventAlreadyBound()})
    await audit.record(session, action=audit.Action.OUTLOOK_BINDING_CREATED, resource=audit.Resource.OUTLOOK_BINDING,
                       resource_id=row.id, now=now, actor=Actor.user(principal_id),
                       after={"mailbox_id": mailbox_id, "kind": row.kind, "sync_from": row.sync_from})
    await webhook.defer_binding_sync(session, binding_id=row.id, mailbox_id=mailbox_id)  # its first sync
    return row


async def lock_binding(session: AsyncSession, binding_id: uuid.UUID) -> OutlookBinding:
    row = await session.scalar(select(OutlookBinding).where(OutlookBinding.id == binding_id).with_for_update()
                               .execution_options(populate_existing=True))
    if row is None:
        raise errors.BindingNotFound()
    if row.status == "RELEASED":
        raise errors.BindingReleased(current_status=row.status)
    return row


async def _copy_in(session: AsyncSession, binding: OutlookBinding, mailbox_id: uuid.UUID) -> OutlookCandidate:
    """The new mailbox's copy of the binding's event: the one live candidate there with the iCalUId the binding's
    event has in its current mailbox's pool, and the binding's kind. ImmutableIds are per mailbox, so the old id
    would be unknown there (its 404 read as a deletion once cancelled every meeting of the binding)."""
    uid = await session.scalar(select(OutlookCandidate.ical_uid).where(
        OutlookCandidate.mailbox_id == binding.mailbox_id, OutlookCandidate.graph_event_id == binding.graph_event_id))
    if uid is None:
        raise errors.TakeoverCopyNotFound(
            "The binding's event has no iCalUId in the pool yet (a delta round of its mailbox keeps it): give "
            "graph_event_id, the event's id in the new mailbox", mailbox_id=str(mailbox_id), reason="no_ical_uid")
    found = (await session.scalars(select(OutlookCandidate).where(
        OutlookCandidate.mailbox_id == mailbox_id, OutlookCandidate.ical_uid == uid,
        OutlookCandidate.type == TYPE_OF[binding.kind], OutlookCandidate.gone_at.is_(None)).limit(2))).all()
    if len(found) != 1:
        raise errors.TakeoverCopyNotFound(
            ("Several events" if found else "No event") + " of the new mailbox's pool share this event's iCalUId "
            "(its pool may not have been read since the copy arrived): give graph_event_id, the event's id in the "
            "new mailbox", mailbox_id=str(mailbox_id), reason="ambiguous" if found else "no_copy")
    return found[0]


async def take_over(session: AsyncSession, *, principal_id: uuid.UUID, binding_id: uuid.UUID, mailbox_id: uuid.UUID,
                    graph_event_id: str | None, sync_from: datetime | None, now: datetime,
                    expected_version: int | None = None) -> OutlookBinding:
    """Forced: administrator and source mailbox switch together, in one transaction under the binding's lock;
    `sync_from` moves to now (or the instant given), so the new source never rewrites what happened before it.

    The event's id in the new mailbox: `graph_event_id` when given; the same id when the mailbox stays; else the new
    mailbox's copy found by iCalUId (`_copy_in`, 409 OUTLOOK_TAKEOVER_COPY_NOT_FOUND without a single match). Every
    way, the id must be a live candidate of the new mailbox (404 OUTLOOK_CANDIDATE_NOT_FOUND) of the binding's kind
    (409 OUTLOOK_TAKEOVER_KIND_MISMATCH), and the mailbox readable. A refusal changes nothing."""
    _supported(sync_from, "sync_from")
    before = await lock_binding(session, binding_id)
    if expected_version is not None and before.version != expected_version:
        raise PreconditionFailed(current_version=before.version)  # a stale form first hears that it is stale
    await _source_mailbox(session, mailbox_id)
    if graph_event_id is not None:
        found = await _candidate(session, mailbox_id, graph_event_id)
    elif mailbox_id == before.mailbox_id:
        found = await _candidate(session, mailbox_id, before.graph_event_id)
    else:
        found = await _copy_in(session, before, mailbox_id)
    if KIND_OF[found.type] != before.kind:
        raise errors.TakeoverKindMismatch(binding_kind=before.kind, event_type=found.type)
    event_id = found.graph_event_id
    await _already_bound(session, event_id, other_than=binding_id)
    old = {"mailbox_id": before.mailbox_id, "bound_by_id": before.bound_by_id, "sync_from": before.sync_from}
    name = "takeover" if before.status == "ACTIVE" else "takeover_pending"
    try:
        row = await transition(session, lifecycles.BINDING, name, model=OutlookBinding, id=binding_id,
                               expected_version=expected_version, refuse=_refuse,
                               values={"mailbox_id": mailbox_id, "bound_by_id": principal_id,
                                       "graph_event_id": event_id, "sync_from": sync_from or now, "updated_at": now})
    except IntegrityError as exc:  # the new mailbox's event was bound meanwhile (MA-INV-30 decides the race)
        if violated_constraint(exc) != BINDING_EVENT_ACTIVE:
            raise
        raise errors.EventAlreadyBound() from None
    await audit.record(session, action=audit.Action.OUTLOOK_BINDING_TAKEN_OVER,
                       resource=audit.Resource.OUTLOOK_BINDING, resource_id=binding_id, now=now,
                       actor=Actor.user(principal_id), before=old,
                       after={"mailbox_id": mailbox_id, "bound_by_id": principal_id, "sync_from": row.sync_from})
    await webhook.defer_binding_sync(session, binding_id=binding_id, mailbox_id=mailbox_id)  # the new source
    return row


async def release(session: AsyncSession, *, principal_id: uuid.UUID, binding_id: uuid.UUID, now: datetime
                  ) -> OutlookBinding:
    """The meetings stay as they are, unmanaged; the event may be bound again."""
    await lock_binding(session, binding_id)
    row = await transition(session, lifecycles.BINDING, "release", model=OutlookBinding, id=binding_id,
                           refuse=_refuse, values={"released_at": now, "updated_at": now})
    await audit.record(session, action=audit.Action.OUTLOOK_BINDING_RELEASED, resource=audit.Resource.OUTLOOK_BINDING,
                       resource_id=binding_id, now=now, actor=Actor.user(principal_id))
    return row


async def exclude(session: AsyncSession, *, principal_id: uuid.UUID, binding_id: uuid.UUID, original_start: datetime,
                  now: datetime) -> OutlookExclusion:
    """MA-INV-33: the occurrence is never written by the sync again (the links' trigger refuses it)."""
    _supported(original_start, "original_start")
    binding = await lock_binding(session, binding_id)
    if binding.kind != "SERIES":
        raise errors.ExclusionNotSeries()
    existing = await session.get(OutlookExclusion, (binding_id, original_start))
    if existing is not None:
        raise errors.ExclusionExists()
    row = OutlookExclusion(binding_id=binding_id, original_start=original_start, created_by_id=principal_id,
                           created_at=now)
    session.add(row)
    await session.flush()
    await audit.record(session, action=audit.Action.OUTLOOK_EXCLUSION_ADDED, resource=audit.Resource.OUTLOOK_BINDING,
                       resource_id=binding_id, now=now, actor=Actor.user(principal_id),
                       after={"original_start": original_start})
    return row


async def include_again(session: AsyncSession, *, principal_id: uuid.UUID, binding_id: uuid.UUID,
                        original_start: datetime, now: datetime) -> None:
    """Removing an exclusion: the binding's next sync (queued here) resumes the occurrence. Audited."""
    _supported(original_start, "original_start")
    binding = await lock_binding(session, binding_id)
    removed = await session.execute(delete(OutlookExclusion).where(
        OutlookExclusion.binding_id == binding_id, OutlookExclusion.original_start == original_start))
    if not removed.rowcount:  # type: ignore[attr-defined]
        raise errors.ExclusionNotFound()
    await audit.record(session, action=audit.Action.OUTLOOK_EXCLUSION_REMOVED,
                       resource=audit.Resource.OUTLOOK_BINDING, resource_id=binding_id, now=now,
                       actor=Actor.user(principal_id), before={"original_start": original_start})
    await webhook.defer_binding_sync(session, binding_id=binding_id, mailbox_id=binding.mailbox_id)
