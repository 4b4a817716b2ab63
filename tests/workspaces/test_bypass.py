"""Bypass tests (INVARIANTS.md §3): illegal rows written with raw SQL, past every service check, are
refused by the database itself, naming the constraint, index or trigger that refused them."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tenet.iam.tokens import digest
from tenet.kernel.db_errors import violated_constraint
from tests.workspaces.conftest import add_member, token_for

_INSERT_INVITATION = text("""
    INSERT INTO workspace.invitation (id, workspace_id, email, email_normalized, email_normalization, role, status,
                                      token_digest, invited_by, created_at, expires_at, last_sent_at)
    VALUES (:id, :w, :email, :key, 'email-v1', :role, 'PENDING', :digest, :by, now(), now() + interval '7 days', now())
""")


async def _refused(db, *statements: tuple[str | object, dict]) -> str | None:
    """Run the statements in one unit of work; answer the name PostgreSQL gives for the refusal."""
    with pytest.raises(IntegrityError) as refusal:
        async with db.unit_of_work() as session:
            for statement, params in statements:
                await session.execute(text(statement) if isinstance(statement, str) else statement, params)
    return violated_constraint(refusal.value)


def _invitation(workspace_id: str, by: uuid.UUID, email: str, *, role: str = "member",
                token_digest: str | None = None) -> tuple[object, dict]:
    return _INSERT_INVITATION, {"id": uuid.uuid4(), "w": workspace_id, "email": email, "key": email.strip().lower(),
                                "role": role, "digest": token_digest or digest(uuid.uuid4().hex), "by": by}


class TestDatabaseRefusesIllegalRows:
    @pytest.mark.invariant("WS-INV-03")
    async def test_second_pending_invitation_for_the_same_normalised_email(self, ws, owner, workspace_id, db):
        await ws.invite_ok(owner, workspace_id, "Ada@Example.com")
        name = await _refused(db, _invitation(workspace_id, owner.id, "ada@example.com"))
        assert name == "uq_invitation_pending_email"

    @pytest.mark.invariant("WS-INV-02")
    async def test_second_active_membership_of_one_user(self, owner, workspace_id, db):
        name = await _refused(db, (
            "INSERT INTO workspace.membership (id, workspace_id, user_id, role, status, joined_at, updated_at) "
            "VALUES (gen_random_uuid(), :w, :u, 'member', 'ACTIVE', now(), now())", {"w": workspace_id, "u": owner.id}))
        assert name == "uq_membership_active"

    @pytest.mark.invariant("WS-INV-06")
    async def test_token_stored_in_clear(self, owner, workspace_id, db):
        name = await _refused(db, _invitation(workspace_id, owner.id, "a@example.com", token_digest="wsi_plaintext"))
        assert name == "ck_invitation_token_is_digest"

    @pytest.mark.invariant("WS-INV-06")
    async def test_acceptance_after_expiry(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        name = await _refused(db, (
            "UPDATE workspace.invitation SET status = 'ACCEPTED', accepted_by = :u, accepted_at = expires_at "
            "WHERE id = :id", {"u": invitee.id, "id": invitation_id}))
        assert name == "ck_invitation_accepted_before_expiry"

    async def test_invitation_granting_ownership(self, owner, workspace_id, db):
        name = await _refused(db, _invitation(workspace_id, owner.id, "boss@example.com", role="owner"))
        assert name == "ck_invitation_role"

    @pytest.mark.invariant("WS-INV-04")
    @pytest.mark.parametrize("back_to", ["PENDING", "REVOKED"])
    async def test_accepted_invitation_leaving_its_terminal_state(self, ws, owner, workspace_id, users, db, back_to):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        name = await _refused(db, (
            "UPDATE workspace.invitation SET status = :s, accepted_at = NULL, accepted_by = NULL, "
            "revoked_at = CASE WHEN :s = 'REVOKED' THEN now() END WHERE id = :id", {"s": back_to, "id": invitation_id}))
        assert name == "invitation_terminal_is_final"

    @pytest.mark.invariant("WS-INV-04")
    async def test_revoked_invitation_set_back_to_pending(self, ws, owner, workspace_id, db):
        invitation_id = await ws.invite_ok(owner, workspace_id, "a@example.com")
        await ws.revoke(owner, invitation_id)
        name = await _refused(db, (
            "UPDATE workspace.invitation SET status = 'PENDING', revoked_at = NULL WHERE id = :id",
            {"id": invitation_id}))
        assert name == "invitation_terminal_is_final"

    @pytest.mark.invariant("WS-INV-09")
    async def test_left_membership_reactivated(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        await ws.leave(member, workspace_id)
        name = await _refused(db, (
            "UPDATE workspace.membership SET status = 'ACTIVE', ended_at = NULL WHERE user_id = :u",
            {"u": member.id}))
        assert name == "membership_terminal_is_final"

    @pytest.mark.invariant("WS-INV-09")
    async def test_deleted_workspace_revived(self, ws, owner, workspace_id, db, job_runtime):
        from tenet.kernel.jobs import run_now
        from tenet.workspaces import tasks

        await ws.delete_workspace(owner, workspace_id)
        await run_now(tasks.finish_workspace_deletions, job_runtime, timestamp=0)
        name = await _refused(db, (
            "UPDATE workspace.workspace SET status = 'ACTIVE', deleted_at = NULL, deletion_requested_at = NULL "
            "WHERE id = :id", {"id": workspace_id}))
        assert name == "workspace_terminal_is_final"

    @pytest.mark.invariant("WS-INV-05")
    async def test_invitation_accepted_without_membership(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        # Deferred to commit; IMMEDIATE makes PostgreSQL run the commit-time check now (the test's outer
        # transaction never commits).
        name = await _refused(db, (
            "UPDATE workspace.invitation SET status = 'ACCEPTED', accepted_by = :u, accepted_at = created_at "
            "WHERE id = :id", {"u": invitee.id, "id": invitation_id}),
            ("SET CONSTRAINTS ALL IMMEDIATE", {}))
        assert name == "invitation_accepted_has_membership"

    @pytest.mark.invariant("WS-INV-05")
    async def test_membership_from_an_invitation_that_was_not_accepted(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        name = await _refused(db, (
            "INSERT INTO workspace.membership (id, workspace_id, user_id, role, status, invitation_id, joined_at, "
            "updated_at) VALUES (gen_random_uuid(), :w, :u, 'member', 'ACTIVE', :i, now(), now())",
            {"w": workspace_id, "u": invitee.id, "i": invitation_id}), ("SET CONSTRAINTS ALL IMMEDIATE", {}))
        assert name == "membership_invitation_is_accepted"

    @pytest.mark.invariant("WS-INV-05")
    async def test_the_real_acceptance_passes_the_commit_time_checks(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        async with db.unit_of_work() as session:
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))  # runs the queued checks: no error


class TestNothingIsDeleted:
    """Workspaces, memberships and invitations end in a state; the database refuses DELETE and TRUNCATE of
    them, whoever connects (the `*_never_deleted` triggers)."""

    @pytest.mark.invariant("WS-INV-05", "WS-INV-09")
    async def test_membership_of_an_accepted_invitation_deleted(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        name = await _refused(db, ("DELETE FROM workspace.membership WHERE invitation_id = :id", {"id": invitation_id}))
        assert name == "membership_never_deleted"

    @pytest.mark.invariant("WS-INV-09")
    async def test_ended_membership_deleted(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        await ws.leave(member, workspace_id)
        name = await _refused(db, ("DELETE FROM workspace.membership WHERE user_id = :u", {"u": member.id}))
        assert name == "membership_never_deleted"

    @pytest.mark.invariant("WS-INV-04")
    async def test_revoked_invitation_deleted(self, ws, owner, workspace_id, db):
        invitation_id = await ws.invite_ok(owner, workspace_id, "a@example.com")
        await ws.revoke(owner, invitation_id)
        name = await _refused(db, ("DELETE FROM workspace.invitation WHERE id = :id", {"id": invitation_id}))
        assert name == "invitation_never_deleted"

    @pytest.mark.invariant("WS-INV-04", "WS-INV-05")
    async def test_accepted_invitation_deleted_with_its_membership(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        # The membership is detached first, so no foreign key stands in the way: only the trigger refuses.
        name = await _refused(
            db, ("UPDATE workspace.membership SET invitation_id = NULL WHERE invitation_id = :id",
                 {"id": invitation_id}),
            ("DELETE FROM workspace.invitation WHERE id = :id", {"id": invitation_id}))
        assert name == "invitation_never_deleted"

    @pytest.mark.invariant("WS-INV-09")
    async def test_deleted_workspace_deleted(self, ws, owner, workspace_id, db, job_runtime):
        from tenet.kernel.jobs import run_now
        from tenet.workspaces import tasks

        await ws.delete_workspace(owner, workspace_id)
        await run_now(tasks.finish_workspace_deletions, job_runtime, timestamp=0)
        name = await _refused(db, ("DELETE FROM workspace.workspace WHERE id = :id", {"id": workspace_id}))
        assert name == "workspace_never_deleted"

    @pytest.mark.invariant("WS-INV-04", "WS-INV-05", "WS-INV-09")
    @pytest.mark.parametrize("table", ["workspace", "membership", "invitation"])
    async def test_truncate(self, owner, workspace_id, db, table):
        # TRUNCATE needs the queued commit-time checks of the rows the fixtures wrote run first.
        name = await _refused(db, ("SET CONSTRAINTS ALL IMMEDIATE", {}),
                              (f"TRUNCATE workspace.{table} CASCADE", {}))
        assert name == f"{table}_never_deleted"
