"""Meeting commands: create, update, cancel, delete, required attendees, QR codes. Each runs in the caller's
unit of work and never commits.

Lock order (docs/decisions.md, tenet.meetings.domain): accounts FOR SHARE (identity's, in id order) -> the
series row -> the template row -> meeting rows FOR NO KEY UPDATE (id order) -> the meeting's advisory lock
(taken by the trigger when status or schedule change, MA-INV-08). A meeting row is never locked FOR UPDATE:
a check-in's foreign keys take FOR KEY SHARE on it, which FOR NO KEY UPDATE does not block.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
from pydantic_settings import BaseSettings
from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.kernel.audit import Actor
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.meetings import audit, codes, errors, lifecycles, times
from tenet.meetings.agenda import attachments as agenda
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import (
    Attendance,
    Meeting,
    MeetingQrCode,
    MeetingRequiredAttendee,
    Template,
    TemplateAttendee,
)
from tenet.meetings.outlook import managed
from tenet.meetings.settings import MeetingSettings

# Fields a meeting carries that a template (and a series) provide too.
DESCRIPTIVE = ("title", "description", "location", "online_link", "city")
SETTINGS_FIELDS = ("late_grace_minutes", "checkin_opens_minutes_before", "rotating_online_code",
                   "offline_checkin_enabled")
SCHEDULE_FIELDS = ("start_time", "end_time", "late_grace_minutes", "checkin_opens_minutes_before",
                   "checkin_closes_at")
# Free text is audited as "changed", never copied (D-30).
FREE_TEXT = ("description", "cancel_reason")


@dataclass(frozen=True)
class MeetingPolicy:
    """The settings meeting commands need."""

    default_timezone: str = "America/Los_Angeles"
    late_grace_minutes: int = 5
    checkin_opens_minutes: int = 30
    public_base_url: str = "http://127.0.0.1:8000"
    series_max_occurrences: int = 500

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> MeetingPolicy:
        own, kernel = section(settings, MeetingSettings), section(settings, KernelSettings)
        return cls(default_timezone=kernel.default_timezone, late_grace_minutes=own.meeting_late_grace_minutes,
                   checkin_opens_minutes=own.meeting_checkin_opens_minutes, public_base_url=kernel.public_base_url,
                   series_max_occurrences=own.series_max_occurrences)


def new_meeting_id() -> str:
    """32 lowercase hex characters, 128 random bits: the id is the capability behind the public page (D-02)."""
    return secrets.token_hex(16)


def _meeting_refusal(refusal: Refusal[Meeting]) -> DomainError:
    if refusal.reason == "missing" or refusal.status == "DELETED":
        return errors.MeetingNotFound()
    if refusal.reason == "version":
        return PreconditionFailed(current_version=refusal.version)
    if refusal.status == "CANCELLED":
        return errors.MeetingCancelled(meeting_id=refusal.current.id if refusal.current else None)
    return errors.MeetingNotFound()


async def require_users(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> None:
    """Accounts that will be listed as attendees: known (else ATTENDEE_NOT_FOUND with the unknown ids) and active,
    share-locked until commit (identity's ACCOUNT_NOT_ACTIVE), so a concurrent deletion runs wholly before or after
    (MA-INV-04, MA-INV-19)."""
    ids = sorted(set(user_ids))
    if not ids:
        return
    known = await iam_service.user_summaries(session, ids)
    unknown = [str(i) for i in ids if i not in known]
    if unknown:
        raise errors.AttendeeNotFound(user_ids=unknown[:50])
    await iam_service.require_active_accounts(session, ids)


async def active_only(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(active, skipped): template attendees whose account is no longer active are skipped, not refused."""
    ids = sorted(set(user_ids))
    if not ids:
        return [], []
    people = await iam_service.user_summaries(session, ids)
    active = [i for i in ids if i in people and people[i].status == "active"]
    await iam_service.require_active_accounts(session, active)
    return active, [i for i in ids if i not in active]


async def lock_meeting(session: AsyncSession, meeting_id: str) -> Meeting:
    """Row-lock a live meeting (FOR NO KEY UPDATE) and load it; 404 for unknown or DELETED ones."""
    await lock_rows(session, Meeting, [meeting_id], mode="no key update")
    meeting = await session.get(Meeting, meeting_id, populate_existing=True)
    if meeting is None or meeting.status == "DELETED":
        raise errors.MeetingNotFound()
    return meeting


async def load_template(session: AsyncSession, template_id: uuid.UUID) -> tuple[Template, list[uuid.UUID]]:
    template = await session.get(Template, template_id, populate_existing=True)
    if template is None or template.status != "ACTIVE":
        raise errors.TemplateNotFound()
    attendees = list((await session.scalars(
        select(TemplateAttendee.user_id).where(TemplateAttendee.template_id == template_id))).all())
    return template, attendees


async def store_codes(session: AsyncSession, meeting_ids: Iterable[str], *, base_url: str, now: datetime,
                      actor_id: uuid.UUID | None) -> None:
    """Write (or rewrite) both codes of each meeting: one upsert per meeting (MA-INV-15). The images are rendered
    in a thread: a series of a hundred meetings is over a second of CPU the event loop must not wait on."""
    ids = list(meeting_ids)
    if ids:
        await store_rendered_codes(session, await anyio.to_thread.run_sync(codes.rendered_rows, base_url, ids),
                                   now=now, actor_id=actor_id)


async def store_rendered_codes(session: AsyncSession, rendered: list[dict[str, Any]], *, now: datetime,
                               actor_id: uuid.UUID | None) -> None:
    """Upsert rows of `codes.rendered_rows`, generated now by `actor_id` (None: the system)."""
    if not rendered:
        return
    rows = [{**row, "generated_at": now, "generated_by_id": actor_id} for row in rendered]
    statement = pg_insert(MeetingQrCode).values(rows)
    await session.execute(statement.on_conflict_do_update(
        index_elements=[MeetingQrCode.meeting_id, MeetingQrCode.mode],
        set_={"payload": statement.excluded.payload, "svg": statement.excluded.svg, "png": statement.excluded.png,
              "generated_at": statement.excluded.generated_at, "generated_by_id": statement.excluded.generated_by_id}))


async def add_attendees(session: AsyncSession, meeting_ids: Iterable[str], user_ids: Iterable[uuid.UUID], *,
                        now: datetime, added_by: uuid.UUID | None) -> None:
    rows = [{"meeting_id": m, "user_id": u, "added_at": now, "added_by_id": added_by}
            for m in meeting_ids for u in sorted(set(user_ids))]
    if rows:
        await session.execute(pg_insert(MeetingRequiredAttendee).values(rows).on_conflict_do_nothing())


def audit_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """What the audit log may keep of changed fields: free text only as 'changed' (D-30)."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if key in FREE_TEXT:
            kept[f"{key}_changed"] = True
        else:
            kept[key] = value
    return kept


async def create_meeting(session: AsyncSession, *, principal_id: uuid.UUID, fields: Mapping[str, Any],
                         attendee_ids: Iterable[uuid.UUID], template_id: uuid.UUID | None, policy: MeetingPolicy,
                         now: datetime, actor: Actor | None = None) -> tuple[Meeting, list[uuid.UUID]]:
    """A new ACTIVE meeting with its required attendees and both QR codes. `fields` are the ones the client set
    (a template fills the others). Answers the meeting and the template attendees skipped as inactive. `actor`
    (default: the principal) is who the audit names: the Outlook sync writes as the system."""
    values = dict(fields)
    explicit = set(attendee_ids)
    from_template: list[uuid.UUID] = []
    template: Template | None = None
    if template_id is not None:
        template, from_template = await load_template(session, template_id)
        for name in (*DESCRIPTIVE, *SETTINGS_FIELDS, "timezone"):
            if values.get(name) is None and getattr(template, name) is not None:
                values[name] = getattr(template, name)
        if values.get("end_time") is None:
            values["end_time"] = values["start_time"] + timedelta(minutes=template.duration_minutes)
    if not values.get("title"):
        raise errors.MeetingTimeInvalid("A meeting needs a title (or a template that gives one)", reason="no_title")
    if values.get("end_time") is None:
        raise errors.MeetingTimeInvalid("A meeting needs an end time (or a template that gives a duration)",
                                        reason="no_end_time")
    zone_name = values.get("timezone") or policy.default_timezone
    times.zone(zone_name)
    grace = values.get("late_grace_minutes")
    opens = values.get("checkin_opens_minutes_before")
    grace = policy.late_grace_minutes if grace is None else grace
    opens = policy.checkin_opens_minutes if opens is None else opens
    times.check_times(values["start_time"], values["end_time"], opens, values.get("checkin_closes_at"))
    organizer_id = values.get("organizer_id") or principal_id

    # Accounts first (lock order): the explicit list and the organizer must be active; template attendees that
    # are no longer active are skipped and reported.
    await require_users(session, explicit | {organizer_id})
    kept, skipped = await active_only(session, set(from_template) - explicit)
    attendees = sorted(explicit | set(kept))

    meeting = Meeting(
        id=new_meeting_id(), title=values["title"], description=values.get("description"),
        location=values.get("location"), online_link=values.get("online_link"), city=values.get("city"),
        start_time=values["start_time"], end_time=values["end_time"], timezone=zone_name, organizer_id=organizer_id,
        late_grace_minutes=grace, checkin_opens_minutes_before=opens,
        checkin_closes_at=values.get("checkin_closes_at"),
        rotating_online_code=bool(values.get("rotating_online_code") or False),
        offline_checkin_enabled=values.get("offline_checkin_enabled") is not False,
        template_id=template.id if template else None, status="ACTIVE", schedule_changed_at=now,
        created_by_id=principal_id, created_at=now, updated_at=now, version=1,
    )
    session.add(meeting)
    await session.flush()
    await add_attendees(session, [meeting.id], attendees, now=now, added_by=principal_id)
    await store_codes(session, [meeting.id], base_url=policy.public_base_url, now=now, actor_id=principal_id)
    await audit.record(session, action=Action.MEETING_CREATED, resource=Resource.MEETING, resource_id=meeting.id,
                       meeting_id=meeting.id, now=now, actor=actor or Actor.user(principal_id),
                       after={"start_time": meeting.start_time, "end_time": meeting.end_time,
                              "timezone": meeting.timezone, "organizer_id": organizer_id,
                              "required_attendees": len(attendees), "template_id": meeting.template_id})
    return meeting, skipped


async def _online_check_ins(session: AsyncSession, meeting_id: str) -> bool:
    return bool((await session.execute(select(exists().where(
        Attendance.meeting_id == meeting_id, Attendance.status_source == "CHECK_IN", Attendance.mode == "online",
    )))).scalar())


async def update_meeting(session: AsyncSession, *, meeting_id: str, principal_id: uuid.UUID, changes: Mapping[str, Any],
                         expected_version: int | None, now: datetime, mark_exception: bool = True,
                         actor: Actor | None = None, outlook_sync: bool = False) -> Meeting:
    """PATCH: the fields in `changes` (absent = unchanged; None clears a nullable one). A schedule change takes
    the meeting's exclusive advisory lock through the trigger and recomputes lateness (MA-INV-08, -09); an
    occurrence of a series becomes an exception, which series-wide edits skip (D-22). The fields Outlook owns of a
    managed meeting change only through the sync (`outlook_sync`): anyone else gets 409 OUTLOOK_MANAGED."""
    meeting = await lock_meeting(session, meeting_id)
    if expected_version is not None and meeting.version != expected_version:
        raise PreconditionFailed(current_version=meeting.version)
    if meeting.status == "CANCELLED":
        raise errors.MeetingCancelled(meeting_id=meeting_id)
    values = {k: v for k, v in changes.items() if getattr(meeting, k) != v}
    if not outlook_sync:
        await managed.refuse_owned_meeting_changes(session, meeting_id, values)
    for required in ("title", "start_time", "end_time", "timezone", "organizer_id", "late_grace_minutes",
                     "checkin_opens_minutes_before", "rotating_online_code", "offline_checkin_enabled"):
        if required in values and values[required] is None:
            raise errors.MeetingTimeInvalid(f"{required} cannot be cleared", reason="required_field")
    if not values:
        return meeting
    if "timezone" in values:
        if meeting.series_id is not None:
            raise errors.TimezoneInvalid("An occurrence keeps its series' time zone", timezone=values["timezone"])
        times.zone(values["timezone"])
    merged = {name: values.get(name, getattr(meeting, name)) for name in SCHEDULE_FIELDS}
    times.check_times(merged["start_time"], merged["end_time"], merged["checkin_opens_minutes_before"],
                      merged["checkin_closes_at"])
    if "organizer_id" in values:
        await require_users(session, [values["organizer_id"]])
    if values.get("rotating_online_code") and await _online_check_ins(session, meeting_id):
        raise errors.RotatingCodeLocked(meeting_id=meeting_id)
    extra: dict[str, Any] = {"updated_at": now}
    if any(name in values for name in SCHEDULE_FIELDS):
        extra["schedule_changed_at"] = now
    if meeting.series_id is not None and mark_exception:
        extra["is_exception"] = True
    before = {name: getattr(meeting, name) for name in values}
    updated = await transition(session, lifecycles.MEETING, "update", model=Meeting, id=meeting_id,
                               values={**values, **extra}, refuse=_meeting_refusal)
    if "start_time" in values and values["start_time"] > now:
        await _drop_deleted_accounts(session, meeting_id)
    await audit.record(session, action=Action.MEETING_UPDATED, resource=Resource.MEETING, resource_id=meeting_id,
                       meeting_id=meeting_id, series_id=meeting.series_id, now=now,
                       actor=actor or Actor.user(principal_id), before=audit_values(before), after=audit_values(values),
                       rescheduled=any(n in values for n in ("start_time", "end_time")))
    return updated


async def _drop_deleted_accounts(session: AsyncSession, meeting_id: str) -> None:
    """A meeting moved into the future must not list deleted accounts (MA-INV-19): they stayed on it only as the
    history of a meeting that had already started."""
    await (await statements(session)).execute(
        "DELETE FROM meeting_attendance.meeting_required_attendees r USING iam.user_account u "
        "WHERE r.meeting_id = %(m)s AND u.id = r.user_id AND u.status = 'deleted'", {"m": meeting_id})


async def cancel_meeting(session: AsyncSession, *, meeting_id: str, principal_id: uuid.UUID, reason: str | None,
                         now: datetime, actor: Actor | None = None, outlook_sync: bool = False) -> Meeting:
    """ACTIVE -> CANCELLED (final but deletable, D-07). In-flight check-ins commit before it or are refused
    (the trigger's advisory lock, MA-INV-08). A managed meeting is cancelled in Outlook only (OUTLOOK_MANAGED)."""
    await lock_meeting(session, meeting_id)
    if not outlook_sync:
        await managed.refuse_owned_meeting_changes(session, meeting_id, ["cancel"])
    actor = actor or Actor.user(principal_id)
    meeting = await transition(
        session, lifecycles.MEETING, "cancel", model=Meeting, id=meeting_id, refuse=_meeting_refusal,
        values={"cancelled_at": now, "cancelled_by_id": principal_id, "cancel_reason": reason or None,
                "updated_at": now})
    # Nobody is asked for material of a meeting that will not happen (MA-INV-29).
    await agenda.cancel_pending_tasks(session, meeting_ids=[meeting_id], actor=actor,
                                      actor_id=principal_id, now=now, reason="meeting_cancelled")
    await audit.record(session, action=Action.MEETING_CANCELLED, resource=Resource.MEETING, resource_id=meeting_id,
                       meeting_id=meeting_id, series_id=meeting.series_id, now=now, actor=actor,
                       before={"status": "ACTIVE"}, after={"status": "CANCELLED", "cancel_reason_given": bool(reason)})
    return meeting


async def delete_meetings(session: AsyncSession, *, meeting_ids: list[str], actor: Actor, now: datetime,
                          actor_id: uuid.UUID | None) -> list[Meeting]:
    """ACTIVE | CANCELLED -> DELETED for the given meetings (rows already locked by the caller's command)."""
    deleted = await transition(
        session, lifecycles.MEETING, "delete", model=Meeting, where=(Meeting.id.in_(meeting_ids),),
        values={"deleted_at": now, "deleted_by_id": actor_id, "updated_at": now})
    gone = sorted(m.id for m in deleted)
    if gone:
        # Its pending tasks end (MA-INV-29), then its whole agenda and meeting files go with it (MA-INV-22).
        await agenda.cancel_pending_tasks(session, meeting_ids=gone, actor=actor, actor_id=actor_id, now=now,
                                          reason="meeting_deleted")
        await agenda.delete_agenda_of(session, meeting_ids=gone, actor=actor, actor_id=actor_id, now=now)
    for meeting in deleted:
        await audit.record(session, action=Action.MEETING_DELETED, resource=Resource.MEETING, resource_id=meeting.id,
                           meeting_id=meeting.id, series_id=meeting.series_id, now=now, actor=actor,
                           after={"status": "DELETED"})
    return deleted


async def delete_meeting(session: AsyncSession, *, meeting_id: str, principal_id: uuid.UUID, now: datetime) -> None:
    """Soft delete: the meeting answers 404 from now on; attendances stay for history (D-47). An occurrence
    deleted alone never comes back when its series is extended (MA-INV-16)."""
    await lock_meeting(session, meeting_id)
    deleted = await delete_meetings(session, meeting_ids=[meeting_id], actor=Actor.user(principal_id), now=now,
                                    actor_id=principal_id)
    if not deleted:
        raise errors.MeetingNotFound()


async def set_required_attendees(session: AsyncSession, *, meeting_id: str, principal_id: uuid.UUID,
                                 user_ids: Iterable[uuid.UUID], expected_version: int | None, now: datetime,
                                 actor: Actor | None = None, mark_exception: bool = True,
                                 ) -> tuple[list[uuid.UUID], list[uuid.UUID], list[uuid.UUID]]:
    """Replace the list in one transaction: accounts share-locked first, then the meeting. Answers (list, added,
    removed). The meeting's version moves; an occurrence becomes an exception (unless the Outlook sync, which
    mirrors Outlook's own attendees, says otherwise)."""
    wanted = sorted(set(user_ids))
    current_rows = await session.scalars(select(MeetingRequiredAttendee.user_id).where(
        MeetingRequiredAttendee.meeting_id == meeting_id))
    current = set(current_rows.all())
    added = [u for u in wanted if u not in current]
    await require_users(session, added)
    meeting = await lock_meeting(session, meeting_id)
    if expected_version is not None and meeting.version != expected_version:
        raise PreconditionFailed(current_version=meeting.version)
    if meeting.status == "CANCELLED":
        raise errors.MeetingCancelled(meeting_id=meeting_id)
    # Read again under the lock: the list may have changed while we waited for it.
    current = set((await session.scalars(select(MeetingRequiredAttendee.user_id).where(
        MeetingRequiredAttendee.meeting_id == meeting_id))).all())
    added = [u for u in wanted if u not in current]
    await require_users(session, added)
    removed = sorted(current - set(wanted))
    if removed:
        await session.execute(delete(MeetingRequiredAttendee).where(
            MeetingRequiredAttendee.meeting_id == meeting_id, MeetingRequiredAttendee.user_id.in_(removed)))
    await add_attendees(session, [meeting_id], added, now=now, added_by=principal_id)
    if added or removed:
        extra = {"is_exception": True} if meeting.series_id is not None and mark_exception else {}
        await session.execute(update(Meeting).where(Meeting.id == meeting_id).values(
            version=Meeting.version + 1, updated_at=now, **extra))
        await audit.record(session, action=Action.REQUIRED_ATTENDEES_UPDATED, resource=Resource.MEETING,
                           resource_id=meeting_id, meeting_id=meeting_id, series_id=meeting.series_id, now=now,
                           actor=actor or Actor.user(principal_id), after={"added": added, "removed": removed,
                                                              "count": len(wanted)})
    return wanted, added, removed


async def regenerate_codes(session: AsyncSession, *, meeting_id: str, principal_id: uuid.UUID | None, base_url: str,
                           now: datetime) -> None:
    """Rewrite both stored codes from the current TENET_PUBLIC_BASE_URL (spec §关键决策 3)."""
    await lock_meeting(session, meeting_id)
    await store_codes(session, [meeting_id], base_url=base_url, now=now, actor_id=principal_id)
    await audit.record(session, action=Action.QR_CODES_REGENERATED, resource=Resource.QR_CODE, resource_id=meeting_id,
                       meeting_id=meeting_id, now=now,
                       actor=Actor.user(principal_id) if principal_id else Actor.system(), after={"base_url": base_url})


async def regenerate_all_codes(session: AsyncSession, *, base_url: str, now: datetime) -> int:
    """The spec's post-migration step: every live meeting's codes from the current base URL."""
    ids = list((await session.scalars(select(Meeting.id).where(Meeting.status != "DELETED").order_by(
        Meeting.id))).all())
    for start in range(0, len(ids), 200):
        await store_codes(session, ids[start:start + 200], base_url=base_url, now=now, actor_id=None)
    if ids:
        await session.execute(insert(audit.AuditLog).values(
            occurred_at=now, action=Action.QR_CODES_REGENERATED.value, resource=Resource.QR_CODE.value,
            resource_id="*", actor_type="system", changes={"entityId": "*", "entityType": "QR_CODE",
                                                          "before": None, "after": {"meetings": len(ids)}}))
    return len(ids)
