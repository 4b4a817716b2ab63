"""The periodic jobs: invitation expiry sweep (and its registration with the worker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import run_now
from tenet.worker import blueprints, build_job_app
from tenet.workspaces import tasks
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.workspaces.conftest import token_for


async def _statuses(db) -> dict[str, str]:
    async with db.read_only() as session:
        rows = await session.execute(text("SELECT email, status FROM workspace.invitation"))
        return {email: status for email, status in rows}


class TestExpireInvitationsJob:
    @pytest.mark.invariant("WS-INV-04")
    async def test_sweep_marks_pending_invitations_past_expiry_as_expired(self, ws, owner, workspace_id, users, db,
                                                                          clock, job_runtime):
        invitee = await users.make()
        await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        clock.advance(timedelta(days=2))
        await ws.invite_ok(owner, workspace_id, "later@example.com")
        revoked = await ws.invite_ok(owner, workspace_id, "revoked@example.com")
        await ws.revoke(owner, revoked)
        clock.advance(timedelta(days=5))  # the first is 7 days old now; the others 5
        assert await run_now(tasks.expire_invitations, job_runtime, timestamp=0) == 1
        statuses = await _statuses(db)
        assert statuses[invitee.email] == "EXPIRED"
        assert statuses["later@example.com"] == "PENDING"
        assert statuses["revoked@example.com"] == "REVOKED"
        refused = await ws.accept(invitee, token)
        assert code(refused) == "INVITATION_EXPIRED"
        async with db.read_only() as session:
            audit = (await session.execute(text(
                "SELECT actor_type, data FROM kernel.audit_log WHERE action = 'workspace.invitation.expired'"))).all()
        assert [tuple(a) for a in audit] == [("system", {})]
        assert await run_now(tasks.expire_invitations, job_runtime, timestamp=0) == 0
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-04")
    async def test_sweep_handles_many_workspaces_in_batches(self, ws, owner, db, clock, job_runtime, monkeypatch):
        monkeypatch.setattr(tasks.commands, "SWEEP_BATCH", 2)
        for index in range(5):
            workspace_id = await ws.create_ok(owner, f"W{index}")
            await ws.invite_ok(owner, workspace_id, f"p{index}@example.com")
        clock.advance(timedelta(days=8))
        assert await tasks.sweep_expired_invitations(db, clock.now()) == 5
        assert set((await _statuses(db)).values()) == {"EXPIRED"}

    @pytest.mark.invariant("WS-INV-04")
    async def test_expired_invitation_stays_expired(self, ws, owner, workspace_id, db, clock, job_runtime):
        invitation_id = await ws.invite_ok(owner, workspace_id, "p@example.com")
        clock.advance(timedelta(days=8))
        await run_now(tasks.expire_invitations, job_runtime, timestamp=0)
        assert code(await ws.revoke(owner, invitation_id)) == "INVITATION_EXPIRED"
        assert code(await ws.resend(owner, invitation_id)) == "INVITATION_EXPIRED"


class TestWorkerRegistration:
    def test_blueprint_is_registered_under_workspace(self):
        assert blueprints()["workspaces"] == (tasks.blueprint,)
        app = build_job_app("postgresql://tenet@localhost/unused")
        assert {"workspaces:expire_invitations", "workspaces:finish_workspace_deletions"} <= set(app.tasks)
        periodic = {name for name, _periodic_id in app.periodic_registry.periodic_tasks}
        assert {"workspaces:expire_invitations", "workspaces:finish_workspace_deletions"} <= periodic
