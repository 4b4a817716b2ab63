"""A meeting's files in the console (issue 18): the meeting's own files and each agenda item's (name, size in the
viewer's language, type, uploader, when: in the meeting's zone, the viewer's beside it when they differ), upload
with a progress bar up to the upload limit, download, delete after a confirmation, and for administrators the
deleted files with restore. (The module is `meeting_files`: `files` is importlib's in the package.)

Everything goes through what the API runs: the agenda's query for the lists (`agenda.queries.agenda`: the files of
the full view, so participants only), the API's own upload functions (`agenda.api.upload_to_meeting`,
`upload_to_item`: who may, the body streamed, stored, recorded), its download answer, and the attachment commands
(`attachments.delete_attachment`, `restore_attachment`) with their own checks. What the page offers is decided with
the same rules (`attachments.may_upload_any`, the permission points of the API's routes), so a forged form meets the
service's refusal, shown as the error page in words.

Uploads use the "My upload tasks" island (`/static/upload-tasks.js`): with script the file goes by XMLHttpRequest
with the CSRF header (refused before sending when it is over the limit the page states) and the answer is the file
list re-read; without it the form posts with its `csrf_token` field and the page comes back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import PermissionDenied
from tenet.kernel.idempotency import streams_body
from tenet.kernel.settings import section
from tenet.meetings import codes, queries
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import api as agenda_api
from tenet.meetings.agenda import attachments, errors, storage
from tenet.meetings.agenda import queries as agenda_queries
from tenet.meetings.agenda.models import ATTACHMENT_CATEGORIES
from tenet.meetings.pages.upload_tasks import upload_guard
from tenet.meetings.permissions import Permission
from tenet.meetings.settings import MeetingSettings
from tenet.web import console, i18n
from tenet.web.console import CSRF_FIELD, PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
Kind = Literal["agenda-item", "meeting"]
KindPath = Annotated[Kind, Path()]
CATEGORY_LABELS = {"MINUTES": N_("Minutes"), "MATERIAL": N_("Material"), "OTHER": N_("Other")}
_HELD = ("PENDING", "UPLOADED")  # a task that lets its assignee upload to the item (agenda.api.upload_to_item)


@dataclass(frozen=True, slots=True)
class FileRow:
    kind: str
    id: str
    name: str
    size: str  # in the viewer's language
    mime_type: str
    category: str  # a meeting file's category in words, or ""
    uploader: str
    uploaded: str  # in the meeting's zone, the viewer's beside it when they differ
    download: str
    delete: str | None  # the confirmation page's address when the viewer may delete it


@dataclass(frozen=True, slots=True)
class ItemFiles:
    id: str
    title: str
    section: str
    files: list[FileRow]
    upload: str | None  # the upload form's address when the viewer may upload here


def _principal(viewer: Viewer) -> Any:
    if not viewer.can(Permission.READ):
        raise PermissionDenied(f"Requires the permission {Permission.READ}", permission=Permission.READ.value)
    return viewer.principal


def _own(request: Request) -> MeetingSettings:
    return section(request.app.state.settings, MeetingSettings)


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


async def _meeting(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    """The meeting as its page reads it; the files are the participants' (an external attendee is refused)."""
    found = await queries.meeting(reads(request), meeting_id=meeting_id, principal=_principal(viewer),
                                  now=console.now(request), base_url="", signer=codes.signer(request.app.state))
    if found.get("view") == "restricted":
        raise meeting_errors.MeetingActionForbidden(action="files", identity=found["my_identity"])
    return found


