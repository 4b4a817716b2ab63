"""The declared state machines of workspaces, invitations and memberships (INVARIANTS.md §2).

Every lifecycle change in the service goes through `tenet.kernel.transitions.apply_transition` (one row)
or `transition_many` below (a set of rows, for the sweeps and the closing of a deleted workspace): both
are conditional UPDATEs whose WHERE names the transition's source states, never read-decide-write.
The database refuses any change out of a terminal state on its own (triggers `*_terminal_is_final`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.transitions import StateMachine, Transition, declare

M = TypeVar("M")

WORKSPACE = declare(
    "workspace.workspace",
    states=("ACTIVE", "DELETING", "DELETED"),
    initial="ACTIVE",
    terminal={"DELETED"},
    transitions=[
        Transition("request_deletion", frozenset({"ACTIVE"}), "DELETING", "owner",
                   "revokes every PENDING invitation (WS-INV-08); the workspace becomes read-only"),
        Transition("finish_deletion", frozenset({"DELETING"}), "DELETED", "system (job finish_workspace_deletions)",
                   "closes every ACTIVE membership (WS-INV-09); the workspace becomes invisible"),
    ],
)

INVITATION = declare(
    "workspace.invitation",
    states=("PENDING", "ACCEPTED", "REVOKED", "EXPIRED"),
    initial="PENDING",
    terminal={"ACCEPTED", "REVOKED", "EXPIRED"},
    transitions=[
        Transition("accept", frozenset({"PENDING"}), "ACCEPTED",
                   "the invited person (token digest and normalised email must match; not expired)",
                   "creates the ACTIVE membership in the same transaction (WS-INV-05)"),
        Transition("revoke", frozenset({"PENDING"}), "REVOKED", "owner, or admin for member invitations; "
                   "the workspace's deletion"),
        Transition("expire", frozenset({"PENDING"}), "EXPIRED", "system (job expire_invitations)"),
        Transition("resend", frozenset({"PENDING"}), "PENDING", "owner, or admin for member invitations",
                   "replaces the token digest (the old token dies), extends expiry, queues the mail"),
    ],
)

MEMBERSHIP = declare(
    "workspace.membership",
    states=("ACTIVE", "LEFT", "REMOVED", "CLOSED"),
    initial="ACTIVE",
    terminal={"LEFT", "REMOVED", "CLOSED"},
    transitions=[
        Transition("change_role", frozenset({"ACTIVE"}), "ACTIVE", "owner (also transfer of ownership)",
                   "refused when it would leave no active owner (WS-INV-01)"),
        Transition("leave", frozenset({"ACTIVE"}), "LEFT", "the member", "refused for the last active owner"),
        Transition("remove", frozenset({"ACTIVE"}), "REMOVED", "owner; admin for members; identity, when the "
                   "account is deleted", "refused for the last active owner"),
        Transition("close", frozenset({"ACTIVE"}), "CLOSED", "system (the workspace's deletion)"),
    ],
)


async def transition_many(
    session: AsyncSession,
    machine: StateMachine,
    transition: str,
    *,
    model: type[M],
    where: tuple[Any, ...],
    values: Mapping[str, Any] | None = None,
    status_attr: str = "status",
    version_attr: str | None = "version",
) -> list[M]:
    """Move every row matching `where` *and* in a source state of `transition`; answer the moved rows.

    The set form of `apply_transition`: one conditional UPDATE, so a row another transaction moved first
    is simply not matched (re-checked under its row lock by PostgreSQL's READ COMMITTED re-evaluation).
    """
    step = machine.transitions[transition]
    changes: dict[str, Any] = {status_attr: step.target, **(values or {})}
    if version_attr is not None:
        changes[version_attr] = getattr(model, version_attr) + 1
    statement = (
        update(model).where(getattr(model, status_attr).in_(sorted(step.sources)), *where).values(changes)
        .returning(model).execution_options(synchronize_session=False, populate_existing=True)
    )
    return list((await session.scalars(statement)).all())
