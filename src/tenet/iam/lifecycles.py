"""The declared lifecycle of an account (INVARIANTS.md §2)."""

from tenet.kernel.transitions import Transition, declare

USER = declare(
    "iam.user_account",
    states=("active", "disabled", "deleted"),
    initial="active",
    terminal={"deleted"},
    transitions=[
        Transition("disable", frozenset({"active"}), "disabled", "administrator",
                   "revokes every refresh token; access tokens are refused at once; never the last "
                   "active Administrator (IAM-INV-05)"),
        Transition("enable", frozenset({"disabled"}), "active", "administrator"),
        Transition("delete", frozenset({"active", "disabled"}), "deleted", "administrator",
                   "revokes every refresh token, frees the email, runs the domains' deletion hooks "
                   "(workspaces: WS-INV-10); never the last active Administrator (IAM-INV-05)"),
    ],
)
