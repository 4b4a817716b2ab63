"""The declared state machines of workspaces, invitations and memberships (INVARIANTS.md §2).

Every lifecycle change in the service goes through `tenet.kernel.transitions.transition` (one row, or a
set of rows for the sweeps and the closing of a deleted workspace): a conditional UPDATE whose WHERE names
the transition's source states, never read-decide-write.
The database refuses any change out of a terminal state on its own (triggers `*_terminal_is_final`).
"""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

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
