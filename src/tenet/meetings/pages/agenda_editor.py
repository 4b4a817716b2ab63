"""The agenda editor of a meeting's console page (issue 18): sections and items in order with the time they take
(per section and for the meeting), add / rename / delete a section, add / edit / delete an item (title, presenter
found by the meeting page's people search, minutes, notes), the order changed by drag-and-drop (the island
`/static/agenda-editor.js` posts the new order; the answer is the re-rendered list) or by the keyboard (move up /
move down buttons, plain form posts that work without JS), and upload tasks on an item (assignee, due date,
cancel).

Every action is the agenda service's own command (`tenet.meetings.agenda.service`), behind the permission point its
API route checks (`meeting:agenda:update`, `meeting:upload-task:assign`); the service then applies its own rule
(managers and the meeting's creator). The page reads the agenda with the query its GET uses (`queries.agenda`).
A refusal's stable code becomes a sentence next to the form it concerns; a stale form (412, or an order that no
longer names the live rows) says someone else changed the agenda and shows what it is now."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import FormData

from tenet.deps import reads
from tenet.iam.principal import Principal
from tenet.kernel.errors import DomainError, ValidationFailed
from tenet.kernel.pagination import PageParams
from tenet.kernel.reads import Runner
from tenet.kernel.statements import statements
from tenet.meetings import codes, queries
from tenet.meetings import errors as meeting_errors
from tenet.meetings.agenda import errors as agenda_errors
from tenet.meetings.agenda import queries as agenda_queries
from tenet.meetings.agenda import service
from tenet.meetings.agenda.schemas import ItemCreate, ItemUpdate, SectionCreate
from tenet.meetings.permissions import Permission
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
FRAGMENT_HEADER = "X-Agenda-Fragment"  # the island asks for the list alone
CONFLICTS = ("PRECONDITION_FAILED", "VERSION_CONFLICT", "AGENDA_ORDER_MISMATCH")
_LOCAL = "%Y-%m-%dT%H:%M"
ASSIGNEES_SHOWN = 200


class FormProblem(Exception):
    """A form's own value refused before any service ran (the request model's validation)."""

    def __init__(self, code: str = "VALIDATION_FAILED", field: str | None = None) -> None:
        super().__init__(code)
        self.code, self.field = code, field


def _id(value: object, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value or ""))
    except ValueError:
        raise ValidationFailed(f"{name} must be an id", field=name) from None


def _validated(model: type[BaseModel], body: dict[str, Any], field: str | None = None) -> dict[str, Any]:
    try:
        return model.model_validate(body).model_dump(exclude_unset=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise FormProblem(field=field or (str(first["loc"][0]) if first["loc"] else None)) from None


def _minutes(value: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    if not value.isdigit():
        raise FormProblem(field="time_minutes")
    return int(value)


def _due(value: str, zone: str) -> datetime | None:
    """A due date typed as a local time of the meeting's zone."""
    value = value.strip()
    if not value:
        return None
    try:
        return datetime.strptime(value, _LOCAL).replace(tzinfo=ZoneInfo(zone))
    except ValueError:
        raise FormProblem(field="due_at") from None


# --- what the page shows ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Choice:
    user_id: str
    name: str


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    status: str
    assignee: str
    due_at: datetime | None


