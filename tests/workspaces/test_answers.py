"""A command answers what the GET of the same resource answers right after it (issue 23: the answer is read back
through the GET's query in the command's transaction; the invite path, a measured hot path, answers the row it
inserted, with the same effective status): workspaces, members, invitations."""

from __future__ import annotations

from datetime import timedelta

from tests.workspaces.conftest import add_member


async def test_a_workspace_created_transferred_and_deleted_answers_its_get(ws, db, users, owner):
    created = await ws.create(owner, "Lab")
    assert created.status_code == 201, created.text
    workspace_id = created.json()["id"]
    assert created.json() == (await ws.workspace(owner, workspace_id)).json()
    member = await add_member(ws, db, users, owner, workspace_id)
    transferred = await ws.transfer(owner, workspace_id, member)
    assert transferred.status_code == 200, transferred.text
    assert transferred.json() == (await ws.workspace(owner, workspace_id)).json()
    deleted = await ws.delete_workspace(member, workspace_id)
    assert deleted.status_code == 202, deleted.text
    assert deleted.json() == (await ws.workspace(member, workspace_id)).json()


async def test_a_member_whose_role_changed_answers_their_row_in_the_list(ws, db, users, owner, workspace_id):
    member = await add_member(ws, db, users, owner, workspace_id)
    changed = await ws.set_role(owner, workspace_id, member, "admin")
    assert changed.status_code == 200, changed.text
    listed = (await ws.members(owner, workspace_id)).json()["items"]
    assert changed.json() == next(m for m in listed if m["user_id"] == str(member.id))


async def test_an_invitation_invited_resent_and_revoked_answers_its_row_in_the_list(ws, owner, workspace_id, clock):
    async def listed(invitation_id: str) -> dict:
        rows = (await ws.invitations(owner, workspace_id)).json()["items"]
        return next(r for r in rows if r["id"] == invitation_id)

    invited = await ws.invite(owner, workspace_id, "newcomer@example.com")
    assert invited.status_code == 201, invited.text
    assert invited.json() == await listed(invited.json()["id"])
    clock.advance(timedelta(hours=1))
    resent = await ws.resend(owner, invited.json()["id"])
    assert resent.status_code == 200, resent.text
    assert resent.json() == await listed(invited.json()["id"])
    revoked = await ws.revoke(owner, invited.json()["id"])
    assert revoked.status_code == 200, revoked.text
    assert revoked.json() == await listed(invited.json()["id"])
