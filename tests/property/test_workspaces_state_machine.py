"""Random sequences of workspace commands (INVARIANTS.md §3): after every step every WS detector must find
nothing, and every refusal must be a DomainError with a stable code — never an IntegrityError, an
assertion inside the service, or any other exception.

Stateful hypothesis rules are synchronous, so the machine owns an event loop and an engine created on it.
Each example runs inside one outer transaction on one connection (every unit of work is a SAVEPOINT, as
in the `db` fixture), rolled back at teardown.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from sqlalchemy import text

from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.workspaces import invitations, members, workspaces
from tenet.workspaces.permissions import InvitationRole, WorkspaceRole
from tests.support.statemachine import DatabaseMachine, run_machine

# Long by design (tens of command sequences against a real database, each checked by every detector): about
# 150 s on a slow 2-core machine, and a failure's shrinking takes longer; the suite's 300 s would cut a run short.
pytestmark = pytest.mark.timeout(900)

PEOPLE = 4
OUTSIDER = "Nobody.Registered@Example.com"
POLICY = invitations.InvitationPolicy(ttl=timedelta(days=7), daily_limit=6, public_base_url="http://tenet.test")
INDEX = st.integers(min_value=0, max_value=63)

# Outcomes of the steps ("ok" or the refusal's code), summed over all examples: shows what the run explored.
OUTCOMES: Counter[str] = Counter()


class WorkspaceCommands(DatabaseMachine):
    outcomes = OUTCOMES

    def __init__(self) -> None:
        super().__init__()
        self.people = self.run(self._make_people())
        self.workspaces: list[Any] = []
        self.invitations: list[Any] = []
        self.tokens: list[str] = []  # every token ever mailed, stale ones included
        self.invitee_of: dict[str, int | None] = {}  # token -> index of the invited person (None: outsider)
        self.workspace_of: dict[Any, Any] = {}  # invitation id -> workspace id
        self.invited: dict[Any, int | None] = {}  # invitation id -> index of the invited person

    async def _make_people(self) -> list[Any]:
        passwords = Passwords(time_cost=1, memory_kib=1024)
        people = []
        async with self.db.unit_of_work() as session:
            for index in range(PEOPLE):
                people.append(await iam_service.create_user(
                    session, passwords=passwords, email=f"Person{index}@Example.com", password="a-long-password-1",
                    display_name=f"Person {index}", now=self.clock.now(), actor=Actor.system(), roles=[Role.EMPLOYEE]))
        return people

    def person(self, index: int) -> Any:
        return self.people[index % PEOPLE]

    def actor(self, workspace_id: Any, who: int, insider: bool) -> Any:
        """Mostly an active member of the workspace (so commands get past the 404), sometimes anyone."""
        if insider:
            members = self.run(self._member_ids(workspace_id))
            if members:
                by_id = {p.id: p for p in self.people}
                return by_id[members[who % len(members)]]
        return self.person(who)

    async def _member_ids(self, workspace_id: Any) -> list[Any]:
        async with self.db.read_only() as session:
            return list((await session.execute(text(
                "SELECT user_id FROM workspace.membership WHERE workspace_id = :w AND status = 'ACTIVE' "
                "ORDER BY joined_at, id"), {"w": workspace_id})).scalars())

    # --- workspaces ---------------------------------------------------------------------------------

    @rule(who=INDEX)
    def create_workspace(self, who: int) -> None:
        workspace = self.command(lambda s: workspaces.create_workspace(
            s, name=f"W{len(self.workspaces)}", principal_id=self.person(who).id, now=self.clock.now()))
        self.workspaces.append(workspace.id)

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, which=INDEX, insider=st.booleans())
    def delete_workspace(self, who: int, which: int, insider: bool) -> None:
        workspace_id = self.pick(self.workspaces, which)
        actor = self.actor(workspace_id, who, insider)
        self.command(lambda s: workspaces.request_workspace_deletion(
            s, workspace_id=workspace_id, principal_id=actor.id, now=self.clock.now()))

    @rule()
    def finish_deletions(self) -> None:
        self.command(lambda s: workspaces.finish_workspace_deletions(s, now=self.clock.now()))

    # --- invitations --------------------------------------------------------------------------------

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, which=INDEX, insider=st.booleans(), invitee=st.integers(0, PEOPLE), shout=st.booleans(),
          pad=st.booleans(), role=st.sampled_from(InvitationRole))
    def invite(self, who: int, which: int, insider: bool, invitee: int, shout: bool, pad: bool,
               role: InvitationRole) -> None:
        workspace_id = self.pick(self.workspaces, which)
        email = OUTSIDER if invitee == PEOPLE else self.people[invitee].email
        email = (email.upper() if shout else email.lower()) + (" " if pad else "")
        actor = self.actor(workspace_id, who, insider)
        made = self.command(lambda s: invitations.create_invitation(
            s, workspace_id=workspace_id, principal_id=actor.id, email=email, role=role, policy=POLICY,
            now=self.clock.now()))
        if made is not None:
            invitation, token = made
            self.invitations.append(invitation.id)
            self.workspace_of[invitation.id] = workspace_id
            self.invited[invitation.id] = None if invitee == PEOPLE else invitee
            self.tokens.append(token)
            self.invitee_of[token] = None if invitee == PEOPLE else invitee

    @precondition(lambda self: any(i is not None for i in self.invitee_of.values()))
    @rule(which=INDEX)
    def accept_as_the_invitee(self, which: int) -> None:
        token = self.pick([t for t, i in self.invitee_of.items() if i is not None], which)
        person = self.people[self.invitee_of[token]]
        self.command(lambda s: invitations.accept_invitation(s, token=token, principal_id=person.id,
                                                             now=self.clock.now()))

    @precondition(lambda self: self.tokens)
    @rule(who=INDEX, which=INDEX)
    def accept_as_anyone(self, who: int, which: int) -> None:
        token, person = self.pick(self.tokens, which), self.person(who)
        self.command(lambda s: invitations.accept_invitation(s, token=token, principal_id=person.id,
                                                             now=self.clock.now()))

    @precondition(lambda self: self.invitations)
    @rule(who=INDEX, which=INDEX, insider=st.booleans())
    def revoke(self, who: int, which: int, insider: bool) -> None:
        invitation_id = self.pick(self.invitations, which)
        actor = self.actor(self.workspace_of[invitation_id], who, insider)
        self.command(lambda s: invitations.revoke_invitation(
            s, invitation_id=invitation_id, principal_id=actor.id, now=self.clock.now()))

    @precondition(lambda self: self.invitations)
    @rule(who=INDEX, which=INDEX, insider=st.booleans())
    def resend(self, who: int, which: int, insider: bool) -> None:
        invitation_id = self.pick(self.invitations, which)
        actor = self.actor(self.workspace_of[invitation_id], who, insider)
        made = self.command(lambda s: invitations.resend_invitation(
            s, invitation_id=invitation_id, principal_id=actor.id, policy=POLICY, now=self.clock.now()))
        if made is not None:
            self.tokens.append(made[1])
            self.invitee_of[made[1]] = self.invited[invitation_id]

    @rule()
    def sweep_expired(self) -> None:
        self.command(lambda s: invitations.expire_due_invitations(s, now=self.clock.now()))

    @rule(hours=st.sampled_from([1, 12, 25, 24 * 3, 24 * 7]))
    def time_passes(self, hours: int) -> None:
        self.clock.advance(timedelta(hours=hours))

    # --- members ------------------------------------------------------------------------------------

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, which=INDEX, insider=st.booleans())
    def leave(self, who: int, which: int, insider: bool) -> None:
        workspace_id = self.pick(self.workspaces, which)
        actor = self.actor(workspace_id, who, insider)
        self.command(lambda s: members.leave_workspace(
            s, workspace_id=workspace_id, principal_id=actor.id, now=self.clock.now()))

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, other=INDEX, which=INDEX, insider=st.booleans())
    def remove(self, who: int, other: int, which: int, insider: bool) -> None:
        workspace_id = self.pick(self.workspaces, which)
        actor, target = self.actor(workspace_id, who, insider), self.actor(workspace_id, other, insider)
        self.command(lambda s: members.remove_member(
            s, workspace_id=workspace_id, principal_id=actor.id, user_id=target.id, now=self.clock.now()))

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, other=INDEX, which=INDEX, insider=st.booleans(), role=st.sampled_from(WorkspaceRole))
    def change_role(self, who: int, other: int, which: int, insider: bool, role: WorkspaceRole) -> None:
        workspace_id = self.pick(self.workspaces, which)
        actor, target = self.actor(workspace_id, who, insider), self.actor(workspace_id, other, insider)
        self.command(lambda s: members.change_member_role(
            s, workspace_id=workspace_id, principal_id=actor.id, user_id=target.id, role=role, now=self.clock.now()))

    @precondition(lambda self: self.workspaces)
    @rule(who=INDEX, other=INDEX, which=INDEX, insider=st.booleans())
    def transfer(self, who: int, other: int, which: int, insider: bool) -> None:
        workspace_id = self.pick(self.workspaces, which)
        actor, target = self.actor(workspace_id, who, insider), self.actor(workspace_id, other, insider)
        self.command(lambda s: members.transfer_ownership(
            s, workspace_id=workspace_id, principal_id=actor.id, user_id=target.id, now=self.clock.now()))

    # --- after every step -----------------------------------------------------------------------------

    @invariant()
    def every_workspace_rule_holds(self) -> None:
        violations = self.run(self.detected("WS-"))
        assert not violations, [(v.invariant.id, v.sample) for v in violations]


@pytest.mark.invariant("WS-INV-01", "WS-INV-02", "WS-INV-03", "WS-INV-04", "WS-INV-05", "WS-INV-06", "WS-INV-07",
                       "WS-INV-08", "WS-INV-09")
def test_random_command_sequences_keep_every_workspace_rule(database_url):
    # The run must have explored both sides: commands that succeeded and a variety of refusals.
    run_machine(WorkspaceCommands, database_url, OUTCOMES, max_examples=60, steps=50)
    assert OUTCOMES["ok"] > 0 and OUTCOMES["LAST_OWNER"] > 0, OUTCOMES
    assert len(OUTCOMES) >= 8, OUTCOMES