def _instant(value: Any) -> datetime | None:
    """A time of the agenda's task JSON (ISO text) as an instant."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def task_rows(tasks: list[dict[str, Any]], names: dict[str, str]) -> list[TaskRow]:
    return [TaskRow(id=str(t["id"]), status=t["status"], assignee=names.get(str(t["assignee_user_id"]), "—"),
                    due_at=_instant(t["due_at"])) for t in tasks]


async def _meeting(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    assert viewer.principal is not None
    return await queries.meeting(reads(request), meeting_id=meeting_id, principal=viewer.principal,
                                 now=console.now(request), base_url="", signer=codes.signer(request.app.state))


async def _state(request: Request, viewer: Viewer, meeting_id: str) -> dict[str, Any]:
    """The meeting, its agenda as the agenda's GET shows it, the totals, and the people the forms offer."""
    principal = viewer.principal
    assert principal is not None
    meeting = await _meeting(request, viewer, meeting_id)
    if meeting.get("view") == "restricted":  # an external attendee: titles only, the meeting page shows them
        raise meeting_errors.MeetingActionForbidden(action="view-agenda", identity=meeting["my_identity"])
    agenda = await agenda_queries.agenda(reads(request), meeting_id=meeting_id, principal=principal)
    writable = meeting["status"] != "CANCELLED"
    editable = viewer.can(Permission.AGENDA_UPDATE) and meeting["my_identity"] in ("manager", "creator")
    assigning = viewer.can(Permission.UPLOAD_TASK_ASSIGN) and meeting["my_identity"] in ("manager", "creator")
    assignees: list[Choice] = []
    names: dict[str, str] = {}
    if assigning:
        required, _ = await queries.required_attendees(reads(request), meeting_id=meeting_id, principal=principal,
                                                       page=PageParams(limit=ASSIGNEES_SHOWN))
        assignees = [Choice(str(p["user_id"]), p["display_name"]) for p in required]
        organizer = meeting["organizer"]
        if organizer["user_id"] and str(organizer["user_id"]) not in {c.user_id for c in assignees}:
            assignees.insert(0, Choice(str(organizer["user_id"]), organizer["display_name"] or ""))
        names = {c.user_id: c.name for c in assignees}
    task_people = {t["assignee_user_id"] for s in agenda["sections"] for i in s["items"] for t in i["upload_tasks"]}
    missing = [uuid.UUID(str(u)) for u in task_people if str(u) not in names]
    if missing:
        names.update({str(k): v for k, v in (await queries.display_names(reads(request), user_ids=missing)).items()})
    totals = {str(s["id"]): sum(i["time_minutes"] or 0 for i in s["items"]) for s in agenda["sections"]}
    tasks = {str(i["id"]): task_rows(i["upload_tasks"], names) for s in agenda["sections"] for i in s["items"]}
    return {"meeting": meeting, "agenda": agenda, "sections": agenda["sections"], "totals": totals,
            "total": sum(totals.values()), "tasks": tasks, "editable": editable and writable, "deletable": editable,
            "assigning": assigning and writable, "cancelling": assigning, "assignees": assignees, "names": names,
            "zone": meeting["timezone"]}


def _render(request: Request, viewer: Viewer, state: dict[str, Any], *, problems: dict[str, str] | None = None,
            typed: dict[str, str] | None = None, notice: str | None = None, status_code: int = 200) -> Response:
    fragment = request.headers.get(FRAGMENT_HEADER) is not None
    return console.render(request, viewer, "meetings/agenda_list.html" if fragment else "meetings/agenda.html",
                          status_code=status_code, active="meetings", problems=problems or {}, typed=typed or {},
                          notice=notice, **state)


@router.get("/meetings/{meeting_id}/agenda")
async def agenda_page(request: Request, meeting_id: str) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.READ)
    return _render(request, viewer, await _state(request, viewer, meeting_id))


# --- the actions of the list ------------------------------------------------------------------------------------

Command = Callable[[AsyncSession, FormData, Principal, datetime], Awaitable[None]]


async def _belongs(session: AsyncSession, kind: str, row_id: uuid.UUID, meeting_id: str) -> None:
    """A section, item or task named in the path is one of this meeting's (else: not found, as the API says)."""
    found = await agenda_queries.meeting_of(await statements(session), kind, row_id)
    if found != meeting_id:
        raise {"section": agenda_errors.AgendaSectionNotFound, "item": agenda_errors.AgendaItemNotFound,
               "task": agenda_errors.UploadTaskNotFound}[kind]()


async def _act(request: Request, meeting_id: str, permission: str, where: str, run: Command, *,
               typed: Callable[[FormData], dict[str, str]] | None = None) -> Response:
    """One action of the list: CSRF, the permission point, the service's command in one unit of work; then the
    page again (303 to it, or the list alone for the island). A refusal is the page in its present state with the
    refusal's sentence at `where`; 401/403/404 are the error page, as the API answers them."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(permission)
    valid_id = queries.valid_meeting_id(meeting_id)
    try:
        async with request.app.state.db.unit_of_work() as session:
            await run(session, form, principal, console.now(request))
    except FormProblem as exc:
        state = await _state(request, viewer, valid_id)
        return _render(request, viewer, state, problems={where: exc.code}, typed=typed(form) if typed else None,
                       status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        state = await _state(request, viewer, valid_id)
        code = str(exc.code)
        return _render(request, viewer, state, problems={where: code}, notice=code if code in CONFLICTS else None,
                       typed=typed(form) if typed and code not in CONFLICTS else None, status_code=exc.status)
    if request.headers.get(FRAGMENT_HEADER) is not None:
        return _render(request, viewer, await _state(request, viewer, valid_id))
    return console.see_other(f"{PREFIX}/meetings/{valid_id}/agenda#{where}")


def _text(form: FormData, name: str, limit: int = 20000) -> str:
    return str(form.get(name, ""))[:limit]


def _version(form: FormData) -> int | None:
    value = _text(form, "version", 20)
    return int(value) if value.isdigit() else None


async def _current(session: AsyncSession, meeting_id: str, principal: Principal) -> dict[str, Any]:
    """The agenda as it is inside the command's transaction (the GET's query, on the unit of work's statements)."""
    return await agenda_queries.agenda(await statements(session), meeting_id=meeting_id, principal=principal)


