"""Members: list, change role, remove, leave, transfer ownership — and the last-owner rule (WS-INV-01)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tenet.workspaces.permissions import Action, allowed
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.workspaces.conftest import add_member, token_for


async def _membership_rows(db, workspace_id: str, user_id) -> list[tuple[str, str]]:
    async with db.read_only() as session:
        return [tuple(r) for r in (await session.execute(text(
            "SELECT status, role FROM workspace.membership WHERE workspace_id = :w AND user_id = :u "
            "ORDER BY joined_at, status = 'ACTIVE'"),
            {"w": workspace_id, "u": user_id}))]


class TestListMembers:
    async def test_any_member_lists_active_members_with_display_fields(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        body = (await ws.members(member, workspace_id)).json()
        assert {(m["user_id"], m["role"], m["display_name"]) for m in body["items"]} == {
            (str(owner.id), "owner", "Olga Owner"), (str(member.id), "member", "Test User")}

    async def test_pages_of_members_cover_everyone_once(self, ws, owner, workspace_id, users, db):
        for _ in range(3):
            await add_member(ws, db, users, owner, workspace_id)
        first = (await ws.members(owner, workspace_id, limit=3)).json()
        second = (await ws.members(owner, workspace_id, limit=3, cursor=first["next_cursor"])).json()
        ids = [m["user_id"] for m in first["items"] + second["items"]]
        assert len(ids) == len(set(ids)) == 4
        assert second["next_cursor"] is None

    async def test_non_member_gets_404(self, ws, workspace_id, users):
        response = await ws.members(await users.make(), workspace_id)
        assert response.status_code == 404


class TestChangeMemberRole:
    async def test_owner_promotes_member_to_admin(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.set_role(owner, workspace_id, member, "admin")
        assert response.status_code == 200, response.text
        assert response.json()["role"] == "admin"
        async with db.read_only() as session:
            data = (await session.execute(text(
                "SELECT data FROM kernel.audit_log WHERE action = 'workspace.member.role_changed'"))).scalar_one()
        assert data == {"user_id": str(member.id), "from_role": "member", "to_role": "admin"}

    async def test_owner_makes_a_second_owner(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id, "owner")
        assert (await ws.workspace(member, workspace_id)).json()["role"] == "owner"

    @pytest.mark.invariant("WS-INV-01")
    async def test_last_owner_demoting_self_is_refused(self, ws, owner, workspace_id, db):
        response = await ws.set_role(owner, workspace_id, owner, "admin")
        assert response.status_code == 409
        assert code(response) == "LAST_OWNER"
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_owner_demotes_self_when_another_owner_remains(self, ws, owner, workspace_id, users, db):
        await add_member(ws, db, users, owner, workspace_id, "owner")
        response = await ws.set_role(owner, workspace_id, owner, "member")
        assert response.status_code == 200
        assert response.json()["role"] == "member"
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_owner_demoting_the_other_owner_keeps_one(self, ws, owner, workspace_id, users, db):
        other = await add_member(ws, db, users, owner, workspace_id, "owner")
        assert (await ws.set_role(owner, workspace_id, other, "admin")).status_code == 200
        assert code(await ws.set_role(owner, workspace_id, owner, "admin")) == "LAST_OWNER"
        await rules_hold(db, "WS-")

    async def test_same_role_answers_member_unchanged(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.set_role(owner, workspace_id, member, "member")
        assert response.status_code == 200
        assert response.json()["role"] == "member"

    @pytest.mark.parametrize("role", ["admin", "member"])
    async def test_non_owner_is_refused_with_403(self, ws, owner, workspace_id, users, db, role):
        actor = await add_member(ws, db, users, owner, workspace_id, role)
        target = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.set_role(actor, workspace_id, target, "admin")
        assert response.status_code == 403
        assert code(response) == "WORKSPACE_ROLE_FORBIDDEN"

    async def test_unknown_member_answers_404(self, ws, owner, workspace_id, users):
        stranger = await users.make()
        response = await ws.set_role(owner, workspace_id, stranger, "admin")
        assert response.status_code == 404
        assert code(response) == "MEMBER_NOT_FOUND"

    async def test_unknown_role_answers_422(self, ws, owner, workspace_id):
        response = await ws.set_role(owner, workspace_id, owner, "superuser")
        assert response.status_code == 422


class TestRemoveMember:
    async def test_owner_removes_admin_who_then_loses_access(self, ws, owner, workspace_id, users, db):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        assert (await ws.remove(owner, workspace_id, admin)).status_code == 204
        assert code(await ws.workspace(admin, workspace_id)) == "WORKSPACE_NOT_FOUND"
        assert await _membership_rows(db, workspace_id, admin.id) == [("REMOVED", "admin")]
        await rules_hold(db, "WS-")

    async def test_admin_removes_member(self, ws, owner, workspace_id, users, db):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        member = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.remove(admin, workspace_id, member)).status_code == 204

    @pytest.mark.parametrize("target_role", ["admin", "owner"])
    async def test_admin_removing_admin_or_owner_is_refused(self, ws, owner, workspace_id, users, db, target_role):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        target = owner if target_role == "owner" else await add_member(ws, db, users, owner, workspace_id, "admin")
        response = await ws.remove(admin, workspace_id, target)
        assert response.status_code == 403
        assert response.json()["target_role"] == target_role

    async def test_member_removing_anyone_is_refused(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        other = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.remove(member, workspace_id, other)).status_code == 403

    @pytest.mark.invariant("WS-INV-01")
    async def test_owner_removes_co_owner_and_an_owner_remains(self, ws, owner, workspace_id, users, db):
        other = await add_member(ws, db, users, owner, workspace_id, "owner")
        assert (await ws.remove(owner, workspace_id, other)).status_code == 204
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_last_owner_removing_self_is_refused(self, ws, owner, workspace_id, db):
        response = await ws.remove(owner, workspace_id, owner)
        assert response.status_code == 409
        assert code(response) == "LAST_OWNER"

    async def test_removing_a_non_member_answers_404(self, ws, owner, workspace_id, users):
        response = await ws.remove(owner, workspace_id, await users.make())
        assert code(response) == "MEMBER_NOT_FOUND"


class TestLeaveWorkspace:
    async def test_member_leaves(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.leave(member, workspace_id)).status_code == 204
        assert await _membership_rows(db, workspace_id, member.id) == [("LEFT", "member")]

    @pytest.mark.invariant("WS-INV-01")
    async def test_last_owner_leaving_is_refused(self, ws, owner, workspace_id, users, db):
        await add_member(ws, db, users, owner, workspace_id, "admin")
        response = await ws.leave(owner, workspace_id)
        assert response.status_code == 409
        assert code(response) == "LAST_OWNER"
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_owner_leaves_when_another_owner_remains(self, ws, owner, workspace_id, users, db):
        other = await add_member(ws, db, users, owner, workspace_id, "owner")
        assert (await ws.leave(owner, workspace_id)).status_code == 204
        assert code(await ws.leave(other, workspace_id)) == "LAST_OWNER"
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-02")
    async def test_rejoining_after_leaving_makes_a_new_membership(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        await ws.leave(member, workspace_id)
        await ws.invite_ok(owner, workspace_id, member.email, "admin")
        assert (await ws.accept(member, await token_for(db, member.email))).status_code == 200
        assert await _membership_rows(db, workspace_id, member.id) == [("LEFT", "member"), ("ACTIVE", "admin")]
        await rules_hold(db, "WS-")


class TestTransferOwnership:
    @pytest.mark.invariant("WS-INV-01")
    async def test_member_becomes_owner_and_caller_becomes_admin(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.transfer(owner, workspace_id, member)
        assert response.status_code == 200, response.text
        assert response.json()["role"] == "admin"
        assert (await ws.workspace(member, workspace_id)).json()["role"] == "owner"
        async with db.read_only() as session:
            data = (await session.execute(text(
                "SELECT data FROM kernel.audit_log WHERE action = 'workspace.ownership.transferred'"))).scalar_one()
        assert data["from_user_id"] == str(owner.id) and data["to_user_id"] == str(member.id)
        await rules_hold(db, "WS-")

    async def test_transfer_to_self_is_refused(self, ws, owner, workspace_id):
        assert code(await ws.transfer(owner, workspace_id, owner)) == "OWNERSHIP_TRANSFER_TO_SELF"

    async def test_transfer_to_an_owner_is_refused(self, ws, owner, workspace_id, users, db):
        other = await add_member(ws, db, users, owner, workspace_id, "owner")
        assert code(await ws.transfer(owner, workspace_id, other)) == "ALREADY_OWNER"

    async def test_transfer_to_a_non_member_answers_404(self, ws, owner, workspace_id, users):
        assert code(await ws.transfer(owner, workspace_id, await users.make())) == "MEMBER_NOT_FOUND"

    async def test_admin_cannot_transfer(self, ws, owner, workspace_id, users, db):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        member = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.transfer(admin, workspace_id, member)).status_code == 403


class TestPermissionTable:
    """The documented table (permissions.PERMISSIONS) is what the routes do, cell by cell."""

    @pytest.mark.parametrize("actor_role", ["owner", "admin", "member"])
    @pytest.mark.parametrize(("action", "target_role"), [
        (Action.INVITE, "admin"), (Action.INVITE, "member"), (Action.LIST_INVITATIONS, None),
        (Action.MANAGE_INVITATION, "admin"), (Action.MANAGE_INVITATION, "member"), (Action.CHANGE_ROLE, None),
        (Action.REMOVE_MEMBER, "admin"), (Action.REMOVE_MEMBER, "member"), (Action.TRANSFER_OWNERSHIP, None),
        (Action.DELETE_WORKSPACE, None), (Action.VIEW, None),
    ])
    async def test_route_obeys_the_table(self, ws, owner, workspace_id, users, db, actor_role, action, target_role):
        actor = owner if actor_role == "owner" else await add_member(ws, db, users, owner, workspace_id, actor_role)
        if action == Action.INVITE:
            response = await ws.invite(actor, workspace_id, "someone@example.com", target_role)
        elif action == Action.LIST_INVITATIONS:
            response = await ws.invitations(actor, workspace_id)
        elif action == Action.MANAGE_INVITATION:
            invitation_id = await ws.invite_ok(owner, workspace_id, "someone@example.com", target_role)
            response = await ws.revoke(actor, invitation_id)
        elif action == Action.CHANGE_ROLE:
            target = await add_member(ws, db, users, owner, workspace_id)
            response = await ws.set_role(actor, workspace_id, target, "admin")
        elif action == Action.REMOVE_MEMBER:
            target = await add_member(ws, db, users, owner, workspace_id, target_role)
            response = await ws.remove(actor, workspace_id, target)
        elif action == Action.TRANSFER_OWNERSHIP:
            target = await add_member(ws, db, users, owner, workspace_id)
            response = await ws.transfer(actor, workspace_id, target)
        elif action == Action.DELETE_WORKSPACE:
            response = await ws.delete_workspace(actor, workspace_id)
        else:
            response = await ws.members(actor, workspace_id)
        expected = allowed(actor_role, action, target_role)
        assert (response.status_code < 400) is expected, (response.status_code, response.text)
        if not expected:
            assert code(response) == "WORKSPACE_ROLE_FORBIDDEN"