async def _files(request: Request, viewer: Viewer, meeting: dict[str, Any]) -> dict[str, Any]:
    """The page's lists, each row's values computed once here (the template only writes them)."""
    principal = viewer.principal
    assert principal is not None
    meeting_id = meeting["id"]
    agenda = await agenda_queries.agenda(reads(request), meeting_id=meeting_id, principal=principal)
    items = [(s, i) for s in agenda.get("sections", []) for i in s["items"]]
    everything = [*agenda.get("meeting_attachments", []), *(a for _, i in items for a in i["attachments"])]
    names = await queries.display_names(reads(request), user_ids=list({uuid.UUID(str(a["uploaded_by_id"]))
                                                                        for a in everything}))
    gettext = i18n.translations(viewer.language).gettext
    fmt = viewer.formats
    zone = meeting["timezone"]
    manages = attachments.may_upload_any(principal, meeting["created_by_id"])
    open_meeting = meeting["status"] != "CANCELLED"
    base = f"{PREFIX}/meetings/{meeting_id}/files"

    def row(kind: str, a: dict[str, Any]) -> FileRow:
        uploader = uuid.UUID(str(a["uploaded_by_id"]))
        may_delete = uploader == principal.id or manages
        return FileRow(kind=kind, id=str(a["id"]), name=a["filename"], size=fmt.size(int(a["size"])),
                       mime_type=a["mime_type"],
                       category=gettext(CATEGORY_LABELS[a["category"]]) if a.get("category") else "",
                       uploader=names.get(uploader, ""), uploaded=fmt.when(_when(a["uploaded_at"]), zone, viewer.zone),
                       download=f"{PREFIX}/files/{kind}/{a['id']}/download",
                       delete=f"{base}/{kind}/{a['id']}/delete" if may_delete else None)

    def may_upload_to(item: dict[str, Any]) -> bool:
        holds = any(str(t["assignee_user_id"]) == str(principal.id) and t["status"] in _HELD
                    for t in item["upload_tasks"])
        return open_meeting and (manages or (viewer.can(Permission.ATTACHMENT_UPLOAD_ASSIGNED) and holds))

    return {
        "meeting_files": [row("meeting", a) for a in agenda.get("meeting_attachments", [])],
        "items": [ItemFiles(id=str(i["id"]), title=i["title"], section=s["title"],
                            files=[row("agenda-item", a) for a in i["attachments"]],
                            upload=f"{PREFIX}/meetings/{meeting_id}/items/{i['id']}/files"
                            if may_upload_to(i) else None) for s, i in items],
        "upload_meeting": f"{base}" if open_meeting and manages else None,
        "restore": viewer.can(Permission.ATTACHMENT_RESTORE),
        "max_bytes": _own(request).meeting_attachment_max_bytes,
        "limit": fmt.size(_own(request).meeting_attachment_max_bytes),
        "categories": [(c, gettext(CATEGORY_LABELS[c])) for c in ATTACHMENT_CATEGORIES],
    }


