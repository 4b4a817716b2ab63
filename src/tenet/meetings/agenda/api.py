"""Routes of the agenda (API.md "Agenda", "Upload tasks", "Attachments") under /api/v1/meeting-attendance (the
router carries the whole path). Commands are tenet.meetings.agenda.service's (sections, items, tasks) and
.attachments'; a command's answer is read back through the query its GET uses (`queries.agenda`), in the command's
transaction."""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import CurrentUser, require
from tenet.iam.principal import Principal
from tenet.kernel.errors import PermissionDenied
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.idempotency import streams_body
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.settings import section
from tenet.kernel.statements import statements
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import attachments, downloads, errors, queries, service, storage, uploads
from tenet.meetings.agenda.models import ATTACHMENT_CATEGORIES, AgendaSection
from tenet.meetings.agenda.permissions import TAG
from tenet.meetings.agenda.schemas import (
    AgendaExternalRead,
    AgendaRead,
    DeletedAttachmentRead,
    ItemAttachmentRead,
    ItemCreate,
    ItemRead,
    ItemUpdate,
    MeetingAttachmentRead,
    MyUploadTaskRead,
    Order,
    OrderRead,
    SectionCreate,
    SectionRead,
    SectionUpdate,
    TaskAssign,
    TaskList,
    TaskStatus,
    UploadTaskRead,
)
from tenet.meetings.permissions import Permission
from tenet.meetings.queries import BASE, valid_meeting_id
from tenet.meetings.settings import MeetingSettings

