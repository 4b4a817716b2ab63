"""Deleting or disabling an account races the commands that make it hold something (issue 6.1, WS-INV-10).

Lock order: the account row, then workspaces. Deletion locks the account FOR UPDATE and publishes
AccountDeleted; accept, create_workspace and ownership changes share-lock the accounts first. Each race
widens the window of the command under test (a delay after its own checks, before its write) and starts
the deletion inside that window. With the share lock in place the deletion waits, then ends the new
membership (or the command is refused with ACCOUNT_NOT_ACTIVE); `test_without_the_share_lock_*` runs the
same timing with `require_active_accounts` made a no-op and shows WS-INV-10 breaking — the proof that the
lock, not luck, keeps the rule.
"""

from __future__ import annotations

import asyncio

import pytest

from tenet.iam import service as iam_service
from tenet.kernel.audit import Actor
from tenet.workspaces import invitations, members, workspaces
from tenet.workspaces.permissions import InvitationRole
from tests.support.invariants import assert_invariants_hold, rules_hold
from tests.support.outcomes import outcome

WINDOW = 0.3
TRIALS = 3


def _slow(monkeypatch, module, name: str) -> None:
    """Delay `module.name` (called after the command's checks, before its write) by WINDOW."""
    original = getattr(module, name)

    async def slowed(*args, **kwargs):
        await asyncio.sleep(WINDOW)
        return await original(*args, **kwargs)

    monkeypatch.setattr(module, name, slowed)


def _slow_after(monkeypatch, module, name: str) -> None:
    """Delay the command by WINDOW right after `module.name` returns (its checks done, its writes to come)."""
    original = getattr(module, name)

    async def slowed(*args, **kwargs):
        result = await original(*args, **kwargs)
        await asyncio.sleep(WINDOW)
        return result

    monkeypatch.setattr(module, name, slowed)


async def _delete(db, user_id, now) -> str:
    await asyncio.sleep(WINDOW / 3)  # inside the other command's window
    async with db.unit_of_work() as session:
        return await outcome(iam_service.delete_user(session, user_id=user_id, now=now, actor=Actor.system()))


async def _accept_race(committed_db, people, clock, policy) -> tuple[str, str]:
    owner, invitee = await people.make(), await people.make()
    now = clock.now()
    async with committed_db.unit_of_work() as session:
        workspace = await workspaces.create_workspace(session, name="Race", principal_id=owner.id, now=now)
        _, token = await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=owner.id,
                                                   email=invitee.email, role=InvitationRole.MEMBER, policy=policy,
                                                   now=now)

    async def accept() -> str:
        async with committed_db.unit_of_work() as session:
            return await outcome(invitations.accept_invitation(session, token=token, principal_id=invitee.id, now=now))

    accepted, deleted = await asyncio.gather(accept(), _delete(committed_db, invitee.id, now))
    return accepted, deleted


@pytest.mark.invariant("WS-INV-10")
async def test_accepting_while_the_account_is_deleted_leaves_no_member_behind(committed_db, people, clock, policy,
                                                                             monkeypatch):
    _slow(monkeypatch, invitations, "transition")  # accept's first write, after its checks
    for _ in range(TRIALS):
        accepted, deleted = await _accept_race(committed_db, people, clock, policy)
        assert deleted == "ok"
        assert accepted in ("ok", "ACCOUNT_NOT_ACTIVE")
        await rules_hold(committed_db, "WS-")


@pytest.mark.invariant("WS-INV-10")
async def test_without_the_share_lock_accept_and_delete_leave_a_deleted_member(committed_db, people, clock, policy,
                                                                              monkeypatch):
    async def no_lock(*args, **kwargs):
        return None

    monkeypatch.setattr(iam_service, "require_active_accounts", no_lock)
    # Before accept's first write: its foreign keys to the account (invitation.accepted_by, membership.user_id)
    # would otherwise make the deletion wait too, hiding what the share lock is for.
    _slow(monkeypatch, invitations, "transition")
    accepted, deleted = await _accept_race(committed_db, people, clock, policy)
    assert (accepted, deleted) == ("ok", "ok")
    async with committed_db.read_only() as session:
        with pytest.raises(AssertionError, match="WS-INV-10"):
            await assert_invariants_hold(session, prefix="WS-")


