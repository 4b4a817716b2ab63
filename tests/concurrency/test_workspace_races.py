"""Workspace races on real parallel connections (spec 002 fixture group 3): exactly one winner, a stable
code for the loser, every WS rule holding afterwards.

The workspace row lock (`commands.lock_workspace`, in most commands taken by the statement that reads the
caller's membership) is what serialises the owner count and the write. The
last-owners test widens the window between them with a small injected delay, so without the lock both
transactions count before either writes; `test_without_the_lock_*` runs that same timing with the lock
made a no-op and shows the rule breaking — the proof that the race test can fail and that the lock (not
luck) keeps it green.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.workspaces import commands, errors, invitations, members, workspaces
from tenet.workspaces.permissions import InvitationRole, WorkspaceRole
from tests.support.invariants import rules_hold
from tests.support.outcomes import outcome
from tests.support.users import TestUser, UserFactory

WINDOW = 0.3  # seconds between the decisive read and the write, wide enough for the other side to read too


async def _workspace_with_owners(db: Database, people: UserFactory, clock, policy, count: int
                                 ) -> tuple[uuid.UUID, list[TestUser]]:
    owners = [await people.make() for _ in range(count)]
    now = clock.now()
    async with db.unit_of_work() as session:
        workspace = await workspaces.create_workspace(session, name="Race", principal_id=owners[0].id, now=now)
    for person in owners[1:]:
        async with db.unit_of_work() as session:
            _, token = await invitations.create_invitation(session, workspace_id=workspace.id,
                                                           principal_id=owners[0].id, email=person.email,
                                                           role=InvitationRole.MEMBER, policy=policy, now=now)
        async with db.unit_of_work() as session:
            await invitations.accept_invitation(session, token=token, principal_id=person.id, now=now)
        async with db.unit_of_work() as session:
            await members.change_member_role(session, workspace_id=workspace.id, principal_id=owners[0].id,
                                             user_id=person.id, role=WorkspaceRole.OWNER, now=now)
    return workspace.id, owners


def _without_the_workspace_lock(monkeypatch) -> None:
    """The control experiments' service: no workspace row lock, neither alone (`commands.lock_workspace`) nor in the
    statement that reads the caller's membership (`_lock_workspace_and_caller`)."""
    async def no_lock(session, workspace_id):
        return None

    monkeypatch.setattr(commands, "lock_workspace", no_lock)
    monkeypatch.setattr(commands, "LOCK_WORKSPACE_AND_CALLER", commands.WORKSPACE_AND_CALLER)


def _widen_the_owner_count_window(monkeypatch) -> None:
    count = commands.count_other_active_owners

    async def slow_count(*args, **kwargs):
        result = await count(*args, **kwargs)
        await asyncio.sleep(WINDOW)
        return result

    monkeypatch.setattr(commands, "count_other_active_owners", slow_count)


async def _both_owners_leave(db: Database, workspace_id: uuid.UUID, owners: list[TestUser], now) -> list[str]:
    async def leave(person: TestUser) -> None:
        async with db.unit_of_work() as session:
            await members.leave_workspace(session, workspace_id=workspace_id, principal_id=person.id, now=now)

    return list(await asyncio.gather(*(outcome(leave(o)) for o in owners)))


async def _active_owner_count(db: Database, workspace_id: uuid.UUID) -> int:
    async with db.read_only() as session:
        return (await session.execute(text(
            "SELECT count(*) FROM workspace.membership WHERE workspace_id = :w AND status = 'ACTIVE' "
            "AND role = 'owner'"), {"w": workspace_id})).scalar_one()