@router.get("/meetings/{meeting_id}/files")
async def files_page(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    meeting = await _meeting(request, viewer, meeting_id)
    return console.render(request, viewer, "meetings/files.html", active="meetings", meeting=meeting,
                          **await _files(request, viewer, meeting))


async def _answer(request: Request, viewer: Viewer, meeting_id: str, scripted: bool) -> Response:
    """After an upload: the file list re-read (the script swaps it in), or the page again (a plain form)."""
    if not scripted:
        return console.see_other(f"{PREFIX}/meetings/{meeting_id}/files")
    meeting = await _meeting(request, viewer, meeting_id)
    return console.render(request, viewer, "meetings/files_list.html", meeting=meeting,
                          **await _files(request, viewer, meeting))


@router.post("/meetings/{meeting_id}/files", max_body_size=agenda_api.BODY_CEILING)
@streams_body
async def upload_meeting_file(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    principal = _principal(viewer)
    scripted, check = upload_guard(request, viewer)
    await agenda_api.upload_to_meeting(request, principal, meeting_id, fields=(CSRF_FIELD,), check=check)
    return await _answer(request, viewer, meeting_id, scripted)


@router.post("/meetings/{meeting_id}/items/{item_id}/files", max_body_size=agenda_api.BODY_CEILING)
@streams_body
async def upload_item_file(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    principal = _principal(viewer)
    scripted, check = upload_guard(request, viewer)
    found = await agenda_queries.meeting_of(reads(request), "item", item_id)
    if found != meeting_id:
        raise errors.AgendaItemNotFound()
    await agenda_api.upload_to_item(request, principal, item_id, fields=(CSRF_FIELD,), check=check)
    return await _answer(request, viewer, meeting_id, scripted)


@router.get("/files/{kind}/{attachment_id}/download")
async def download(request: Request, kind: KindPath, attachment_id: uuid.UUID) -> Response:
    """The API's download (the same query: participants; Range answered), for a signed-in browser."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.ATTACHMENT_DOWNLOAD)
    return await agenda_api.download(request, _principal(viewer), kind, attachment_id)


async def _deletable(request: Request, viewer: Viewer, meeting_id: str, kind: str,
                     attachment_id: uuid.UUID) -> tuple[dict[str, Any], FileRow]:
    meeting = await _meeting(request, viewer, meeting_id)
    context = await _files(request, viewer, meeting)
    rows = [*context["meeting_files"], *(f for item in context["items"] for f in item.files)]
    found = next((r for r in rows if r.kind == kind and r.id == str(attachment_id)), None)
    if found is None:
        raise errors.AttachmentNotFound()
    if found.delete is None:
        raise errors.AttachmentNotOwn()
    return meeting, found


@router.get("/meetings/{meeting_id}/files/{kind}/{attachment_id}/delete")
async def confirm_delete(request: Request, meeting_id: str, kind: KindPath, attachment_id: uuid.UUID) -> Response:
    """The confirmation: which file, and the one button that deletes it (the POST below)."""
    viewer = await console.signed_in(request)
    meeting, file = await _deletable(request, viewer, meeting_id, kind, attachment_id)
    return console.render(request, viewer, "meetings/file_delete.html", active="meetings", meeting=meeting,
                          file=file)


@router.post("/meetings/{meeting_id}/files/{kind}/{attachment_id}/delete")
async def delete(request: Request, meeting_id: str, kind: KindPath, attachment_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    await console.posted(request, viewer)
    principal = _principal(viewer)
    await _meeting(request, viewer, meeting_id)
    async with request.app.state.db.unit_of_work() as session:
        await attachments.delete_attachment(session, kind=kind, attachment_id=attachment_id, principal=principal,
                                            now=console.now(request))
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}/files")


@router.get("/meetings/{meeting_id}/files/deleted")
async def deleted_files(request: Request, meeting_id: str) -> Response:
    """Administrators: the meeting's deleted files still inside the purge window (the API's query), to restore."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.ATTACHMENT_RESTORE)
    meeting = await _meeting(request, viewer, meeting_id)
    own = _own(request)
    rows = await agenda_queries.deleted_attachments(reads(request), meeting_id=meeting["id"],
                                                    purge_days=own.meeting_attachment_physical_delete_days)
    now = console.now(request)
    rows = [r for r in rows if r["purge_after"] > now]
    names = await queries.display_names(reads(request), user_ids=list({r["deleted_by_id"] for r in rows
                                                                       if r["deleted_by_id"]}))
    fmt, zone = viewer.formats, meeting["timezone"]
    shown = [{"kind": r["kind"], "id": str(r["id"]), "name": r["filename"], "size": fmt.size(int(r["size"])),
              "mime_type": r["mime_type"], "deleted": fmt.when(r["deleted_at"], zone, viewer.zone),
              "deleted_by": names.get(r["deleted_by_id"], "") if r["deleted_by_id"] else "",
              "purge_after": fmt.when(r["purge_after"], zone, viewer.zone),
              "restore": f"{PREFIX}/meetings/{meeting['id']}/files/{r['kind']}/{r['id']}/restore"} for r in rows]
    return console.render(request, viewer, "meetings/files_deleted.html", active="meetings", meeting=meeting,
                          deleted=shown)


@router.post("/meetings/{meeting_id}/files/{kind}/{attachment_id}/restore")
async def restore(request: Request, meeting_id: str, kind: KindPath, attachment_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    await console.posted(request, viewer)
    viewer.require(Permission.ATTACHMENT_RESTORE)
    principal = _principal(viewer)
    await _meeting(request, viewer, meeting_id)
    async with request.app.state.db.unit_of_work() as session:
        await attachments.restore_attachment(
            session, kind=kind, attachment_id=attachment_id, principal=principal,
            storage=storage.of(request.app.state), purge_days=_own(request).meeting_attachment_physical_delete_days,
            now=console.now(request))
    return console.see_other(f"{PREFIX}/meetings/{meeting_id}/files/deleted")
