"""Workspaces: create, list, read, delete (ACTIVE -> DELETING -> DELETED). Spec 002 fixture groups 1 and 2."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.workspaces import tasks
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.workspaces.conftest import add_member, token_for


async def _audit(db, action: str) -> list[dict]:
    async with db.read_only() as session:
        rows = await session.execute(text(
            "SELECT actor_id, subject_type, subject_id, scope_type, scope_id, data FROM kernel.audit_log "
            "WHERE action = :action ORDER BY id"), {"action": action})
        return [dict(r._mapping) for r in rows]


class TestCreateWorkspace:
    @pytest.mark.invariant("WS-INV-01", "WS-INV-07")
    async def test_valid_name_creates_workspace_owned_by_creator(self, ws, owner, db):
        response = await ws.create(owner, "  Research  ")
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["name"] == "Research"
        assert body["status"] == "ACTIVE"
        assert body["role"] == "owner"
        assert response.headers["location"] == f"/api/v1/workspaces/{body['id']}"
        members = (await ws.members(owner, body["id"])).json()["items"]
        assert [(m["user_id"], m["role"]) for m in members] == [(str(owner.id), "owner")]
        (row,) = await _audit(db, "workspace.created")
        assert row["actor_id"] == str(owner.id)
        assert (row["subject_type"], row["subject_id"]) == ("workspace", body["id"])
        assert (row["scope_type"], row["scope_id"]) == ("workspace", body["id"])
        assert "Research" not in str(row["data"])
        await rules_hold(db, "WS-")

    @pytest.mark.parametrize("name", ["", "   ", "a" * 201, "line\nbreak", "tab\there"])
    async def test_invalid_name_answers_422(self, ws, owner, name):
        response = await ws.create(owner, name)
        assert response.status_code == 422
        assert code(response) == "VALIDATION_FAILED"

    async def test_unknown_field_answers_422(self, ws, owner, client):
        response = await client.post("/api/v1/workspaces", json={"name": "x", "owner_id": str(owner.id)},
                                     headers=owner.headers)
        assert response.status_code == 422

    async def test_missing_token_answers_401(self, client):
        response = await client.post("/api/v1/workspaces", json={"name": "x"})
        assert response.status_code == 401
        assert code(response) == "NOT_AUTHENTICATED"


class TestListWorkspaces:
    async def test_caller_sees_only_own_workspaces_with_role(self, ws, owner, users, db):
        first = await ws.create_ok(owner, "First")
        stranger = await users.make()
        await ws.create_ok(stranger, "Not yours")
        member = await add_member(ws, db, users, owner, first, "admin")
        mine = (await ws.list(member)).json()
        assert [(w["id"], w["role"]) for w in mine["items"]] == [(first, "admin")]
        assert mine["next_cursor"] is None

    async def test_pages_follow_the_cursor_without_overlap(self, ws, owner, clock):
        from datetime import timedelta

        made = []
        for index in range(5):
            made.append(await ws.create_ok(owner, f"W{index}"))
            clock.advance(timedelta(seconds=1))
        seen, cursor = [], None
        while True:
            params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = (await ws.list(owner, **params)).json()
            seen += [w["id"] for w in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == made

    async def test_forged_cursor_answers_400(self, ws, owner):
        response = await ws.list(owner, cursor="bm9wZQ")
        assert response.status_code == 400
        assert code(response) == "INVALID_CURSOR"

    async def test_left_workspace_is_not_listed(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.leave(member, workspace_id)).status_code == 204
        assert (await ws.list(member)).json()["items"] == []


class TestGetWorkspace:
    async def test_member_reads_workspace_with_own_role(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.workspace(member, workspace_id)
        assert response.status_code == 200
        assert response.json()["role"] == "member"

    async def test_non_member_gets_404_not_403(self, ws, workspace_id, users):
        stranger = await users.make()
        response = await ws.workspace(stranger, workspace_id)
        assert response.status_code == 404
        assert code(response) == "WORKSPACE_NOT_FOUND"

    async def test_unknown_id_gets_404(self, ws, owner):
        response = await ws.workspace(owner, "00000000-0000-4000-8000-000000000000")
        assert response.status_code == 404
        assert code(response) == "WORKSPACE_NOT_FOUND"


class TestDeleteWorkspace:
    @pytest.mark.invariant("WS-INV-08")
    async def test_owner_request_moves_to_deleting_and_revokes_pending_invitations(self, ws, owner, workspace_id,
                                                                                    db):
        invitation_id = await ws.invite_ok(owner, workspace_id, "pending@example.com")
        response = await ws.delete_workspace(owner, workspace_id)
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "DELETING"
        assert response.json()["deletion_requested_at"] is not None
        invitations = (await ws.invitations(owner, workspace_id)).json()["items"]
        assert [(i["id"], i["status"]) for i in invitations] == [(invitation_id, "REVOKED")]
        (row,) = await _audit(db, "workspace.deletion_requested")
        assert row["data"] == {"revoked_invitations": 1}
        await rules_hold(db, "WS-")

    async def test_repeated_request_answers_the_same_deleting_workspace(self, ws, owner, workspace_id, db):
        assert (await ws.delete_workspace(owner, workspace_id)).status_code == 202
        again = await ws.delete_workspace(owner, workspace_id)
        assert again.status_code == 202
        assert again.json()["status"] == "DELETING"
        assert len(await _audit(db, "workspace.deletion_requested")) == 1

    @pytest.mark.parametrize("role", ["admin", "member"])
    async def test_non_owner_is_refused_with_403(self, ws, owner, workspace_id, users, db, role):
        member = await add_member(ws, db, users, owner, workspace_id, role)
        response = await ws.delete_workspace(member, workspace_id)
        assert response.status_code == 403
        assert code(response) == "WORKSPACE_ROLE_FORBIDDEN"

    @pytest.mark.invariant("WS-INV-08")
    async def test_deleting_workspace_refuses_new_invitations(self, ws, owner, workspace_id):
        await ws.delete_workspace(owner, workspace_id)
        response = await ws.invite(owner, workspace_id, "late@example.com")
        assert response.status_code == 409
        assert code(response) == "WORKSPACE_NOT_ACTIVE"
        assert response.json()["workspace_status"] == "DELETING"

    @pytest.mark.invariant("WS-INV-08")
    async def test_deleting_workspace_refuses_acceptance(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        await ws.delete_workspace(owner, workspace_id)
        response = await ws.accept(invitee, token)
        assert response.status_code == 409
        assert code(response) == "WORKSPACE_NOT_ACTIVE"
        await rules_hold(db, "WS-")

    async def test_deleting_workspace_refuses_membership_changes(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        await ws.delete_workspace(owner, workspace_id)
        assert code(await ws.leave(member, workspace_id)) == "WORKSPACE_NOT_ACTIVE"
        assert code(await ws.set_role(owner, workspace_id, member, "admin")) == "WORKSPACE_NOT_ACTIVE"
        assert code(await ws.transfer(owner, workspace_id, member)) == "WORKSPACE_NOT_ACTIVE"
        # Still readable while DELETING, so members can see what is happening.
        assert (await ws.workspace(member, workspace_id)).json()["status"] == "DELETING"

    @pytest.mark.invariant("WS-INV-09")
    async def test_finish_job_marks_deleted_and_closes_memberships(self, ws, owner, workspace_id, users, db,
                                                                    job_runtime):
        member = await add_member(ws, db, users, owner, workspace_id)
        untouched = await ws.create_ok(owner, "Kept")
        await ws.delete_workspace(owner, workspace_id)
        assert await run_now(tasks.finish_workspace_deletions, job_runtime, timestamp=0) == 1
        assert code(await ws.workspace(owner, workspace_id)) == "WORKSPACE_NOT_FOUND"
        assert code(await ws.workspace(member, workspace_id)) == "WORKSPACE_NOT_FOUND"
        assert [w["id"] for w in (await ws.list(owner)).json()["items"]] == [untouched]
        async with db.read_only() as session:
            statuses = (await session.execute(text(
                "SELECT DISTINCT status FROM workspace.membership WHERE workspace_id = :id"),
                {"id": workspace_id})).scalars().all()
        assert statuses == ["CLOSED"]
        (row,) = await _audit(db, "workspace.deleted")
        assert row["actor_id"] is None and row["data"] == {"closed_memberships": 2}
        assert await run_now(tasks.finish_workspace_deletions, job_runtime, timestamp=0) == 0
        await rules_hold(db, "WS-")