class TestLastOwnersLeaving:
    @pytest.mark.invariant("WS-INV-01")
    async def test_two_last_owners_leaving_at_once_leave_one_owner(self, committed_db, people, clock, policy,
                                                                    monkeypatch):
        workspace_id, owners = await _workspace_with_owners(committed_db, people, clock, policy, 2)
        _widen_the_owner_count_window(monkeypatch)
        outcomes = await _both_owners_leave(committed_db, workspace_id, owners, clock.now())
        assert sorted(outcomes) == ["LAST_OWNER", "ok"]
        assert await _active_owner_count(committed_db, workspace_id) == 1
        await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_without_the_lock_the_same_timing_leaves_no_owner(self, committed_db, people, clock, policy,
                                                                     monkeypatch):
        """The control experiment: the same race with `_lock_workspace` a no-op breaks WS-INV-01. Were this
        to pass (no violation), the window above would not be real and the test above would prove nothing."""
        workspace_id, owners = await _workspace_with_owners(committed_db, people, clock, policy, 2)
        _widen_the_owner_count_window(monkeypatch)

        _without_the_workspace_lock(monkeypatch)
        outcomes = await _both_owners_leave(committed_db, workspace_id, owners, clock.now())
        assert outcomes == ["ok", "ok"]
        assert await _active_owner_count(committed_db, workspace_id) == 0
        with pytest.raises(AssertionError, match="WS-INV-01"):
            await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-01")
    async def test_demotion_and_leave_of_the_two_owners_at_once_keep_one(self, committed_db, people, clock, policy,
                                                                          monkeypatch):
        workspace_id, (first, second) = await _workspace_with_owners(committed_db, people, clock, policy, 2)
        _widen_the_owner_count_window(monkeypatch)
        now = clock.now()

        async def demote_self() -> None:
            async with committed_db.unit_of_work() as session:
                await members.change_member_role(session, workspace_id=workspace_id, principal_id=first.id,
                                                 user_id=first.id, role=WorkspaceRole.MEMBER, now=now)

        async def leave() -> None:
            async with committed_db.unit_of_work() as session:
                await members.leave_workspace(session, workspace_id=workspace_id, principal_id=second.id, now=now)

        outcomes = await asyncio.gather(outcome(demote_self()), outcome(leave()))
        assert sorted(outcomes) == ["LAST_OWNER", "ok"]
        await rules_hold(committed_db, "WS-")


async def _invited(db, owner, invitee, policy, now, role=InvitationRole.MEMBER):
    """A committed workspace of `owner` with a pending invitation for `invitee`: (workspace, invitation,
    token)."""
    async with db.unit_of_work() as session:
        workspace = await workspaces.create_workspace(session, name="Race", principal_id=owner.id, now=now)
        invitation, token = await invitations.create_invitation(
            session, workspace_id=workspace.id, principal_id=owner.id, email=invitee.email, role=role, policy=policy,
            now=now)
    return workspace, invitation, token