router = APIRouter(prefix=BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
Reader = Annotated[Principal, Depends(require(Permission.READ))]
Editor = Annotated[Principal, Depends(require(Permission.AGENDA_UPDATE))]
Assigner = Annotated[Principal, Depends(require(Permission.UPLOAD_TASK_ASSIGN))]
Downloader = Annotated[Principal, Depends(require(Permission.ATTACHMENT_DOWNLOAD))]
Restorer = Annotated[Principal, Depends(require(Permission.ATTACHMENT_RESTORE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The ETag ("<version>") read before')]
Kind = Literal["agenda-item", "meeting"]
# The upload routes' body ceiling (Starlette's per-route limit); MEETING_ATTACHMENT_MAX_BYTES (at most 4 GiB, its
# setting's bound) is enforced below it while streaming, with the agenda's own code.
BODY_CEILING = 4 * 1024**3 + uploads.OVERHEAD


async def _agenda_of(session: AsyncSession, meeting_id: str, principal: Principal) -> dict[str, Any]:
    """The agenda as its GET shows it, read by the GET's query inside the writing transaction."""
    await session.flush()
    return await queries.agenda(await statements(session), meeting_id=meeting_id, principal=principal)


async def _section_answer(session: AsyncSession, row: AgendaSection, principal: Principal) -> SectionRead:
    found = await _agenda_of(session, row.meeting_id, principal)
    return SectionRead.model_validate(queries.section_in(found, row.id))


async def _item_answer(session: AsyncSession, item_id: uuid.UUID, principal: Principal) -> ItemRead:
    meeting_id = await queries.meeting_of(await statements(session), "item", item_id)
    assert meeting_id is not None  # the command just wrote the live item
    return ItemRead.model_validate(queries.item_in(await _agenda_of(session, meeting_id, principal), item_id))


async def _task_answers(session: AsyncSession, item_id: uuid.UUID, task_ids: list[uuid.UUID],
                        principal: Principal) -> list[UploadTaskRead]:
    """Tasks of one item as the agenda shows them (to managers and the creator: every task), in `task_ids`' order."""
    meeting_id = await queries.meeting_of(await statements(session), "item", item_id)
    assert meeting_id is not None  # the command just wrote a live task on it
    shown = {str(t["id"]): t for t in queries.item_in(await _agenda_of(session, meeting_id, principal),
                                                       item_id)["upload_tasks"]}
    return [UploadTaskRead.model_validate(shown[str(task_id)]) for task_id in task_ids]


# --- the agenda --------------------------------------------------------------------------------------------------


@router.get("/meetings/{meeting_id}/agenda", response_model=AgendaRead | AgendaExternalRead,
            summary="The agenda of a meeting (full for participants, titles only for external attendees)",
            description="Participants (managers, the creator, the organizer, required attendees) get every field, "
                        "the files and the upload tasks (all of them for managers and the creator, their own for "
                        "others); an external attendee (a signed-in walk-in) gets section and item titles only.")
async def get_agenda(meeting_id: str, principal: Reader, request: Request) -> Response:
    found = await queries.agenda(reads(request), meeting_id=meeting_id, principal=principal)
    model = AgendaRead if found["view"] == "full" else AgendaExternalRead
    return json_response(model.model_validate(found))


@router.post("/meetings/{meeting_id}/agenda/sections", status_code=201, response_model=SectionRead,
             summary="Add a section at the end (managers, the creator)", responses=problem_responses(409, 422))
async def create_section(meeting_id: str, body: SectionCreate, principal: Editor, session: SessionDep,
                         now: NowDep) -> Response:
    row = await service.create_section(session, meeting_id=valid_meeting_id(meeting_id), title=body.title,
                                       principal=principal, now=now)
    return json_response(await _section_answer(session, row, principal), status_code=201,
                         headers={"ETag": etag(row.version)})


@router.patch("/agenda/sections/{section_id}", response_model=SectionRead, summary="Rename a section",
              responses=problem_responses(409, 412, 422))
async def update_section(section_id: uuid.UUID, body: SectionUpdate, principal: Editor, session: SessionDep,
                         now: NowDep, if_match: IfMatch = None) -> Response:
    row = await service.update_section(session, section_id=section_id, title=body.title, principal=principal,
                                       expected_version=if_match_version(if_match), now=now)
    return json_response(await _section_answer(session, row, principal), headers={"ETag": etag(row.version)})


@router.delete("/agenda/sections/{section_id}", status_code=204,
               summary="Delete a section with its items, their tasks and files (soft; purged after the window)")
async def delete_section(section_id: uuid.UUID, principal: Editor, session: SessionDep, now: NowDep) -> None:
    await service.delete_section(session, section_id=section_id, principal=principal, now=now)


@router.put("/meetings/{meeting_id}/agenda/sections/order", response_model=OrderRead,
            summary="Reorder the sections (every live section, in the new order)",
            description="409 `AGENDA_ORDER_MISMATCH` (with `current_ids`) unless `ids` are exactly the live sections.",
            responses=problem_responses(409, 422))
async def reorder_sections(meeting_id: str, body: Order, principal: Editor, session: SessionDep,
                           now: NowDep) -> OrderRead:
    ids = await service.reorder_sections(session, meeting_id=valid_meeting_id(meeting_id), ids=body.ids,
                                         principal=principal, now=now)
    return OrderRead(ids=ids)


@router.post("/agenda/sections/{section_id}/items", status_code=201, response_model=ItemRead,
             summary="Add an item at the end of a section", responses=problem_responses(409, 422))
async def create_item(section_id: uuid.UUID, body: ItemCreate, principal: Editor, session: SessionDep,
                      now: NowDep) -> Response:
    row = await service.create_item(session, section_id=section_id, fields=body.model_dump(), principal=principal,
                                    now=now)
    return json_response(await _item_answer(session, row.id, principal), status_code=201,
                         headers={"ETag": etag(row.version)})


@router.patch("/agenda/items/{item_id}", response_model=ItemRead, summary="Change an item (or move it)",
              description="Absent fields are unchanged, null clears. `section_id` moves the item to the end of "
                          "another section of the same meeting. `If-Match` takes the item's ETag.",
              responses=problem_responses(409, 412, 422))
async def update_item(item_id: uuid.UUID, body: ItemUpdate, principal: Editor, session: SessionDep, now: NowDep,
                      if_match: IfMatch = None) -> Response:
    row = await service.update_item(session, item_id=item_id, changes=body.model_dump(exclude_unset=True),
                                    principal=principal, expected_version=if_match_version(if_match), now=now)
    return json_response(await _item_answer(session, row.id, principal), headers={"ETag": etag(row.version)})


@router.delete("/agenda/items/{item_id}", status_code=204,
               summary="Delete an item with its tasks and files (soft; purged after the window)")
async def delete_item(item_id: uuid.UUID, principal: Editor, session: SessionDep, now: NowDep) -> None:
    await service.delete_item(session, item_id=item_id, principal=principal, now=now)


@router.put("/agenda/sections/{section_id}/items/order", response_model=OrderRead,
            summary="Reorder the items of a section", responses=problem_responses(409, 422))
async def reorder_items(section_id: uuid.UUID, body: Order, principal: Editor, session: SessionDep,
                        now: NowDep) -> OrderRead:
    ids = await service.reorder_items(session, section_id=section_id, ids=body.ids, principal=principal, now=now)
    return OrderRead(ids=ids)


# --- upload tasks --------------------------------------------------------------------------------------------------


@router.post("/agenda/items/{item_id}/upload-tasks", status_code=201, response_model=TaskList,
             summary="Ask participants to upload material for an item (one PENDING task each)",
             responses=problem_responses(409, 422))
async def assign_tasks(item_id: uuid.UUID, body: TaskAssign, principal: Assigner, session: SessionDep,
                       now: NowDep) -> Response:
    rows = await service.assign_tasks(session, item_id=item_id, assignee_ids=body.assignee_user_ids,
                                      due_at=body.due_at, principal=principal, now=now)
    answers = await _task_answers(session, item_id, [r.id for r in rows], principal)
    return json_response(TaskList(items=answers), status_code=201)


@router.post("/upload-tasks/{task_id}/cancel", response_model=UploadTaskRead, summary="Cancel a pending task",
             responses=problem_responses(409))
async def cancel_task(task_id: uuid.UUID, principal: Assigner, session: SessionDep, now: NowDep) -> UploadTaskRead:
    task = await service.cancel_task(session, task_id=task_id, principal=principal, now=now)
    return (await _task_answers(session, task.agenda_item_id, [task.id], principal))[0]


@router.delete("/upload-tasks/{task_id}", status_code=204, summary="Delete a task (any state; soft)")
async def delete_task(task_id: uuid.UUID, principal: Assigner, session: SessionDep, now: NowDep) -> None:
    await service.delete_task(session, task_id=task_id, principal=principal, now=now)


@router.get("/me/upload-tasks", response_model=Page[MyUploadTaskRead], summary="My upload tasks",
            description="Soonest due first, undated last.", responses=problem_responses(400))
async def my_tasks(principal: Reader, request: Request, params: PageDep, status: TaskStatus | None = None) -> Response:
    rows, cursor = await queries.my_tasks(reads(request), principal=principal, status=status.value if status else None,
                                          page=params)
    return json_response(Page[MyUploadTaskRead](items=[MyUploadTaskRead.model_validate(r) for r in rows],
                                                next_cursor=cursor))


# --- attachments ---------------------------------------------------------------------------------------------------

_UPLOAD_BODY = {
    "required": True,
    "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary"}},
    }}},
}
_MEETING_UPLOAD_BODY = {
    "required": True,
    "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary"},
                       "category": {"type": "string", "enum": list(ATTACHMENT_CATEGORIES)}},
    }}},
}
_UPLOAD_ERRORS = problem_responses(400, 409, 413, 415)