@pytest.mark.invariant("WS-INV-10", "WS-INV-01")
async def test_creating_a_workspace_while_the_creator_is_deleted_leaves_no_ownerless_workspace(
        committed_db, people, clock, monkeypatch):
    _slow_after(monkeypatch, invitations.iam_service, "require_active_accounts")  # after the account check
    for _ in range(TRIALS):
        creator = await people.make()
        now = clock.now()

        async def create(owner_id, now) -> str:
            async with committed_db.unit_of_work() as session:
                return await outcome(workspaces.create_workspace(session, name="Mine", principal_id=owner_id, now=now))

        created, deleted = await asyncio.gather(create(creator.id, now), _delete(committed_db, creator.id, now))
        # Either the deletion came first (creation refused) or it came second and found the creator the last
        # owner of a live workspace (deletion refused): never both "ok".
        assert (created, deleted) in {("ok", "LAST_OWNER"), ("ACCOUNT_NOT_ACTIVE", "ok")}
        await rules_hold(committed_db, "WS-")


@pytest.mark.invariant("WS-INV-01", "WS-INV-10")
async def test_ownership_goes_only_to_an_active_account(committed_db, people, clock, policy):
    owner, member = await people.make(), await people.make()
    now = clock.now()
    async with committed_db.unit_of_work() as session:
        workspace = await workspaces.create_workspace(session, name="Handover", principal_id=owner.id, now=now)
        _, token = await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=owner.id,
                                                   email=member.email, role=InvitationRole.MEMBER, policy=policy,
                                                   now=now)
        await invitations.accept_invitation(session, token=token, principal_id=member.id, now=now)
    async with committed_db.unit_of_work() as session:
        await iam_service.disable_user(session, user_id=member.id, now=now, actor=Actor.system())
    async with committed_db.unit_of_work() as session:
        refused = await outcome(members.transfer_ownership(session, workspace_id=workspace.id, principal_id=owner.id,
                                                            user_id=member.id, now=now))
    async with committed_db.unit_of_work() as session:
        promoted = await outcome(members.change_member_role(session, workspace_id=workspace.id, principal_id=owner.id,
                                                             user_id=member.id, role="owner", now=now))
    assert refused == promoted == "ACCOUNT_NOT_ACTIVE"
    await rules_hold(committed_db, "WS-")


async def test_transfer_racing_a_disable_of_the_target_never_hands_ownership_to_a_disabled_account(
        committed_db, people, clock, policy, monkeypatch):
    owner, member = await people.make(), await people.make()
    now = clock.now()
    async with committed_db.unit_of_work() as session:
        workspace = await workspaces.create_workspace(session, name="Handover", principal_id=owner.id, now=now)
        _, token = await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=owner.id,
                                                   email=member.email, role=InvitationRole.MEMBER, policy=policy,
                                                   now=now)
        await invitations.accept_invitation(session, token=token, principal_id=member.id, now=now)
    _slow(monkeypatch, members, "_set_role")

    async def transfer() -> str:
        async with committed_db.unit_of_work() as session:
            return await outcome(members.transfer_ownership(session, workspace_id=workspace.id, principal_id=owner.id,
                                                             user_id=member.id, now=now))

    async def disable() -> str:
        await asyncio.sleep(WINDOW / 3)
        async with committed_db.unit_of_work() as session:
            return await outcome(iam_service.disable_user(session, user_id=member.id, now=now,
                                                           actor=Actor.system()))

    transferred, disabled = await asyncio.gather(transfer(), disable())
    assert (transferred, disabled) == ("ok", "ok")  # the disable waited for the transfer to commit
    async with committed_db.read_only() as session:
        status = await iam_service.get_user(session, member.id)
    assert status.status == "disabled"