class TestAcceptVersusRevoke:
    @pytest.mark.invariant("WS-INV-05", "WS-INV-06")
    @pytest.mark.parametrize("revoke_first", [False, True])
    async def test_exactly_one_of_accept_and_revoke_wins(self, committed_db, people, clock, policy, revoke_first):
        owner, invitee = await people.make(), await people.make()
        now = clock.now()
        _workspace, invitation, token = await _invited(committed_db, owner, invitee, policy, now,
                                                         InvitationRole.MEMBER)

        async def accept() -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.accept_invitation(session, token=token, principal_id=invitee.id, now=now)

        async def revoke() -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.revoke_invitation(session, invitation_id=invitation.id, principal_id=owner.id,
                                                    now=now)

        calls = [revoke(), accept()] if revoke_first else [accept(), revoke()]
        outcomes = await asyncio.gather(*(outcome(c) for c in calls))
        if revoke_first:
            outcomes.reverse()
        accept_outcome, revoke_outcome = outcomes
        assert sorted(outcomes) in (["INVITATION_ALREADY_ACCEPTED", "ok"], ["INVITATION_REVOKED", "ok"])
        async with committed_db.read_only() as session:
            status = (await session.execute(text("SELECT status FROM workspace.invitation WHERE id = :id"),
                                            {"id": invitation.id})).scalar_one()
            memberships = (await session.execute(text(
                "SELECT count(*) FROM workspace.membership WHERE invitation_id = :id"), {"id": invitation.id})
            ).scalar_one()
        if accept_outcome == "ok":
            assert (status, memberships, revoke_outcome) == ("ACCEPTED", 1, "INVITATION_ALREADY_ACCEPTED")
        else:
            assert (status, memberships, accept_outcome) == ("REVOKED", 0, "INVITATION_REVOKED")
        await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-02", "WS-INV-05")
    async def test_two_accepts_of_one_token_make_one_membership(self, committed_db, people, clock, policy):
        owner, invitee = await people.make(), await people.make()
        now = clock.now()
        workspace, _, token = await _invited(committed_db, owner, invitee, policy, now,
                                                         InvitationRole.ADMIN)

        async def accept() -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.accept_invitation(session, token=token, principal_id=invitee.id, now=now)

        outcomes = await asyncio.gather(outcome(accept()), outcome(accept()))
        assert sorted(outcomes) == ["INVITATION_ALREADY_ACCEPTED", "ok"]
        assert await _active_owner_count(committed_db, workspace.id) == 1
        async with committed_db.read_only() as session:
            active = (await session.execute(text(
                "SELECT count(*) FROM workspace.membership WHERE workspace_id = :w AND user_id = :u "
                "AND status = 'ACTIVE'"), {"w": workspace.id, "u": invitee.id})).scalar_one()
        assert active == 1
        await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-06")
    async def test_accept_racing_a_resend_never_accepts_the_old_token(self, committed_db, people, clock, policy):
        owner, invitee = await people.make(), await people.make()
        now = clock.now()
        _workspace, invitation, old_token = await _invited(committed_db, owner, invitee, policy, now,
                                                         InvitationRole.MEMBER)

        async def accept() -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.accept_invitation(session, token=old_token, principal_id=invitee.id, now=now)

        async def resend() -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.resend_invitation(session, invitation_id=invitation.id, principal_id=owner.id,
                                                policy=policy, now=now + timedelta(seconds=1))

        outcomes = await asyncio.gather(outcome(accept()), outcome(resend()))
        assert outcomes in (["ok", "INVITATION_ALREADY_ACCEPTED"], ["INVITATION_TOKEN_INVALID", "ok"])
        await rules_hold(committed_db, "WS-")