def _own(request: Request) -> MeetingSettings:
    return section(request.app.state.settings, MeetingSettings)


async def _store(request: Request, kind: str, received: uploads.Received, now: datetime) -> attachments.StoredFile:
    attachment_id = uuid.uuid4()
    key = storage.key_for(kind, attachment_id, now)
    try:
        await storage.of(request.app.state).commit(received.path, key)
    finally:
        with contextlib.suppress(FileNotFoundError):
            received.path.unlink()
    return attachments.StoredFile(attachment_id=attachment_id, key=key, filename=received.filename,
                                  mime_type=received.mime_type, size=received.size, sha256=received.sha256)


async def _commit(request: Request, stored: attachments.StoredFile, record: Any) -> Any:
    """The short unit of work that makes the stored file exist; on any refusal the file is deleted again."""
    try:
        async with request.app.state.db.unit_of_work() as session:
            return await record(session)
    except BaseException:
        await storage.of(request.app.state).delete(stored.key)
        raise


def _attachment_answer(row: Any, kind: str, **extra: Any) -> dict[str, Any]:
    return {"id": row.id, "uploaded_by_id": row.uploaded_by_id, "filename": row.filename, "mime_type": row.mime_type,
            "size": str(row.size), "sha256": row.sha256, "uploaded_at": row.uploaded_at,
            "download_url": queries.download_url(kind, row.id), **extra}


@router.post("/agenda-items/{item_id}/attachments", status_code=201, response_model=ItemAttachmentRead,
             max_body_size=BODY_CEILING, openapi_extra={"requestBody": _UPLOAD_BODY}, responses=_UPLOAD_ERRORS,
             summary="Upload a file to an agenda item (managers; participants with an upload task)",
             description="`multipart/form-data` with the single part `file`. Uploading completes the caller's oldest "
                         "PENDING task on the item (`task_completed_id`). 413 `ATTACHMENT_TOO_LARGE` past "
                         "MEETING_ATTACHMENT_MAX_BYTES; 415 `ATTACHMENT_MIME_NOT_ALLOWED` / "
                         "`ATTACHMENT_MIME_MISMATCH`.")