def _moved(ids: list[uuid.UUID], row_id: uuid.UUID, direction: str) -> list[uuid.UUID]:
    """`ids` with `row_id` one place up or down (unchanged at either end)."""
    if direction not in ("up", "down"):
        raise ValidationFailed("direction is up or down", field="direction")
    index = ids.index(row_id)
    other = index - 1 if direction == "up" else index + 1
    if 0 <= other < len(ids):
        ids[index], ids[other] = ids[other], ids[index]
    return ids


@router.post("/meetings/{meeting_id}/agenda/sections")
async def add_section(request: Request, meeting_id: str) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        body = _validated(SectionCreate, {"title": _text(form, "title", 1000)})
        await service.create_section(session, meeting_id=meeting_id, title=body["title"], principal=principal,
                                     now=now)

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, "new-section", run,
                      typed=lambda form: {"new-section": _text(form, "title", 1000)})


@router.post("/meetings/{meeting_id}/agenda/sections/{section_id}/rename")
async def rename_section(request: Request, meeting_id: str, section_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "section", section_id, meeting_id)
        body = _validated(SectionCreate, {"title": _text(form, "title", 1000)})
        await service.update_section(session, section_id=section_id, title=body["title"], principal=principal,
                                     expected_version=_version(form), now=now)

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, f"section-{section_id}", run,
                      typed=lambda form: {f"section-{section_id}": _text(form, "title", 1000)})


@router.post("/meetings/{meeting_id}/agenda/sections/{section_id}/delete")
async def delete_section(request: Request, meeting_id: str, section_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "section", section_id, meeting_id)
        await service.delete_section(session, section_id=section_id, principal=principal, now=now)

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, "sections", run)


@router.post("/meetings/{meeting_id}/agenda/sections/{section_id}/move")
async def move_section(request: Request, meeting_id: str, section_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "section", section_id, meeting_id)
        ids = [s["id"] for s in (await _current(session, meeting_id, principal))["sections"]]
        await service.reorder_sections(session, meeting_id=meeting_id, principal=principal, now=now,
                                       ids=_moved(ids, section_id, _text(form, "direction", 10)))

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, f"section-{section_id}", run)


@router.post("/meetings/{meeting_id}/agenda/items/{item_id}/move")
async def move_item(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "item", item_id, meeting_id)
        found = await _current(session, meeting_id, principal)
        section = next(s for s in found["sections"] if any(i["id"] == item_id for i in s["items"]))
        ids = [i["id"] for i in section["items"]]
        await service.reorder_items(session, section_id=section["id"], principal=principal, now=now,
                                    ids=_moved(ids, item_id, _text(form, "direction", 10)))

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, f"item-{item_id}", run)


@router.post("/meetings/{meeting_id}/agenda/order")
async def reorder(request: Request, meeting_id: str) -> Response:
    """The island's drop: `ids`, every item of `section_id` in the new order. When the dragged `item_id` came from
    another section, it is first moved there (to the end, the service's `section_id` change), then the section is
    ordered, in one transaction. `kind=sections` orders the sections the same way."""
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        ids = [_id(value, "ids") for value in form.getlist("ids")]
        if _text(form, "kind", 10) == "sections":
            await service.reorder_sections(session, meeting_id=meeting_id, ids=ids, principal=principal, now=now)
            return
        section_id = _id(form.get("section_id"), "section_id")
        await _belongs(session, "section", section_id, meeting_id)
        if form.get("item_id"):
            item_id = _id(form.get("item_id"), "item_id")
            await _belongs(session, "item", item_id, meeting_id)
            found = await _current(session, meeting_id, principal)
            if not any(i["id"] == item_id for s in found["sections"] if s["id"] == section_id for i in s["items"]):
                await service.update_item(session, item_id=item_id, changes={"section_id": section_id},
                                          principal=principal, expected_version=None, now=now)
        await service.reorder_items(session, section_id=section_id, ids=ids, principal=principal, now=now)

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, "order", run)


@router.post("/meetings/{meeting_id}/agenda/items/{item_id}/delete")
async def delete_item(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "item", item_id, meeting_id)
        await service.delete_item(session, item_id=item_id, principal=principal, now=now)

    return await _act(request, meeting_id, Permission.AGENDA_UPDATE, "sections", run)


