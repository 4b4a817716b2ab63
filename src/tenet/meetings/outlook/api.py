"""Routes of the Outlook sync under /api/v1/meeting-attendance/outlook (API.md "Outlook"; docs/design/outlook.md §7).
No SQL here: commands are policy's and mailboxes', answers are read back through the query their GET uses."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.iam.auth import require
from tenet.iam.principal import Principal
from tenet.kernel.http import TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.reads import Runner
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.meetings.outlook import policy, queries
from tenet.meetings.outlook.permissions import MANAGE, TAG
from tenet.meetings.outlook.schemas import PolicyFields, PolicyRead
from tenet.meetings.queries import BASE
from tenet.meetings.settings import MeetingSettings

router = APIRouter(prefix=BASE + "/outlook", tags=[TAG], route_class=TenetRoute,
                   responses=problem_responses(401, 403))
Manager = Annotated[Principal, Depends(require(MANAGE))]
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
