"""Routes of automations: job types, your jobs, and their runs."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Query, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import etag, if_match_version, json_response, problem_responses
from tenet.kernel.pagination import Page
from tenet.social import automations, errors, queries
from tenet.social.api._common import (
    IfMatch,
    PageDep,
    clock_time,
    default_zone,
    own,
    page,
    reread,
    social_router,
    values_of,
)
from tenet.social.schemas import (
    AutomationCreate,
    AutomationJobRead,
    AutomationRunRead,
    AutomationUpdate,
    JobStatus,
    JobTypeRead,
    RunStatus,
)

router = social_router()


async def _answer(session: AsyncSession, principal_id: uuid.UUID, job_id: uuid.UUID,
                  request: Request) -> AutomationJobRead:
    row = await queries.job(await reread(session), principal_id=principal_id, job_id=job_id,
                            default_timezone=default_zone(request))
    return AutomationJobRead.model_validate(row)


@router.get("/automation-job-types", response_model=list[JobTypeRead], summary="What automations can do")
async def job_types(principal: CurrentUser) -> list[JobTypeRead]:
    return [JobTypeRead(job_type=t.name, description=t.description, target_types=list(t.target_types),
                        params_schema=t.params_schema(), misfire_grace_seconds=int(t.grace.total_seconds()))
            for t in automations.REGISTRY.values()]


@router.post("/automations", status_code=status.HTTP_201_CREATED, response_model=AutomationJobRead,
             summary="Create a daily or weekly automation (in your time zone)",
             responses=problem_responses(409, 422))
async def create_automation(body: AutomationCreate, principal: CurrentUser, session: SessionDep, now: NowDep,
                            settings: SettingsDep, request: Request) -> AutomationJobRead:
    job = await automations.create_job(
        session, principal_id=principal.id, name=body.name, job_type=body.job_type, target_type=body.target_type.value,
        target_id=body.target_id, params=body.params, schedule_type=body.schedule_type.value,
        schedule_time=clock_time(body.schedule_time), schedule_weekday=body.schedule_weekday,
        status=body.status.value, limit=own(settings).social_automations_per_user,
        default_timezone=default_zone(request), now=now)
    return await _answer(session, principal.id, job.id, request)


@router.get("/automations", response_model=Page[AutomationJobRead], summary="Your automations",
            responses=problem_responses(400, 422))
async def list_automations(principal: CurrentUser, request: Request, params: PageDep,
                           status_filter: Annotated[JobStatus | None, Query(alias="status")] = None) -> Response:
    rows, cursor = await queries.jobs(reads(request), principal_id=principal.id,
                                      status=status_filter.value if status_filter else None,
                                      default_timezone=default_zone(request), page=params)
    return page(AutomationJobRead, rows, cursor)


@router.get("/automations/{job_id}", response_model=AutomationJobRead, summary="One of your automations")
async def get_automation(job_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    job = AutomationJobRead.model_validate(await queries.job(reads(request), principal_id=principal.id,
                                                             job_id=job_id, default_timezone=default_zone(request)))
    return json_response(job, headers={"ETag": etag(job.version)})


@router.patch("/automations/{job_id}", response_model=AutomationJobRead,
              summary="Change an automation (a new schedule moves its next run)",
              responses=problem_responses(409, 412, 422))
async def patch_automation(job_id: uuid.UUID, body: AutomationUpdate, principal: CurrentUser, session: SessionDep,
                           now: NowDep, request: Request, if_match: IfMatch = None) -> AutomationJobRead:
    changes = values_of(body.model_dump(exclude_unset=True))
    if any(changes.get(n, "") is None for n in ("name", "params", "schedule_type", "schedule_time", "target_type")):
        raise errors.AutomationInvalid("name, params, schedule_type, schedule_time and target_type cannot be null")
    if "schedule_time" in changes:
        changes["schedule_time"] = clock_time(changes["schedule_time"])
    await automations.update_job(session, job_id=job_id, principal_id=principal.id, changes=changes,
                                 expected_version=if_match_version(if_match),
                                 default_timezone=default_zone(request), now=now)
    return await _answer(session, principal.id, job_id, request)


@router.delete("/automations/{job_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete an automation")
async def delete_automation(job_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await automations.delete_job(session, job_id=job_id, principal_id=principal.id, now=now)


def _toggle(enabled: bool) -> Callable[..., Awaitable[AutomationJobRead]]:
    async def handler(job_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep,
                      request: Request) -> AutomationJobRead:
        await automations.set_enabled(session, job_id=job_id, principal_id=principal.id, enabled=enabled,
                                      default_timezone=default_zone(request), now=now)
        return await _answer(session, principal.id, job_id, request)

    handler.__name__ = "enable_automation" if enabled else "disable_automation"
    return handler


router.post("/automations/{job_id}/enable", response_model=AutomationJobRead, summary="Enable (from the next slot)",
            responses=problem_responses(409))(_toggle(True))
router.post("/automations/{job_id}/disable", response_model=AutomationJobRead, summary="Disable",
            responses=problem_responses(409))(_toggle(False))


@router.post("/automations/{job_id}/run-now", status_code=status.HTTP_202_ACCEPTED,
             response_model=AutomationRunRead, summary="Run now (a worker starts it as soon as one is free)",
             description="One manual run of a job at a time: while one is queued or running (retries included), "
                         "another request answers 409 `AUTOMATION_RUN_IN_PROGRESS`.",
             responses=problem_responses(409))
async def run_automation_now(job_id: uuid.UUID, principal: CurrentUser, session: SessionDep, now: NowDep,
                             settings: SettingsDep) -> AutomationRunRead:
    run = await automations.run_now(session, job_id=job_id, principal_id=principal.id,
                                    max_attempts=own(settings).automation_max_attempts, now=now)
    row = await queries.run(await reread(session), principal_id=principal.id, job_id=job_id, run_id=run.id)
    return AutomationRunRead.model_validate(row)


@router.get("/automations/{job_id}/runs", response_model=Page[AutomationRunRead],
            summary="The automation's runs, newest first", responses=problem_responses(400, 422))
async def list_runs(job_id: uuid.UUID, principal: CurrentUser, request: Request, params: PageDep,
                    status_filter: Annotated[RunStatus | None, Query(alias="status")] = None) -> Response:
    rows, cursor = await queries.runs(reads(request), principal_id=principal.id, job_id=job_id,
                                      status=status_filter.value if status_filter else None, page=params)
    return page(AutomationRunRead, rows, cursor)
