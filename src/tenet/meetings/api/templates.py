"""Template routes: /templates (API.md "Meeting attendance"). Commands are tenet.meetings.templates'; a command's
answer is read back through the query its GET uses (`queries.template`), in the command's transaction."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.statements import statements
from tenet.meetings import queries, service, templates
from tenet.meetings.permissions import TAG, Permission
from tenet.meetings.schemas import TemplateCreate, TemplateRead, TemplateUpdate

router = APIRouter(prefix=queries.BASE, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
TemplateManager = Annotated[Principal, Depends(require(Permission.TEMPLATE_MANAGE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match")]


async def _written(session: AsyncSession, template_id: uuid.UUID) -> TemplateRead:
    """The template just written, read by the GET's query inside the writing transaction."""
    await session.flush()
    return TemplateRead.model_validate(await queries.template(await statements(session), template_id=template_id))


@router.post("/templates", status_code=status.HTTP_201_CREATED, response_model=TemplateRead,
             summary="Create a meeting template with its attendees", responses=problem_responses(409, 422))
async def create_template(body: TemplateCreate, principal: TemplateManager, session: SessionDep, now: NowDep,
                          settings: SettingsDep) -> Response:
    made = await templates.create_template(session, principal_id=principal.id, fields=body.model_dump(),
                                           policy=service.MeetingPolicy.from_settings(settings), now=now)
    read = await _written(session, made.id)
    return json_response(read, status_code=201, headers={"Location": f"{queries.BASE}/templates/{made.id}",
                                                         "ETag": etag(made.version)})


@router.get("/templates", response_model=Page[TemplateRead], summary="Templates by label",
            responses=problem_responses(400))
async def list_templates(principal: TemplateManager, request: Request, params: PageDep) -> Response:
    items, cursor = await queries.templates(reads(request), page=params)
    return json_response(Page[TemplateRead](items=[TemplateRead.model_validate(r) for r in items],
                                            next_cursor=cursor))


@router.get("/templates/{template_id}", response_model=TemplateRead, summary="One template")
async def get_template(template_id: uuid.UUID, principal: TemplateManager, request: Request) -> Response:
    read = TemplateRead.model_validate(await queries.template(reads(request), template_id=template_id))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.patch("/templates/{template_id}", response_model=TemplateRead, summary="Change a template",
              description="Meetings already made from it are unchanged.", responses=problem_responses(409, 412, 422))
async def update_template(template_id: uuid.UUID, body: TemplateUpdate, principal: TemplateManager, session: SessionDep,
                          now: NowDep, if_match: IfMatch = None) -> Response:
    await templates.update_template(session, template_id=template_id, principal_id=principal.id,
                                    changes=body.model_dump(exclude_unset=True),
                                    expected_version=if_match_version(if_match), now=now)
    read = await _written(session, template_id)
    return json_response(read, headers={"ETag": etag(read.version)})


@router.delete("/templates/{template_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a template")
async def delete_template(template_id: uuid.UUID, principal: TemplateManager, session: SessionDep, now: NowDep) -> None:
    await templates.delete_template(session, template_id=template_id, principal_id=principal.id, now=now)