@router.post("/meetings/{meeting_id}/agenda/items/{item_id}/tasks")
async def assign_task(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "item", item_id, meeting_id)
        zone = (await queries.meeting(await statements(session), meeting_id=meeting_id, principal=principal, now=now,
                                      base_url="", signer=codes.signer(request.app.state)))["timezone"]
        assignee = _id(form.get("assignee_user_id"), "assignee_user_id")
        await service.assign_tasks(session, item_id=item_id, assignee_ids=[assignee],
                                   due_at=_due(_text(form, "due_at", 40), zone), principal=principal, now=now)

    return await _act(request, meeting_id, Permission.UPLOAD_TASK_ASSIGN, f"tasks-{item_id}", run,
                      typed=lambda form: {f"tasks-{item_id}": _text(form, "due_at", 40)})


@router.post("/meetings/{meeting_id}/agenda/tasks/{task_id}/cancel")
async def cancel_task(request: Request, meeting_id: str, task_id: uuid.UUID) -> Response:
    where = "sections"

    async def run(session: AsyncSession, form: FormData, principal: Principal, now: datetime) -> None:
        await _belongs(session, "task", task_id, meeting_id)
        await service.cancel_task(session, task_id=task_id, principal=principal, now=now)

    return await _act(request, meeting_id, Permission.UPLOAD_TASK_ASSIGN, where, run)


# --- the item form (add / edit, with the presenter found by the people search) ---------------------------------

ITEM_TEXTS = ("title", "time_minutes", "description", "q")


def _item_values(item: dict[str, Any] | None) -> dict[str, str]:
    if item is None:
        return {"title": "", "time_minutes": "", "description": "", "q": "", "presenter_user_id": ""}
    presenter = item["presenter"]
    return {"title": item["title"], "time_minutes": str(item["time_minutes"] or ""),
            "description": item["description"] or "", "q": "",
            "presenter_user_id": str(presenter["user_id"]) if presenter else ""}


def _posted_item(form: FormData) -> dict[str, str]:
    values = {name: _text(form, name).strip() if name != "description" else _text(form, name)
              for name in ITEM_TEXTS}
    values["presenter_user_id"] = _text(form, "presenter_user_id", 40).strip()
    return values


async def _presenters(runner: Runner, values: dict[str, str], item: dict[str, Any] | None) -> list[Choice]:
    """The presenter choices: the chosen one (by name), then the people the search finds (the meeting page's)."""
    choices: list[Choice] = []
    chosen = values.get("presenter_user_id", "")
    if chosen:
        presenter = item["presenter"] if item else None
        if presenter and str(presenter["user_id"]) == chosen:
            choices.append(Choice(chosen, presenter["display_name"] or ""))
        else:
            try:
                names = await queries.display_names(runner, user_ids=[uuid.UUID(chosen)])
            except ValueError:
                names = {}
            choices.extend(Choice(str(k), v) for k, v in names.items())
    if values.get("q"):
        listed = {c.user_id for c in choices}
        choices.extend(Choice(str(p["user_id"]), f"{p['display_name']} <{p['email']}>")
                       for p in await queries.people(runner, text=values["q"]) if str(p["user_id"]) not in listed)
    return choices


async def _item_of(request: Request, viewer: Viewer, meeting_id: str, item_id: uuid.UUID) -> dict[str, Any]:
    assert viewer.principal is not None
    found = await agenda_queries.agenda(reads(request), meeting_id=meeting_id, principal=viewer.principal)
    for section in found["sections"]:
        for item in section["items"]:
            if item["id"] == item_id:
                return {**item, "section_title": section["title"]}
    raise agenda_errors.AgendaItemNotFound()


async def _section_of(request: Request, viewer: Viewer, meeting_id: str, section_id: uuid.UUID) -> dict[str, Any]:
    assert viewer.principal is not None
    found = await agenda_queries.agenda(reads(request), meeting_id=meeting_id, principal=viewer.principal)
    for section in found["sections"]:
        if section["id"] == section_id:
            return section
    raise agenda_errors.AgendaSectionNotFound()


async def _item_form(request: Request, viewer: Viewer, meeting_id: str, *, values: dict[str, str],
                     section: dict[str, Any], item: dict[str, Any] | None, problems: dict[str, str] | None = None,
                     notice: str | None = None, status_code: int = 200) -> Response:
    meeting = await _meeting(request, viewer, meeting_id)
    return console.render(request, viewer, "meetings/agenda_item_form.html", status_code=status_code,
                          active="meetings", meeting=meeting, section=section, item=item, values=values,
                          presenters=await _presenters(reads(request), values, item), problems=problems or {},
                          notice=notice)