@streams_body
async def upload_item_attachment(item_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    answer = await upload_to_item(request, principal, item_id)
    return json_response(answer, status_code=201, headers={"Location": answer.download_url})


async def upload_to_item(request: Request, principal: Principal, item_id: uuid.UUID,
                         fields: tuple[str, ...] = (), check: Any = None) -> ItemAttachmentRead:
    """An agenda item's upload, as the API's route and the console's "My upload tasks" page both run it: who may,
    the body streamed to a temp file, stored, recorded (completing the caller's oldest PENDING task on the item).
    `check(received)` (the console's CSRF field) runs after the body, before anything is stored."""
    if not (principal.can(Permission.ATTACHMENT_UPLOAD_ANY) or principal.can(Permission.ATTACHMENT_UPLOAD_ASSIGNED)):
        raise PermissionDenied(f"Requires the permission {Permission.ATTACHMENT_UPLOAD_ASSIGNED.value}",
                               permission=Permission.ATTACHMENT_UPLOAD_ASSIGNED.value)
    target = await queries.item_upload_target(reads(request), item_id=item_id, principal=principal)
    if target["identity"] not in queries.PARTICIPANTS:
        raise errors.UploadTaskNotOwned()
    if target["status"] == "CANCELLED":
        raise meeting_errors.MeetingCancelled(meeting_id=target["meeting_id"])
    if not attachments.may_upload_any(principal, target["created_by_id"]) and not (
            principal.can(Permission.ATTACHMENT_UPLOAD_ASSIGNED) and target["holds_task"]):
        raise errors.UploadTaskNotOwned()
    own = _own(request)
    received = await uploads.receive(request, temp_dir=storage.temp_dir(request.app.state.settings),
                                     max_bytes=own.meeting_attachment_max_bytes, fields=fields)
    if check is not None:
        try:
            check(received)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                received.path.unlink()
            raise
    now = clock_now(request)
    stored = await _store(request, "agenda-item", received, now)
    row, flipped = await _commit(request, stored, lambda session: attachments.record_item_attachment(
        session, item_id=item_id, stored=stored, principal=principal, now=now, candidate=target["pending_task_id"]))
    return ItemAttachmentRead.model_validate(_attachment_answer(row, "agenda-item", agenda_item_id=item_id,
                                                                task_completed_id=flipped))


@router.post("/meetings/{meeting_id}/attachments", status_code=201, response_model=MeetingAttachmentRead,
             max_body_size=BODY_CEILING, openapi_extra={"requestBody": _MEETING_UPLOAD_BODY},
             responses=problem_responses(400, 409, 413, 415, 422),
             summary="Upload a meeting-level file (minutes, sign-in sheets, notices; managers)",
             description="`multipart/form-data`: the part `file` and an optional `category` (MINUTES, MATERIAL, "
                         "OTHER).")
@streams_body
async def upload_meeting_attachment(meeting_id: str, principal: CurrentUser, request: Request) -> Response:
    answer = await upload_to_meeting(request, principal, meeting_id)
    return json_response(answer, status_code=201, headers={"Location": answer.download_url})


async def upload_to_meeting(request: Request, principal: Principal, meeting_id: str,
                            fields: tuple[str, ...] = (), check: Any = None) -> MeetingAttachmentRead:
    """A meeting-level upload, as the API's route and the console's files page both run it (`check` as
    `upload_to_item`'s: the console's CSRF field, after the body, before anything is stored)."""
    if not principal.can(Permission.ATTACHMENT_UPLOAD_ANY):
        raise PermissionDenied(f"Requires the permission {Permission.ATTACHMENT_UPLOAD_ANY.value}",
                               permission=Permission.ATTACHMENT_UPLOAD_ANY.value)
    target = await queries.meeting_upload_target(reads(request), meeting_id=meeting_id, principal=principal)
    if not attachments.may_upload_any(principal, target["created_by_id"]):
        raise meeting_errors.MeetingActionForbidden(action="upload-meeting-attachment", identity=target["identity"])
    if target["status"] == "CANCELLED":
        raise meeting_errors.MeetingCancelled(meeting_id=meeting_id)
    own = _own(request)
    received = await uploads.receive(request, temp_dir=storage.temp_dir(request.app.state.settings),
                                     max_bytes=own.meeting_attachment_max_bytes, fields=("category", *fields))
    try:
        if check is not None:
            check(received)
        category = received.fields.get("category") or None
        if category is not None and category not in ATTACHMENT_CATEGORIES:
            raise errors.AttachmentCategoryInvalid(allowed=list(ATTACHMENT_CATEGORIES))
    except BaseException:
        received.path.unlink(missing_ok=True)
        raise
    now = clock_now(request)
    stored = await _store(request, "meeting", received, now)
    row = await _commit(request, stored, lambda session: attachments.record_meeting_attachment(
        session, meeting_id=meeting_id, category=category, stored=stored, principal=principal, now=now))
    return MeetingAttachmentRead.model_validate(_attachment_answer(row, "meeting", meeting_id=meeting_id,
                                                                   category=category))


_DOWNLOAD: dict[int | str, dict[str, Any]] = {
    # The stored type of the file (one of the upload whitelist).
    200: {"content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}, "description": "The file"},
    206: {"content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
          "description": "The requested byte range"},
    304: {"description": "Not modified"},
    **problem_responses(416),
}


async def download(request: Request, principal: Principal, kind: str, attachment_id: uuid.UUID) -> Response:
    """A file's download (Range answered), as the API's routes and the console's files page both answer it."""
    row = await queries.download(reads(request), kind=kind, attachment_id=attachment_id, principal=principal)
    return await downloads.answer(request, storage.of(request.app.state), key=row["storage_path"],
                                  filename=row["filename"], mime_type=row["mime_type"], size=row["size"],
                                  sha256=row["sha256"])


@router.get("/attachments/agenda-item/{attachment_id}/download", responses=_DOWNLOAD, response_class=Response,
            summary="Download an item file (participants; Range answered)")
async def download_item_attachment(attachment_id: uuid.UUID, principal: Downloader, request: Request) -> Response:
    return await download(request, principal, "agenda-item", attachment_id)


@router.get("/attachments/meeting/{attachment_id}/download", responses=_DOWNLOAD, response_class=Response,
            summary="Download a meeting file (participants; Range answered)")
async def download_meeting_attachment(attachment_id: uuid.UUID, principal: Downloader, request: Request) -> Response:
    return await download(request, principal, "meeting", attachment_id)


@router.delete("/attachments/agenda-item/{attachment_id}", status_code=204,
               summary="Delete an item file (the uploader; managers for anyone's)")
async def delete_item_attachment(attachment_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                                 now: NowDep) -> None:
    await attachments.delete_attachment(session, kind="agenda-item", attachment_id=attachment_id, principal=principal,
                                        now=now)


@router.delete("/attachments/meeting/{attachment_id}", status_code=204,
               summary="Delete a meeting file (the uploader; managers for anyone's)")
async def delete_meeting_attachment(attachment_id: uuid.UUID, principal: CurrentUser, session: SessionDep,
                                    now: NowDep) -> None:
    await attachments.delete_attachment(session, kind="meeting", attachment_id=attachment_id, principal=principal,
                                        now=now)


@router.post("/attachments/{kind}/{attachment_id}/restore", status_code=204,
             summary="Restore a deleted file inside the purge window (administrators)",
             responses=problem_responses(409))
async def restore_attachment(kind: Kind, attachment_id: uuid.UUID, principal: Restorer, session: SessionDep,
                             now: NowDep, settings: SettingsDep, request: Request) -> None:
    await attachments.restore_attachment(
        session, kind=kind, attachment_id=attachment_id, principal=principal, storage=storage.of(request.app.state),
        purge_days=section(settings, MeetingSettings).meeting_attachment_physical_delete_days, now=now)


@router.get("/meetings/{meeting_id}/attachments/deleted", response_model=list[DeletedAttachmentRead],
            summary="Deleted files of a meeting that can still be restored (administrators)")
async def deleted_attachments(meeting_id: str, principal: Restorer, request: Request,
                              limit: Annotated[int, Query(ge=1, le=500)] = 500) -> Response:
    rows = await queries.deleted_attachments(
        reads(request), meeting_id=meeting_id,
        purge_days=_own(request).meeting_attachment_physical_delete_days)
    body = [DeletedAttachmentRead.model_validate(r) for r in rows[:limit]]
    return Response(TypeAdapter(list[DeletedAttachmentRead]).dump_json(body), media_type="application/json")