class TestConcurrentInvitations:
    @pytest.mark.invariant("WS-INV-03")
    async def test_two_invitations_for_one_email_at_once_create_one(self, committed_app, people, committed_db):
        owner = await people.make()
        transport = httpx.ASGITransport(app=committed_app, client=("192.0.2.10", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            created = await http.post("/api/v1/workspaces", json={"name": "Race"}, headers=owner.headers)
            url = f"/api/v1/workspaces/{created.json()['id']}/invitations"
            responses = await asyncio.gather(*(
                http.post(url, json={"email": email}, headers=owner.headers)
                for email in ("Ada@Example.com", "ada@example.com ")
            ))
        assert sorted(r.status_code for r in responses) == [201, 409], [r.text for r in responses]
        loser = next(r for r in responses if r.status_code == 409)
        assert loser.json()["code"] == "INVITATION_ALREADY_PENDING"
        await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-03")
    async def test_without_the_lock_the_unique_index_still_decides(self, committed_db, people, clock, policy,
                                                                    monkeypatch):
        """Both pass the pre-check (lock removed, window widened): the partial unique index refuses the
        second insert, mapped to the same stable code — never an IntegrityError."""
        owner = await people.make()
        now = clock.now()
        async with committed_db.unit_of_work() as session:
            workspace = await workspaces.create_workspace(session, name="Race", principal_id=owner.id, now=now)

        find = invitations.iam_service.find_user_by_email

        async def slow_find(*args, **kwargs):  # runs after the pending pre-check, before the insert
            await asyncio.sleep(WINDOW)
            return await find(*args, **kwargs)

        _without_the_workspace_lock(monkeypatch)
        monkeypatch.setattr(invitations.iam_service, "find_user_by_email", slow_find)

        async def invite(email: str) -> None:
            async with committed_db.unit_of_work() as session:
                await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=owner.id,
                                                    email=email, role=InvitationRole.MEMBER, policy=policy, now=now)

        outcomes = await asyncio.gather(outcome(invite("Ada@Example.com")), outcome(invite("ada@example.com")))
        assert sorted(outcomes) == ["INVITATION_ALREADY_PENDING", "ok"]
        await rules_hold(committed_db, "WS-")


class TestCallerChangedWhileWaitingForTheLock:
    """A command reads the caller's membership in the statement that takes the workspace lock. When that
    statement waits for the lock, READ COMMITTED re-checks only the rows it locks against their latest
    versions: the membership is locked too, so a removal committed during the wait is seen."""

    async def _removed_while_inviting(self, db: Database, people: UserFactory, clock, policy) -> tuple[str, int]:
        """An owner removes an admin; the admin's invitation is sent while the removal holds the lock.
        Answers the invitation's outcome and the PENDING invitations the removed admin made."""
        workspace_id, (owner, admin) = await _workspace_with_owners(db, people, clock, policy, 2)
        now = clock.now()
        async with db.unit_of_work() as session:  # the second owner steps down to admin
            await members.change_member_role(session, workspace_id=workspace_id, principal_id=owner.id,
                                             user_id=admin.id, role=WorkspaceRole.ADMIN, now=now)

        async def invite() -> None:
            async with db.unit_of_work() as session:
                await invitations.create_invitation(session, workspace_id=workspace_id, principal_id=admin.id,
                                                email="late@example.com", role=InvitationRole.MEMBER,
                                                policy=policy, now=now)

        async with db.unit_of_work() as removal:
            await members.remove_member(removal, workspace_id=workspace_id, principal_id=owner.id, user_id=admin.id,
                                        now=now)
            inviting = asyncio.create_task(outcome(invite()))
            await asyncio.sleep(WINDOW)  # the invitation's statement is now waiting for the workspace lock
            assert not inviting.done()
        answer = await inviting
        async with db.read_only() as session:
            made = (await session.execute(text(
                "SELECT count(*) FROM workspace.invitation WHERE invited_by = :admin AND status = 'PENDING'"),
                {"admin": admin.id})).scalar_one()
        return answer, made

    async def test_a_member_removed_during_the_wait_is_refused(self, committed_db, people, clock, policy):
        outcome, made = await self._removed_while_inviting(committed_db, people, clock, policy)
        assert (outcome, made) == ("WORKSPACE_NOT_FOUND", 0)
        await rules_hold(committed_db, "WS-")

    async def test_without_the_membership_lock_the_removed_member_still_invites(self, committed_db, people, clock,
                                                                                 policy, monkeypatch):
        """The control: the workspace locked alone, the membership row is the one the statement's snapshot
        had before the wait, and the removed admin's invitation goes through."""
        monkeypatch.setattr(commands, "LOCK_WORKSPACE_AND_CALLER", commands.WORKSPACE_AND_CALLER + " FOR UPDATE OF w")
        outcome, made = await self._removed_while_inviting(committed_db, people, clock, policy)
        assert (outcome, made) == ("ok", 1)


class TestSweepAgainstRequests:
    @pytest.mark.invariant("WS-INV-04")
    async def test_sweep_skips_a_workspace_a_request_holds_and_sweeps_it_later(self, committed_db, people, clock,
                                                                                policy):
        owner = await people.make()
        now = clock.now()
        async with committed_db.unit_of_work() as session:
            busy = await workspaces.create_workspace(session, name="Busy", principal_id=owner.id, now=now)
            idle = await workspaces.create_workspace(session, name="Idle", principal_id=owner.id, now=now)
            for workspace in (busy, idle):
                await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=owner.id,
                                                email="p@example.com", role=InvitationRole.MEMBER, policy=policy,
                                                now=now)
        later = now + timedelta(days=8)
        async with committed_db.unit_of_work() as holder:
            await commands.lock_workspace(holder, busy.id)  # a request in the middle of a command
            async with committed_db.unit_of_work() as session:
                expired = await asyncio.wait_for(invitations.expire_due_invitations(session, now=later), timeout=5)
            assert [i.workspace_id for i in expired] == [idle.id]
        async with committed_db.unit_of_work() as session:
            expired = await invitations.expire_due_invitations(session, now=later)
        assert [i.workspace_id for i in expired] == [busy.id]
        await rules_hold(committed_db, "WS-")

    @pytest.mark.invariant("WS-INV-04", "WS-INV-05", "WS-INV-06")
    @pytest.mark.parametrize("first", ["accept", "sweep", "neither"])
    async def test_accept_and_sweep_at_the_moment_of_expiry(self, committed_db, people, clock, policy, monkeypatch,
                                                            first):
        """An accept in the invitation's last millisecond and the sweep at its expiry, on two connections at
        once: exactly one wins — ACCEPTED with its membership and nothing swept, or EXPIRED and the accept
        refused — never both. `first` pins the interleaving: the side that takes the workspace lock first
        keeps it until the other has run into it (the accept holds it while the sweep skips the workspace;
        the sweep holds it while the accept waits for it); `neither` lets them race freely."""
        owner, invitee = await people.make(), await people.make()
        now = clock.now()
        workspace, invitation, token = await _invited(committed_db, owner, invitee, policy, now)
        expiry = invitation.expires_at
        holds_lock, other_ran = asyncio.Event(), asyncio.Event()

        if first == "accept":
            get_user = invitations.iam_service.get_user

            async def get_user_holding_the_lock(*args, **kwargs):  # accept calls it under the workspace lock
                holds_lock.set()
                await asyncio.wait_for(other_ran.wait(), timeout=5)  # the sweep ran meanwhile, not after
                return await get_user(*args, **kwargs)

            monkeypatch.setattr(invitations.iam_service, "get_user", get_user_holding_the_lock)
        elif first == "sweep":
            lock_workspaces = commands.lock_workspaces_skip_locked

            async def lock_then_wait_for_the_accept(*args, **kwargs):
                locked = await lock_workspaces(*args, **kwargs)
                holds_lock.set()
                await asyncio.wait_for(_a_backend_waits_for_a_lock(committed_db), timeout=5)
                return locked

            monkeypatch.setattr(commands, "lock_workspaces_skip_locked", lock_then_wait_for_the_accept)
        else:
            holds_lock.set()

        async def accept() -> None:
            if first == "sweep":
                await holds_lock.wait()
            async with committed_db.unit_of_work() as session:
                await invitations.accept_invitation(session, token=token, principal_id=invitee.id,
                                                now=expiry - timedelta(milliseconds=1))

        swept: list = []

        async def sweep() -> None:
            if first == "accept":
                await holds_lock.wait()
            try:
                async with committed_db.unit_of_work() as session:
                    swept.extend(await invitations.expire_due_invitations(session, now=expiry))
            finally:
                other_ran.set()

        accept_outcome, sweep_outcome = await asyncio.gather(outcome(accept()), outcome(sweep()))
        assert sweep_outcome == "ok"
        async with committed_db.read_only() as session:
            status = (await session.execute(text("SELECT status FROM workspace.invitation WHERE id = :id"),
                                            {"id": invitation.id})).scalar_one()
            memberships = (await session.execute(text(
                "SELECT count(*) FROM workspace.membership WHERE workspace_id = :w AND user_id = :u"),
                {"w": workspace.id, "u": invitee.id})).scalar_one()
        seen = (accept_outcome, [i.id for i in swept], status, memberships)
        accepted = ("ok", [], "ACCEPTED", 1)
        expired = (errors.WorkspaceErrorCode.INVITATION_EXPIRED, [invitation.id], "EXPIRED", 0)
        assert seen == {"accept": accepted, "sweep": expired}.get(first, seen)
        assert seen in (accepted, expired)
        await rules_hold(committed_db, "WS-")


async def _a_backend_waits_for_a_lock(db: Database) -> None:
    """Return once another connection of this database is blocked on a lock (the accept, on the workspace
    row the sweep holds)."""
    while True:
        async with db.read_only() as session:
            waiting = (await session.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"))).scalar_one()
        if waiting:
            return
        await asyncio.sleep(0.02)
