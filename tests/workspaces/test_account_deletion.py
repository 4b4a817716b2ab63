"""Deleting an account (identity) and its workspaces: WS-INV-10, with WS-INV-01 on top."""

from __future__ import annotations

import pytest

from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.workspaces.conftest import add_member


async def delete_account(client, admin, user):
    return await client.delete(f"/api/v1/iam/users/{user.id}", headers=admin.headers)


@pytest.mark.invariant("WS-INV-10")
async def test_a_deleted_member_leaves_every_workspace(client, users, ws, db, owner, workspace_id):
    admin = await users.admin()
    member = await add_member(ws, db, users, owner, workspace_id)
    other = await ws.create_ok(owner, "Second")
    await ws.invite_ok(owner, other, member.email)
    assert (await delete_account(client, admin, member)).status_code == 204
    members = (await ws.members(owner, workspace_id)).json()["items"]
    assert [m["user_id"] for m in members] == [str(owner.id)]
    await rules_hold(db, "WS-")


@pytest.mark.invariant("WS-INV-10", "WS-INV-01")
async def test_deleting_the_last_owner_is_refused(client, users, ws, db, owner, workspace_id):
    admin = await users.admin()
    response = await delete_account(client, admin, owner)
    assert (response.status_code, code(response)) == (409, "LAST_OWNER")
    assert response.json()["workspace_id"] == workspace_id
    # Nothing half-done: the account still signs in and still owns the workspace.
    assert (await ws.workspace(owner, workspace_id)).status_code == 200
    await rules_hold(db, "WS-")


@pytest.mark.invariant("WS-INV-10")
async def test_with_a_second_owner_the_account_can_go(client, users, ws, db, owner, workspace_id):
    admin = await users.admin()
    await add_member(ws, db, users, owner, workspace_id, role="owner")
    assert (await delete_account(client, admin, owner)).status_code == 204
    await rules_hold(db, "WS-")


@pytest.mark.invariant("WS-INV-10")
async def test_the_detector_finds_a_deleted_account_still_member(users, ws, db, owner, workspace_id):
    from sqlalchemy import text

    from tenet.kernel.invariants import check, get

    async with db.unit_of_work() as session:
        await session.execute(text(
            "UPDATE iam.user_account SET status = 'deleted', deleted_at = now() WHERE id = :id"), {"id": owner.id})
        violations = await check(await session.connection(), [get("WS-INV-10")])
        await session.rollback()
    assert violations and violations[0].rows == 1
