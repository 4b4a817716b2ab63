"""The request path is lean (issue 8): no synchronous dependency on any route (FastAPI would run it in a
thread pool), the caller resolved by one dependency, and hot reads answering pre-serialised JSON that is
byte for byte what FastAPI would have answered."""

from __future__ import annotations

import inspect
import uuid
from datetime import UTC, datetime

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.security.base import SecurityBase

from tenet.app import create_app
from tenet.iam.schemas import MeRead, UserRead
from tenet.kernel.http import json_response
from tenet.kernel.pagination import Page
from tenet.workspaces.schemas import InvitationRead, MemberRead, WorkspaceRead
from tests.conftest import test_settings


def _routes(app: FastAPI) -> list[APIRoute]:
    return [c.original_route for c in iter_route_contexts(app.routes) if isinstance(c.original_route, APIRoute)]


def _calls(dependant) -> list:
    found = []
    for sub in dependant.dependencies:
        found.append(sub.call)
        found += _calls(sub)
    return found


def _is_async(call) -> bool:
    # A dependency is a function, or an instance whose __call__ FastAPI calls (the security schemes).
    target = call if inspect.isfunction(call) or inspect.ismethod(call) else type(call).__call__
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


def test_no_route_has_a_synchronous_dependency_or_endpoint():
    app = create_app(test_settings())
    sync = [(route.path, getattr(call, "__name__", type(call).__name__))
            for route in _routes(app) for call in [route.endpoint, *_calls(route.dependant)] if not _is_async(call)]
    assert not sync, f"synchronous dependencies or endpoints (run in a thread pool): {sync}"


def test_the_caller_is_one_dependency_on_the_hot_reads():
    app = create_app(test_settings())
    by_path = {(route.path, next(iter(route.methods))): route for route in _routes(app)}
    me = by_path[("/api/v1/auth/me", "GET")]
    assert len(_calls(me.dependant)) == 1 and isinstance(_calls(me.dependant)[0], SecurityBase)
    members = by_path[("/api/v1/workspaces/{workspace_id}/members", "GET")]
    security = [call for call in _calls(members.dependant) if isinstance(call, SecurityBase)]
    assert len(security) == 1
    assert "security" in app.openapi()["paths"]["/api/v1/auth/me"]["get"]


SAMPLES = [
    MeRead(principal_type="user", user=UserRead(id=uuid.uuid4(), email="Zoë@exämple.com", display_name="Zoë “Z” 🦊",
                                                status="active", roles=["Employee"],
                                                created_at=datetime(2026, 1, 5, 9, 0, 0, 123456, tzinfo=UTC)),
           roles=["Employee"], permissions=["meeting:read"], scopes=[]),
    Page[MemberRead](items=[MemberRead(user_id=uuid.uuid4(), membership_id=uuid.uuid4(), role="admin",
                                       display_name='Ada "the first" \\ Lovelace', email="a@example.com",
                                       joined_at=datetime(2026, 1, 5, tzinfo=UTC))], next_cursor="abc=="),
    Page[WorkspaceRead](items=[], next_cursor=None),
    WorkspaceRead(id=uuid.uuid4(), name="Ünïcode\u2028line", status="DELETING", role="owner",
                  created_at=datetime(2026, 1, 5, tzinfo=UTC), deletion_requested_at=None),
    # The one hot write answered pre-serialised (POST /workspaces/{id}/invitations).
    InvitationRead(id=uuid.uuid4(), workspace_id=uuid.uuid4(), email="Zoë.Ünïcode+tag@exämple.com", role="member",
                   status="PENDING", invited_by=uuid.uuid4(), created_at=datetime(2026, 1, 5, 9, 0, 0, 1, tzinfo=UTC),
                   expires_at=datetime(2026, 1, 12, 9, tzinfo=UTC), last_sent_at=datetime(2026, 1, 5, 9, tzinfo=UTC),
                   accepted_at=None, accepted_by=None, revoked_at=None, expired_at=None),
]


async def test_pre_serialised_answers_are_the_bytes_fastapi_would_send():
    app = FastAPI()
    for index, sample in enumerate(SAMPLES):
        def make(value):
            async def endpoint():
                return value
            return endpoint
        app.add_api_route(f"/sample/{index}", make(sample), response_model=type(sample))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for index, sample in enumerate(SAMPLES):
            expected = await client.get(f"/sample/{index}")
            ours = json_response(sample)
            assert ours.body == expected.content, type(sample).__name__
            assert ours.headers["content-type"] == expected.headers["content-type"]
