"""Role matrices: what each role within one scope (a workspace, a group) may do, as data.

A domain declares its matrix once — per action and per role of the caller, the roles of the *target* the
caller may act on (the member removed, the role an invitation grants) — and checks, refuses and documents
from that one table: `allowed` answers, `require` raises the domain's error (built by the callable the
domain gives, so codes and details stay the domain's), `markdown` renders the table the OpenAPI description
and docs/decisions.md show (a test of each domain compares the documented copy). A role missing from an
action may not do it; an action whose rule does not depend on the target lists every role.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from tenet.kernel.errors import DomainError

A = TypeVar("A", bound=StrEnum)
R = TypeVar("R", bound=StrEnum)


@dataclass(frozen=True)
class Refusal(Generic[A]):
    """Why `require` refused: what the domain's error is built from."""

    action: A
    role: str
    target: str | None
    description: str
    # The role may do the action on some other target (its refusal is about this target's role).
    partly: bool

    @property
    def data(self) -> dict[str, Any]:
        """The problem's stable members: the action and the caller's role, and the target's role when one was
        named."""
        data: dict[str, Any] = {"action": self.action.value, "role": self.role}
        if self.target is not None:
            data["target_role"] = self.target
        return data


class RoleMatrix(Generic[A, R]):
    """One scope's table: action -> caller role -> the target roles the caller may act on."""

    def __init__(self, roles: type[R], rules: Mapping[A, Mapping[R, frozenset[R]]], *,
                 descriptions: Mapping[A, str], targeted: frozenset[A],
                 refuse: Callable[[Refusal[A]], DomainError]) -> None:
        undescribed = [action for action in rules if action not in descriptions]
        if undescribed:
            raise ValueError(f"actions without a description: {undescribed}")
        self.roles = roles
        self.rules = rules
        self.descriptions = descriptions
        self.targeted = targeted
        self.any: frozenset[R] = frozenset(roles)
        self._refuse = refuse

    def allowed(self, role: R | str, action: A, target: R | str | None = None) -> bool:
        targets = self.rules[action].get(self.roles(role))
        if targets is None:
            return False
        return target is None or self.roles(target) in targets

    def require(self, role: R | str, action: A, target: R | str | None = None) -> None:
        """Raise the domain's refusal unless `role` may do `action` (on a target of role `target`)."""
        if self.allowed(role, action, target):
            return
        raise self._refuse(Refusal(action=action, role=str(role), target=None if target is None else str(target),
                                   description=self.descriptions[action],
                                   partly=bool(self.rules[action].get(self.roles(role)))))

    def cell(self, action: A, role: R) -> str:
        """What the table says for one role and action: yes, no, or the target roles it is limited to."""
        targets = self.rules[action].get(role)
        if targets is None:
            return "no"
        if action not in self.targeted or targets == self.any:
            return "yes"
        return "only " + " or ".join(sorted(target.value for target in targets))

    def markdown(self) -> str:
        """The table, one row per action (in declaration order), one column per role."""
        lines = ["| action | " + " | ".join(role.value for role in self.roles) + " |",
                 "|---|" + "---|" * len(self.roles)]
        for action in self.rules:
            cells = " | ".join(self.cell(action, role) for role in self.roles)
            lines.append(f"| {self.descriptions[action]} | {cells} |")
        return "\n".join(lines)
