"""Routes of the Outlook sync under /api/v1/meeting-attendance/outlook (API.md "Outlook"; docs/design/outlook.md §7).
No SQL here: commands are policy's and mailboxes', answers are read back through the query their GET uses."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request, Response

from tenet.deps import NowDep, SessionDep, SettingsDep, StatementsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.idempotency import not_idempotent
from tenet.kernel.metrics import timed_by
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.reads import Runner
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings.outlook import bindings, cleanup, mailboxes, policy, queries, webhook
from tenet.meetings.outlook.permissions import MANAGE, TAG
from tenet.meetings.outlook.schemas import (
    Accepted,
    BindingCreate,
    BindingRead,
    CandidateRead,
    CleanupChecklist,
    ExclusionBody,
    MailboxCreate,
    MailboxList,
    MailboxRead,
    MailboxState,
    MailboxStatus,
    PolicyFields,
    PolicyRead,
    Replay,
    SyncStatus,
    Takeover,
    TruncateResult,
)
from tenet.meetings.queries import BASE
from tenet.meetings.settings import MeetingSettings

# 409 on every route: OUTLOOK_SYNC_OFF while the credentials are unset (the settings routes aside).
router = APIRouter(prefix=BASE + "/outlook", tags=[TAG], route_class=TenetRoute,
                   responses=problem_responses(401, 403, 409))
Manager = Annotated[Principal, Depends(require(MANAGE))]
PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The ETag ("<version>") read before')]


def _graph(settings: KernelSettings) -> MeetingSettings:
    return section(settings, MeetingSettings)


def _on(settings: KernelSettings) -> MeetingSettings:
    graph = _graph(settings)
    policy.require_sync_on(graph)
    return graph


async def _policy_read(runner: Runner, graph: MeetingSettings) -> PolicyRead:
    row = await queries.policy(runner)
    return PolicyRead.model_validate({
        **row, "credentials_configured": graph.graph_configured,
        "client_state_configured": graph.graph_notification_client_state is not None,
        "graph_base_url": graph.graph_base_url, "graph_authority_url": graph.graph_authority_url})


# --- settings (the business policy) ------------------------------------------------------------------------------

@router.get("/settings", response_model=PolicyRead, summary="The sync's policy, and whether credentials are set")
async def get_settings(principal: Manager, request: Request, settings: SettingsDep) -> Response:
    read = await _policy_read(reads(request), _graph(settings))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.put("/settings", response_model=PolicyRead, summary="Replace the sync's policy",
            description="Every field is given; effective at the next job run, without a restart. `If-Match` "
                        "(the ETag read) makes it conditional (412 when the policy moved on).",
            responses=problem_responses(400, 412, 422))
async def put_settings(body: PolicyFields, principal: Manager, session: SessionDep, now: NowDep,
                       settings: SettingsDep, if_match: IfMatch = None) -> Response:
    await policy.update_policy(session, principal_id=principal.id, fields=body.model_dump(),
                               expected_version=if_match_version(if_match), now=now)
    await session.flush()
    read = await _policy_read(await statements(session), _graph(settings))
    return json_response(read, headers={"ETag": etag(read.version)})


# --- mailboxes (sources) --------------------------------------------------------------------------------------

@router.post("/mailboxes", status_code=201, response_model=MailboxRead, summary="Add a mailbox as a source",
             description="Checks access first (`GET /users/{address}`, then one event). A refused mailbox (403 "
                         "`ErrorAccessDenied`) or an unknown one is stored with that state, Graph's code, request-id "
                         "and a hint, and answered 201: it is not retried until `POST /mailboxes/{id}/resync`.",
             responses=problem_responses(409, 422, 503))
async def add_mailbox(body: MailboxCreate, principal: Manager, session: SessionDep, now: NowDep,
                      settings: SettingsDep, request: Request) -> Response:
    on = _on(settings)
    address = mailboxes.normalise(body.address)
    access = await mailboxes.check_access_with_policy(reads(request), on, address)
    row = await mailboxes.add_mailbox(session, principal_id=principal.id, address=address, kind=body.kind,
                                      access=access, now=now)
    await session.flush()
    read = MailboxRead.model_validate(await queries.mailbox(await statements(session), mailbox_id=row.id))
    return json_response(read, status_code=201, headers={"Location": f"{router.prefix}/mailboxes/{row.id}",
                                                         "ETag": etag(read.version)})


@router.get("/mailboxes", response_model=MailboxList, summary="The mailboxes with their state")
async def list_mailboxes(principal: Manager, request: Request, settings: SettingsDep,
                         state: Annotated[MailboxState | None, Query()] = None) -> Response:
    _on(settings)
    rows = await queries.mailboxes(reads(request), state=state)
    return json_response(MailboxList(items=[MailboxRead.model_validate(r) for r in rows]))


@router.get("/mailboxes/{mailbox_id}", response_model=MailboxRead, summary="One mailbox",
            responses=problem_responses(404))
async def get_mailbox(mailbox_id: uuid.UUID, principal: Manager, request: Request, settings: SettingsDep) -> Response:
    _on(settings)
    read = MailboxRead.model_validate(await queries.mailbox(reads(request), mailbox_id=mailbox_id))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.post("/mailboxes/{mailbox_id}/resync", status_code=202, response_model=Accepted,
             summary="A full pass of one mailbox (cursor dropped)",
             description="A denied or invalid mailbox goes back to PENDING: its access is checked again.",
             responses=problem_responses(404, 409))
async def resync_mailbox(mailbox_id: uuid.UUID, principal: Manager, session: SessionDep, now: NowDep,
                         settings: SettingsDep) -> Response:
    _on(settings)
    await mailboxes.request_resync(session, principal_id=principal.id, mailbox_id=mailbox_id, now=now)
    return json_response(Accepted(mailbox_id=mailbox_id), status_code=202)


@router.post("/mailboxes/{mailbox_id}/replay", status_code=202, response_model=Accepted,
             summary="Process one mailbox's stored notifications again, from a given time",
             responses=problem_responses(404, 409, 422))
async def replay_mailbox(mailbox_id: uuid.UUID, body: Replay, principal: Manager, session: SessionDep, now: NowDep,
                         settings: SettingsDep) -> Response:
    _on(settings)
    count = await mailboxes.request_replay(session, principal_id=principal.id, mailbox_id=mailbox_id,
                                           since=body.since, now=now)
    return json_response(Accepted(mailbox_id=mailbox_id, notifications=count), status_code=202)


@router.post("/mailboxes/{mailbox_id}/disable", response_model=MailboxRead, summary="Stop reading a mailbox",
             description="DISABLED for good (the address may be added again as a new source). Its Graph subscription "
                         "is deleted by the worker's next subscriptions pass; bindings whose source it was stop "
                         "syncing until taken over from another mailbox. `If-Match` optional.",
             responses=problem_responses(404, 409, 412))
async def disable_mailbox(mailbox_id: uuid.UUID, principal: Manager, session: SessionDep, now: NowDep,
                          settings: SettingsDep, if_match: IfMatch = None) -> Response:
    _on(settings)
    await mailboxes.disable(session, principal_id=principal.id, mailbox_id=mailbox_id, now=now,
                            expected_version=if_match_version(if_match))
    await session.flush()
    read = MailboxRead.model_validate(await queries.mailbox(await statements(session), mailbox_id=mailbox_id))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.get("/sync-status", response_model=SyncStatus, summary="Per mailbox: state, subscription, cursor, errors",
            description="Subscription id and expiry, last notification, last delta round, cursor age, the last "
                        "error with Graph's code and request-id, and the last reconciliations with their counts.")
async def sync_status(principal: Manager, request: Request, settings: SettingsDep) -> Response:
    _on(settings)
    now = clock_now(request)
    items = []
    for row in await queries.sync_status(reads(request)):
        last = row["last_delta_round_at"]
        age = int((now - last).total_seconds()) if last is not None else None
        items.append(MailboxStatus.model_validate({**row, "cursor_age_seconds": age}))
    return json_response(SyncStatus(sync_on=True, items=items))


@router.get("/candidates", response_model=Page[CandidateRead], summary="The candidate pool, with managed flags",
            description="Single events and series masters the worker read from each mailbox's window (never a Graph "
                        "call here). `q` matches the subject.", responses=problem_responses(400))
async def list_candidates(principal: Manager, request: Request, settings: SettingsDep, page: PageDep,
                          mailbox_id: Annotated[uuid.UUID | None, Query()] = None,
                          type: Annotated[Literal["singleInstance", "seriesMaster"] | None, Query()] = None,
                          q: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    queries.check_cursors(page, queries.CANDIDATES_KEYSET)
    _on(settings)
    rows, cursor = await queries.candidates(reads(request), page=page, mailbox_id=mailbox_id, type=type, q=q)
    return json_response(Page[CandidateRead](items=[CandidateRead.model_validate(r) for r in rows],
                                             next_cursor=cursor))


# --- bindings and exclusions --------------------------------------------------------------------------------

async def _binding_answer(session: SessionDep, binding_id: uuid.UUID, *, status_code: int = 200) -> Response:
    await session.flush()
    read = BindingRead.model_validate(await queries.binding(await statements(session), binding_id=binding_id))
    headers = {"ETag": etag(read.version)}
    if status_code == 201:
        headers["Location"] = f"{router.prefix}/bindings/{binding_id}"
    return json_response(read, status_code=status_code, headers=headers)


@router.post("/bindings", status_code=201, response_model=BindingRead, summary="Manage an Outlook event",
             description="A candidate (single event or series master) of the mailbox becomes managed from "
                         "`sync_from` on (default now). One live binding per event: 409 "
                         "`OUTLOOK_EVENT_ALREADY_BOUND` names it.", responses=problem_responses(404, 409, 422))
async def create_binding(body: BindingCreate, principal: Manager, session: SessionDep, now: NowDep,
                         settings: SettingsDep) -> Response:
    _on(settings)
    row = await bindings.create_binding(session, principal_id=principal.id, mailbox_id=body.mailbox_id,
                                        graph_event_id=body.graph_event_id, sync_from=body.sync_from, now=now)
    return await _binding_answer(session, row.id, status_code=201)


@router.get("/bindings", response_model=Page[BindingRead], summary="Bindings with target, exclusions, last sync",
            responses=problem_responses(400))
async def list_bindings(principal: Manager, request: Request, settings: SettingsDep, page: PageDep,
                        status: Annotated[Literal["PENDING", "ACTIVE", "RELEASED"] | None, Query()] = None,
                        mailbox_id: Annotated[uuid.UUID | None, Query()] = None) -> Response:
    queries.check_cursors(page, queries.BINDINGS_KEYSET)
    _on(settings)
    rows, cursor = await queries.bindings(reads(request), page=page, status=status, mailbox_id=mailbox_id)
    return json_response(Page[BindingRead](items=[BindingRead.model_validate(r) for r in rows], next_cursor=cursor))


@router.get("/bindings/{binding_id}", response_model=BindingRead, summary="One binding",
            responses=problem_responses(404))
async def get_binding(binding_id: uuid.UUID, principal: Manager, request: Request, settings: SettingsDep) -> Response:
    _on(settings)
    read = BindingRead.model_validate(await queries.binding(reads(request), binding_id=binding_id))
    return json_response(read, headers={"ETag": etag(read.version)})


@router.post("/bindings/{binding_id}/takeover", response_model=BindingRead, summary="Forced takeover",
             description="Administrator and source mailbox switch together in one transaction, audited; "
                         "`sync_from` moves to now unless given. A sync of the old source racing it cannot write "
                         "after it (MA-INV-35). Each mailbox's copy of a meeting has its own id: without "
                         "`graph_event_id` the new mailbox's copy is found in its pool by the event's `iCalUId` (409 "
                         "`OUTLOOK_TAKEOVER_COPY_NOT_FOUND` when there is not exactly one: give `graph_event_id`). "
                         "A mailbox Tenet cannot read is refused (409 `OUTLOOK_MAILBOX_NOT_READABLE`, "
                         "`OUTLOOK_MAILBOX_DISABLED`). A refusal changes nothing. `If-Match` optional.",
             responses=problem_responses(400, 404, 409, 412))
async def take_over(binding_id: uuid.UUID, body: Takeover, principal: Manager, session: SessionDep, now: NowDep,
                    settings: SettingsDep, if_match: IfMatch = None) -> Response:
    _on(settings)
    await bindings.take_over(session, principal_id=principal.id, binding_id=binding_id,
                                   mailbox_id=body.mailbox_id, graph_event_id=body.graph_event_id,
                                   sync_from=body.sync_from, now=now, expected_version=if_match_version(if_match))
    return await _binding_answer(session, binding_id)


@router.post("/bindings/{binding_id}/release", response_model=BindingRead, summary="Stop managing the event",
             description="Its meetings stay as they are, unmanaged.", responses=problem_responses(404, 409))
async def release_binding(binding_id: uuid.UUID, principal: Manager, session: SessionDep, now: NowDep,
                          settings: SettingsDep) -> Response:
    _on(settings)
    await bindings.release(session, principal_id=principal.id, binding_id=binding_id, now=now)
    return await _binding_answer(session, binding_id)


@router.post("/bindings/{binding_id}/exclusions", status_code=201, response_model=BindingRead,
             summary="Exclude an occurrence of a bound series", responses=problem_responses(404, 409, 422))
async def add_exclusion(binding_id: uuid.UUID, body: ExclusionBody, principal: Manager, session: SessionDep,
                        now: NowDep, settings: SettingsDep) -> Response:
    _on(settings)
    await bindings.exclude(session, principal_id=principal.id, binding_id=binding_id,
                           original_start=body.original_start, now=now)
    return await _binding_answer(session, binding_id, status_code=201)


@router.delete("/bindings/{binding_id}/exclusions", status_code=204, summary="Resume an excluded occurrence",
               responses=problem_responses(404, 409, 422))
async def remove_exclusion(binding_id: uuid.UUID, body: ExclusionBody, principal: Manager, session: SessionDep,
                           now: NowDep, settings: SettingsDep) -> Response:
    _on(settings)
    await bindings.include_again(session, principal_id=principal.id, binding_id=binding_id,
                                 original_start=body.original_start, now=now)
    return Response(status_code=204)


# --- launch clean-up (spec layer 8) -----------------------------------------------------------------------

@router.get("/cleanup", response_model=CleanupChecklist, summary="The launch checklist",
            description="Local series that no binding manages and that still have meetings to come, each with the "
                        "Outlook series masters of the candidate pool that look like it, and the launch's operations "
                        "checklist (each step done or not by what is stored). Nothing is asked of Graph.")
async def cleanup_checklist(principal: Manager, request: Request, settings: SettingsDep) -> Response:
    graph_settings = _on(settings)
    now = clock_now(request)
    series_rows, masters, counts = await queries.cleanup_rows(reads(request), now=now)
    answer = await anyio.to_thread.run_sync(partial(cleanup.checklist, series_rows, masters, counts,
                                                    credentials=graph_settings.graph_configured))
    return json_response(CleanupChecklist.model_validate({"generated_at": now, **answer}))


@router.post("/cleanup/series/{series_id}/truncate", response_model=TruncateResult,
             summary="End a local series before today, in Tenet only",
             description="Its occurrences that have not started are deleted (past ones stay as history) and its rule "
                         "ends at the last kept date; a series none of whose occurrences has started is deleted. "
                         "Outlook is never written. A series an Outlook binding manages: 409 `OUTLOOK_MANAGED`. "
                         "Repeating the call changes nothing (`changed` false). `If-Match` optional.",
             responses=problem_responses(404, 412))
async def truncate_series(series_id: uuid.UUID, principal: Manager, session: SessionDep, now: NowDep,
                          settings: SettingsDep, if_match: IfMatch = None) -> Response:
    _on(settings)
    done = await cleanup.truncate_series(session, principal_id=principal.id, series_id=series_id,
                                         expected_version=if_match_version(if_match), now=now)
    return json_response(TruncateResult.model_validate(vars(done)))


# --- Graph's callers (public) -------------------------------------------------------------------------------

ValidationToken = Annotated[str | None, Query(alias="validationToken", max_length=4096)]
_WEBHOOK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The validation echo: the decoded token",
          "content": {"text/plain": {"schema": {"type": "string"}}}},
    202: {"description": "Stored (or dropped); processed by the worker"},
    **problem_responses(400),
}
_WEBHOOK_DOC = ("Public: Graph calls it. With `?validationToken=` (subscription validation) it answers 200 "
                "`text/plain` with the decoded token. Otherwise it checks `clientState` on every item (a wrong one is "
                "dropped, the others kept), stores them, queues their processing and answers 202 at once: no Graph "
                "call inside the request.")


async def _webhook(kind: str, request: Request, session: StatementsDep, now: NowDep, settings: KernelSettings,
                   token: str | None) -> Response:
    if token is not None:
        # Opaque and echoed as plain text only (never HTML), so it cannot script anything.
        return Response(content=token, media_type="text/plain", headers={"X-Content-Type-Options": "nosniff"})
    items = webhook.parse(await request.body())
    await webhook.receive(session, settings=_graph(settings), kind=kind, items=items, now=now)
    return Response(status_code=202)


@router.post("/notifications", status_code=202, summary="Graph change notifications (public)",
             description=_WEBHOOK_DOC, response_class=Response, responses=_WEBHOOK_RESPONSES)
@not_idempotent
@timed_by(webhook.ACK_SECONDS.labels(kind="change").observe)
async def notifications(request: Request, session: StatementsDep, now: NowDep, settings: SettingsDep,
                        token: ValidationToken = None) -> Response:
    return await _webhook("CHANGE", request, session, now, settings, token)


@router.post("/lifecycle", status_code=202, summary="Graph lifecycle notifications (public)",
             description=_WEBHOOK_DOC + " Lifecycle events: reauthorizationRequired, subscriptionRemoved, missed.",
             response_class=Response, responses=_WEBHOOK_RESPONSES)
@not_idempotent
@timed_by(webhook.ACK_SECONDS.labels(kind="lifecycle").observe)
async def lifecycle(request: Request, session: StatementsDep, now: NowDep, settings: SettingsDep,
                    token: ValidationToken = None) -> Response:
    return await _webhook("LIFECYCLE", request, session, now, settings, token)
