"""Agenda commands: sections, items, ordering, upload tasks (spec §议程能力架构). Each runs in the caller's unit of
work and never commits.

Lock order (tenet.meetings.domain): accounts FOR SHARE -> the meeting row FOR NO KEY UPDATE (every agenda command
takes it first: one lock serialises the agenda of one meeting without ever blocking check-ins, whose foreign keys
take FOR KEY SHARE) -> sections -> items FOR UPDATE (id order) -> tasks -> attachments.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.iam.principal import Principal
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.errors import DomainError, PreconditionFailed, ValidationFailed
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import audit, errors, lifecycles, queries
from tenet.meetings.agenda.models import TASK_PENDING_INDEX, AgendaItem, AgendaSection, UploadTask
from tenet.meetings.audit import Action, Resource
from tenet.meetings.models import Meeting, MeetingRequiredAttendee
from tenet.meetings.permissions import MANAGER_ROLES
from tenet.meetings.service import lock_meeting

ITEM_FIELDS = ("title", "description", "code", "time_minutes", "presenter_user_id", "category_tag")


@dataclass(frozen=True)
class Editing:
    """The meeting an agenda command changes, locked, and who changes it."""

    meeting: Meeting
    actor: Actor

    async def audit(self, session: AsyncSession, action: Action, resource: Resource, resource_id: object,
                    now: datetime, **changes: Any) -> None:
        await audit.record(session, action=action, resource=resource, resource_id=resource_id,
                           meeting_id=self.meeting.id, meeting_end=self.meeting.end_time, now=now, actor=self.actor,
                           **changes)


async def _is_participant(session: AsyncSession, meeting: Meeting, user_id: uuid.UUID) -> bool:
    if user_id in (meeting.created_by_id, meeting.organizer_id):
        return True
    return bool((await session.execute(select(exists().where(
        MeetingRequiredAttendee.meeting_id == meeting.id, MeetingRequiredAttendee.user_id == user_id)))).scalar())


async def edit(session: AsyncSession, meeting_id: str, principal: Principal, *, writing: bool = True) -> Editing:
    """Lock the meeting and check the caller may change its agenda: managers and the meeting's creator (spec
    §权限矩阵 "manager + creator 才能改"; the route checked the permission point). A participant who may not is
    answered 403, anyone else 404. `writing` refuses a cancelled meeting (D-39; deletions still work)."""
    meeting = await lock_meeting(session, meeting_id)
    if not (principal.roles & MANAGER_ROLES) and meeting.created_by_id != principal.id:
        if await _is_participant(session, meeting, principal.id):
            raise meeting_errors.MeetingActionForbidden(action="edit-agenda", identity="participant")
        raise meeting_errors.MeetingNotFound()
    if writing and meeting.status == "CANCELLED":
        raise meeting_errors.MeetingCancelled(meeting_id=meeting_id)
    return Editing(meeting, Actor.user(principal.id))


async def _meeting_of(session: AsyncSession, kind: str, row_id: uuid.UUID, missing: type[DomainError]) -> str:
    """The meeting of a live section, item or task (the agenda's own look-up), or `missing`."""
    found = await queries.meeting_of(await statements(session), kind, row_id)
    if found is None:
        raise missing()
    return found


async def _meeting_of_section(session: AsyncSession, section_id: uuid.UUID) -> str:
    return await _meeting_of(session, "section", section_id, errors.AgendaSectionNotFound)


async def _meeting_of_item(session: AsyncSession, item_id: uuid.UUID) -> str:
    return await _meeting_of(session, "item", item_id, errors.AgendaItemNotFound)


async def _live_count(session: AsyncSession, model: type[AgendaSection] | type[AgendaItem], parent: Any,
                      parent_id: object) -> int:
    """The live rows under a parent: the next position at its end (MA-INV-21, under the meeting lock)."""
    return int((await session.execute(select(func.count()).select_from(model).where(
        parent == parent_id, model.deleted_at.is_(None)))).scalar_one())


async def _close_gap(session: AsyncSession, table: str, parent_column: str, parent_id: object, position: int | None,
                     now: datetime) -> None:
    """The rows after a removed one move up by one, so positions stay 0..n-1 (MA-INV-21)."""
    await (await statements(session)).execute(
        f"UPDATE meeting_attendance.{table} SET sort_order = sort_order - 1, updated_at = %(now)s "  # noqa: S608
        f"WHERE {parent_column} = %(p)s AND deleted_at IS NULL AND sort_order > %(position)s",
        {"p": parent_id, "position": position, "now": now})


async def _live_section(session: AsyncSession, section_id: uuid.UUID, meeting_id: str, *,
                        lock: bool = False) -> AgendaSection:
    statement = select(AgendaSection).where(AgendaSection.id == section_id, AgendaSection.meeting_id == meeting_id,
                                            AgendaSection.deleted_at.is_(None))
    if lock:
        statement = statement.with_for_update()
    section = (await session.scalars(statement.execution_options(populate_existing=True))).one_or_none()
    if section is None:
        raise errors.AgendaSectionNotFound()
    return section


async def _live_item(session: AsyncSession, item_id: uuid.UUID, *, lock: bool = False) -> AgendaItem:
    statement = select(AgendaItem).where(AgendaItem.id == item_id, AgendaItem.deleted_at.is_(None))
    if lock:
        statement = statement.with_for_update()
    item = (await session.scalars(statement.execution_options(populate_existing=True))).one_or_none()
    if item is None:
        raise errors.AgendaItemNotFound()
    return item


# --- sections --------------------------------------------------------------------------------------------------


async def create_section(session: AsyncSession, *, meeting_id: str, title: str, principal: Principal,
                         now: datetime) -> AgendaSection:
    """Appended at the end (order n), under the meeting lock (MA-INV-21)."""
    editing = await edit(session, meeting_id, principal)
    count = await _live_count(session, AgendaSection, AgendaSection.meeting_id, meeting_id)
    section = AgendaSection(id=uuid.uuid4(), meeting_id=meeting_id, sort_order=count, title=title,
                            created_by_id=principal.id, created_at=now, updated_at=now, version=1)
    session.add(section)
    await session.flush()
    await editing.audit(session, Action.AGENDA_SECTION_CREATED, Resource.AGENDA_SECTION, section.id, now,
                        after={"title": title, "order": count})
    return section


async def update_section(session: AsyncSession, *, section_id: uuid.UUID, title: str, principal: Principal,
                         expected_version: int | None, now: datetime) -> AgendaSection:
    meeting_id = await _meeting_of_section(session, section_id)
    editing = await edit(session, meeting_id, principal)
    section = await _live_section(session, section_id, meeting_id)
    if expected_version is not None and section.version != expected_version:
        raise PreconditionFailed(current_version=section.version)
    if section.title == title:
        return section
    before = section.title
    await session.execute(update(AgendaSection).where(AgendaSection.id == section_id).values(
        title=title, updated_at=now, version=AgendaSection.version + 1))
    await editing.audit(session, Action.AGENDA_SECTION_UPDATED, Resource.AGENDA_SECTION, section_id, now,
                        before={"title": before}, after={"title": title})
    return await _live_section(session, section_id, meeting_id)


async def _cascade_items(session: AsyncSession, item_ids: list[uuid.UUID], *, actor_id: uuid.UUID | None,
                         now: datetime) -> dict[str, int]:
    """Soft-delete the items' live tasks and attachments, then the items (spec: "删除议程项 → 资料和任务在同事务里
    cascade soft-delete"). The caller holds the items FOR UPDATE, so no upload commits under them meanwhile."""
    if not item_ids:
        return {"items": 0, "tasks": 0, "attachments": 0}
    params = {"ids": item_ids, "now": now, "by": actor_id}
    sql = await statements(session)
    tasks = await sql.execute(
        "UPDATE meeting_attendance.meeting_agenda_item_upload_tasks SET deleted_at = %(now)s, deleted_by_id = %(by)s, "
        "updated_at = %(now)s WHERE agenda_item_id = ANY(%(ids)s) AND deleted_at IS NULL", params)
    attachments = await sql.execute(
        "UPDATE meeting_attendance.meeting_agenda_item_attachments SET deleted_at = %(now)s, deleted_by_id = %(by)s "
        "WHERE agenda_item_id = ANY(%(ids)s) AND deleted_at IS NULL", params)
    items = await sql.execute(
        "UPDATE meeting_attendance.meeting_agenda_items SET deleted_at = %(now)s, deleted_by_id = %(by)s, "
        "sort_order = NULL, updated_at = %(now)s, version = version + 1 "
        "WHERE id = ANY(%(ids)s) AND deleted_at IS NULL", params)
    return {"items": items, "tasks": tasks, "attachments": attachments}


async def delete_section(session: AsyncSession, *, section_id: uuid.UUID, principal: Principal,
                         now: datetime) -> None:
    """The section, its items, their tasks and attachments in one transaction, under row locks on the section and
    each item (id order); the gap it leaves is closed (MA-INV-21, MA-INV-22)."""
    meeting_id = await _meeting_of_section(session, section_id)
    editing = await edit(session, meeting_id, principal, writing=False)
    section = await _live_section(session, section_id, meeting_id, lock=True)
    item_ids = list((await session.scalars(select(AgendaItem.id).where(
        AgendaItem.section_id == section_id, AgendaItem.deleted_at.is_(None)))).all())
    locked = await lock_rows(session, AgendaItem, item_ids, mode="update")
    cascaded = await _cascade_items(session, locked, actor_id=principal.id, now=now)
    position = section.sort_order
    await session.execute(update(AgendaSection).where(AgendaSection.id == section_id).values(
        deleted_at=now, deleted_by_id=principal.id, sort_order=None, updated_at=now, version=AgendaSection.version + 1))
    await _close_gap(session, "meeting_agenda_sections", "meeting_id", meeting_id, position, now)
    await editing.audit(session, Action.AGENDA_SECTION_DELETED, Resource.AGENDA_SECTION, section_id, now,
                        before={"title": section.title, "order": position}, after={"deleted": True, **cascaded})


async def _reorder(session: AsyncSession, table: str, parent_column: str, parent_id: object,
                   ids: list[uuid.UUID], now: datetime) -> list[tuple[uuid.UUID, int, int]]:
    """One UPDATE permuting the live rows of a parent (spec §并发与事务: `SET order = CASE id WHEN ...`), on the
    deferrable unique constraint. `ids` must be exactly the live rows (AGENDA_ORDER_MISMATCH with the current ids)."""
    sql = await statements(session)
    rows = await sql.all(
        f"SELECT id, sort_order FROM meeting_attendance.{table} "  # noqa: S608  (constants of this module)
        f"WHERE {parent_column} = %(p)s AND deleted_at IS NULL ORDER BY sort_order", {"p": parent_id})
    current = [row["id"] for row in rows]
    if len(ids) != len(set(ids)) or set(ids) != set(current):
        raise errors.AgendaOrderMismatch(current_ids=[str(i) for i in current])
    old = {row["id"]: row["sort_order"] for row in rows}
    moved = [(row_id, old[row_id], position) for position, row_id in enumerate(ids) if old[row_id] != position]
    if moved:
        cases = " ".join(f"WHEN %(id{n})s THEN {position}" for n, (_, _, position) in enumerate(moved))
        params: dict[str, Any] = {f"id{n}": row_id for n, (row_id, _, _) in enumerate(moved)}
        changed = await sql.execute(
            f"UPDATE meeting_attendance.{table} SET sort_order = CASE id {cases} END, "  # noqa: S608
            f"updated_at = %(now)s, version = version + 1 WHERE {parent_column} = %(p)s AND deleted_at IS NULL "
            "AND id = ANY(%(moved)s)", {**params, "now": now, "p": parent_id, "moved": [m[0] for m in moved]})
        if changed != len(moved):
            raise errors.AgendaOrderMismatch(current_ids=[str(i) for i in current])
    return moved


async def reorder_sections(session: AsyncSession, *, meeting_id: str, ids: list[uuid.UUID], principal: Principal,
                           now: datetime) -> list[uuid.UUID]:
    editing = await edit(session, meeting_id, principal)
    moved = await _reorder(session, "meeting_agenda_sections", "meeting_id", meeting_id, ids, now)
    for row_id, before, after in moved:
        await editing.audit(session, Action.AGENDA_SECTION_UPDATED, Resource.AGENDA_SECTION, row_id, now,
                            before={"order": before}, after={"order": after}, reordered=True)
    return ids


# --- items -----------------------------------------------------------------------------------------------------


async def _check_presenter(session: AsyncSession, user_id: uuid.UUID | None) -> None:
    if user_id is None:
        return
    people = await iam_service.user_summaries(session, [user_id])
    if user_id not in people or people[user_id].status != "active":
        raise errors.PresenterNotFound(presenter_user_id=str(user_id))


def _audit_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The description is free text: audited as changed, never copied (D-30)."""
    kept = {k: v for k, v in values.items() if k != "description"}
    if "description" in values:
        kept["description_changed"] = True
    return kept


async def create_item(session: AsyncSession, *, section_id: uuid.UUID, fields: Mapping[str, Any],
                      principal: Principal, now: datetime) -> AgendaItem:
    meeting_id = await _meeting_of_section(session, section_id)
    await _check_presenter(session, fields.get("presenter_user_id"))
    editing = await edit(session, meeting_id, principal)
    await _live_section(session, section_id, meeting_id)
    count = await _live_count(session, AgendaItem, AgendaItem.section_id, section_id)
    item = AgendaItem(id=uuid.uuid4(), section_id=section_id, sort_order=count, created_by_id=principal.id,
                      created_at=now, updated_at=now, version=1, **{k: fields.get(k) for k in ITEM_FIELDS})
    session.add(item)
    await session.flush()
    await editing.audit(session, Action.AGENDA_ITEM_CREATED, Resource.AGENDA_ITEM, item.id, now,
                        after=_audit_fields({**{k: v for k, v in fields.items() if v is not None},
                                             "section_id": section_id, "order": count}))
    return item


async def update_item(session: AsyncSession, *, item_id: uuid.UUID, changes: Mapping[str, Any], principal: Principal,
                      expected_version: int | None, now: datetime) -> AgendaItem:
    """PATCH: the fields given; `section_id` moves the item to the end of another section of the same meeting."""
    if "title" in changes and changes["title"] is None:
        raise ValidationFailed("An item's title cannot be cleared")
    meeting_id = await _meeting_of_item(session, item_id)
    if changes.get("presenter_user_id") is not None:
        await _check_presenter(session, changes["presenter_user_id"])
    editing = await edit(session, meeting_id, principal)
    item = await _live_item(session, item_id, lock=True)
    if expected_version is not None and item.version != expected_version:
        raise PreconditionFailed(current_version=item.version)
    values = {k: v for k, v in changes.items() if k in ITEM_FIELDS and getattr(item, k) != v}
    target = changes.get("section_id")
    moving = target is not None and target != item.section_id
    if not values and not moving:
        return item
    before = {k: getattr(item, k) for k in values}
    extra: dict[str, Any] = {}
    if target is not None and moving:
        await _live_section(session, target, meeting_id)
        old_section, old_position = item.section_id, item.sort_order
        count = await _live_count(session, AgendaItem, AgendaItem.section_id, target)
        extra = {"section_id": target, "sort_order": count}
        before.update({"section_id": old_section, "order": old_position})
    await session.execute(update(AgendaItem).where(AgendaItem.id == item_id).values(
        **values, **extra, updated_at=now, version=AgendaItem.version + 1))
    if moving:
        await _close_gap(session, "meeting_agenda_items", "section_id", old_section, old_position, now)
    after = {**values, **({"section_id": target, "order": extra["sort_order"]} if moving else {})}
    await editing.audit(session, Action.AGENDA_ITEM_UPDATED, Resource.AGENDA_ITEM, item_id, now,
                        before=_audit_fields(before), after=_audit_fields(after))
    return await _live_item(session, item_id)


async def delete_item(session: AsyncSession, *, item_id: uuid.UUID, principal: Principal, now: datetime) -> None:
    """Meeting lock -> the item FOR UPDATE (spec §并发与事务: against a concurrent attachment insert) -> its tasks and
    attachments -> the item; the gap is closed."""
    meeting_id = await _meeting_of_item(session, item_id)
    editing = await edit(session, meeting_id, principal, writing=False)
    item = await _live_item(session, item_id, lock=True)
    position, section_id = item.sort_order, item.section_id
    cascaded = await _cascade_items(session, [item_id], actor_id=principal.id, now=now)
    await _close_gap(session, "meeting_agenda_items", "section_id", section_id, position, now)
    await editing.audit(session, Action.AGENDA_ITEM_DELETED, Resource.AGENDA_ITEM, item_id, now,
                        before={"title": item.title, "order": position, "section_id": section_id},
                        after={"deleted": True, "tasks": cascaded["tasks"], "attachments": cascaded["attachments"]})


async def reorder_items(session: AsyncSession, *, section_id: uuid.UUID, ids: list[uuid.UUID], principal: Principal,
                        now: datetime) -> list[uuid.UUID]:
    meeting_id = await _meeting_of_section(session, section_id)
    editing = await edit(session, meeting_id, principal)
    await _live_section(session, section_id, meeting_id)
    moved = await _reorder(session, "meeting_agenda_items", "section_id", section_id, ids, now)
    for row_id, before, after in moved:
        await editing.audit(session, Action.AGENDA_ITEM_UPDATED, Resource.AGENDA_ITEM, row_id, now,
                            before={"order": before}, after={"order": after}, reordered=True)
    return ids


# --- upload tasks ----------------------------------------------------------------------------------------------


async def assign_tasks(session: AsyncSession, *, item_id: uuid.UUID, assignee_ids: Iterable[uuid.UUID],
                       due_at: datetime | None, principal: Principal, now: datetime) -> list[UploadTask]:
    """One PENDING task per assignee (MA-INV-24): accounts share-locked first (ACCOUNT_NOT_ACTIVE for a disabled or
    deleted one), then the meeting; assignees must be participants (required attendee, creator or organizer)."""
    wanted = sorted(set(assignee_ids))
    known = await iam_service.user_summaries(session, wanted)
    unknown = [str(u) for u in wanted if u not in known]
    if unknown:
        raise errors.UploadTaskAssigneeInvalid(user_ids=unknown[:50], reason="unknown")
    await iam_service.require_active_accounts(session, wanted)
    meeting_id = await _meeting_of_item(session, item_id)
    editing = await edit(session, meeting_id, principal)
    await _live_item(session, item_id)
    meeting = editing.meeting
    required = set((await session.scalars(select(MeetingRequiredAttendee.user_id).where(
        MeetingRequiredAttendee.meeting_id == meeting_id, MeetingRequiredAttendee.user_id.in_(wanted)))).all())
    insiders = required | {meeting.created_by_id, meeting.organizer_id}
    outsiders = [str(u) for u in wanted if u not in insiders]
    if outsiders:
        raise errors.UploadTaskAssigneeInvalid(user_ids=outsiders[:50], reason="not_a_participant")
    pending = (await session.scalars(select(UploadTask.id).where(
        UploadTask.agenda_item_id == item_id, UploadTask.assignee_user_id.in_(wanted), UploadTask.status == "PENDING",
        UploadTask.deleted_at.is_(None)).order_by(UploadTask.id))).all()
    if pending:
        raise errors.UploadTaskAlreadyPending(task_ids=[str(t) for t in pending])
    tasks = []
    for assignee in wanted:
        task = UploadTask(id=uuid.uuid4(), agenda_item_id=item_id, assignee_user_id=assignee,
                          assigned_by_id=principal.id, created_by_id=principal.id, status="PENDING", due_at=due_at,
                          assigned_at=now, updated_at=now, version=1)
        await add_unique(session, task, on_violation={TASK_PENDING_INDEX: errors.UploadTaskAlreadyPending})
        tasks.append(task)
        await editing.audit(session, Action.UPLOAD_TASK_ASSIGNED, Resource.UPLOAD_TASK, task.id, now,
                            after={"agenda_item_id": item_id, "assignee_user_id": assignee, "due_at": due_at})
    return tasks


async def _meeting_of_task(session: AsyncSession, task_id: uuid.UUID) -> str:
    return await _meeting_of(session, "task", task_id, errors.UploadTaskNotFound)


def _task_refusal(refusal: Refusal[UploadTask]) -> Exception:
    if refusal.reason == "missing" or (refusal.current is not None and refusal.current.deleted_at is not None):
        return errors.UploadTaskNotFound()
    return errors.UploadTaskNotPending(status=refusal.status)


async def cancel_task(session: AsyncSession, *, task_id: uuid.UUID, principal: Principal,
                      now: datetime) -> UploadTask:
    """PENDING -> CANCELLED, a conditional UPDATE (an upload flipping it at the same moment wins or loses whole)."""
    meeting_id = await _meeting_of_task(session, task_id)
    editing = await edit(session, meeting_id, principal, writing=False)
    task = await transition(session, lifecycles.UPLOAD_TASK, "cancel", model=UploadTask, id=task_id,
                            where=(UploadTask.deleted_at.is_(None),),
                            values={"cancelled_at": now, "cancelled_by_id": principal.id, "updated_at": now},
                            refuse=_task_refusal)  # type: ignore[arg-type]
    await editing.audit(session, Action.UPLOAD_TASK_CANCELLED, Resource.UPLOAD_TASK, task_id, now,
                        before={"status": "PENDING"}, after={"status": "CANCELLED"})
    return task


async def delete_task(session: AsyncSession, *, task_id: uuid.UUID, principal: Principal, now: datetime) -> None:
    """Soft delete in any state (gone from every list); audited as UPLOAD_TASK_CANCELLED with `deleted: true` (the
    spec's constants have no deletion action for tasks, D-38)."""
    meeting_id = await _meeting_of_task(session, task_id)
    editing = await edit(session, meeting_id, principal, writing=False)
    status = await (await statements(session)).value(
        "UPDATE meeting_attendance.meeting_agenda_item_upload_tasks SET deleted_at = %(now)s, deleted_by_id = %(by)s, "
        "updated_at = %(now)s, version = version + 1 WHERE id = %(id)s AND deleted_at IS NULL RETURNING status",
        {"id": task_id, "now": now, "by": principal.id})
    if status is None:
        raise errors.UploadTaskNotFound()
    await editing.audit(session, Action.UPLOAD_TASK_CANCELLED, Resource.UPLOAD_TASK, task_id, now,
                        before={"status": status}, after={"status": status, "deleted": True})