def _item_body(values: dict[str, str]) -> dict[str, Any]:
    return {"title": values["title"], "time_minutes": _minutes(values["time_minutes"]),
            "description": values["description"] or None,
            "presenter_user_id": values["presenter_user_id"] or None}


@router.get("/meetings/{meeting_id}/agenda/sections/{section_id}/items/new")
async def new_item_form(request: Request, meeting_id: str, section_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.AGENDA_UPDATE)
    section = await _section_of(request, viewer, meeting_id, section_id)
    return await _item_form(request, viewer, meeting_id, values=_item_values(None), section=section, item=None)


@router.get("/meetings/{meeting_id}/agenda/items/{item_id}/edit")
async def edit_item_form(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.AGENDA_UPDATE)
    item = await _item_of(request, viewer, meeting_id, item_id)
    section = {"id": item["section_id"], "title": item["section_title"]}
    return await _item_form(request, viewer, meeting_id, values=_item_values(item), section=section, item=item)


async def _save_item(request: Request, meeting_id: str, *, section_id: uuid.UUID | None,
                     item_id: uuid.UUID | None) -> Response:
    """Create (section_id) or change (item_id) an item; `action=search` only looks people up for the presenter
    (the form comes back with what was typed, nothing saved: the search works without JS)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = viewer.require(Permission.AGENDA_UPDATE)
    valid_id = queries.valid_meeting_id(meeting_id)
    values = _posted_item(form)
    item = await _item_of(request, viewer, valid_id, item_id) if item_id else None
    section = {"id": item["section_id"], "title": item["section_title"]} if item else \
        await _section_of(request, viewer, valid_id, section_id)  # type: ignore[arg-type]
    if form.get("action") == "search":
        return await _item_form(request, viewer, valid_id, values=values, section=section, item=item)
    try:
        body = _item_body(values)
        async with request.app.state.db.unit_of_work() as session:
            if item_id is None:
                fields = _validated(ItemCreate, {k: v for k, v in body.items() if v is not None})
                await service.create_item(session, section_id=section["id"], fields=fields, principal=principal,
                                          now=console.now(request))
            else:
                changes = _validated(ItemUpdate, body)
                await service.update_item(session, item_id=item_id, changes=changes, principal=principal,
                                          expected_version=_version(form), now=console.now(request))
    except FormProblem as exc:
        return await _item_form(request, viewer, valid_id, values=values, section=section, item=item,
                                problems={exc.field or "form": exc.code}, status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        code = str(exc.code)
        if code in CONFLICTS and item_id is not None:  # the new state, said so
            fresh = await _item_of(request, viewer, valid_id, item_id)
            return await _item_form(request, viewer, valid_id, values=_item_values(fresh), section=section,
                                    item=fresh, notice=code, status_code=exc.status)
        field = {"PRESENTER_NOT_FOUND": "presenter_user_id"}.get(code, "form")
        return await _item_form(request, viewer, valid_id, values=values, section=section, item=item,
                                problems={field: code}, status_code=exc.status)
    return console.see_other(f"{PREFIX}/meetings/{valid_id}/agenda#section-{section['id']}")


@router.post("/meetings/{meeting_id}/agenda/sections/{section_id}/items/new")
async def create_item(request: Request, meeting_id: str, section_id: uuid.UUID) -> Response:
    return await _save_item(request, meeting_id, section_id=section_id, item_id=None)


@router.post("/meetings/{meeting_id}/agenda/items/{item_id}/edit")
async def edit_item(request: Request, meeting_id: str, item_id: uuid.UUID) -> Response:
    return await _save_item(request, meeting_id, section_id=None, item_id=item_id)


@router.get("/meetings/{meeting_id}/agenda/presenters")
async def presenter_choices(request: Request, meeting_id: str,
                            q: Annotated[str, Query(max_length=100)] = "",
                            presenter_user_id: Annotated[str, Query(max_length=40)] = "") -> Response:
    """The presenter choices alone (what htmx swaps in as one types in the search)."""
    viewer = await console.signed_in(request)
    viewer.require(Permission.AGENDA_UPDATE)
    await _meeting(request, viewer, meeting_id)
    values = {"q": q.strip(), "presenter_user_id": presenter_user_id.strip()}
    return console.render(request, viewer, "meetings/agenda_presenters.html", values=values,
                          presenters=await _presenters(reads(request), values, None), problems={})
