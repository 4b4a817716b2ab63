"""Declared state machines and the conditional-transition helper (INVARIANTS.md §2).

A lifecycle is data: its states, the transitions between them, who may perform each and what happens
atomically with it. `apply_transition` performs a transition as one conditional UPDATE
(`WHERE id = :id AND status IN (:sources) [AND version = :v]`); zero rows means somebody else moved
the row first, so it re-reads the current state and raises the domain's stable error. There is never a
read-decide-write without a condition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError

M = TypeVar("M")

STATE_MACHINES: dict[str, StateMachine] = {}


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[str]
    target: str
    performed_by: str
    effects: str = ""


@dataclass(frozen=True)
class StateMachine:
    name: str
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    transitions: Mapping[str, Transition] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for t in self.transitions.values():
            unknown = (set(t.sources) | {t.target}) - set(self.states)
            if unknown:
                raise ValueError(f"{self.name}.{t.name} names unknown states {sorted(unknown)}")
            if set(t.sources) & self.terminal:
                raise ValueError(f"{self.name}.{t.name} leaves a terminal state")
        STATE_MACHINES[self.name] = self

    def allows(self, source: str, target: str) -> bool:
        return any(source in t.sources and t.target == target for t in self.transitions.values())

    def mermaid(self) -> str:
        lines = ["stateDiagram-v2", f"    [*] --> {self.initial}"]
        for t in self.transitions.values():
            for source in sorted(t.sources):
                lines.append(f"    {source} --> {t.target}: {t.name} ({t.performed_by})")
        for state in sorted(self.terminal):
            lines.append(f"    {state} --> [*]")
        return "\n".join(lines)


def declare(name: str, *, states: tuple[str, ...], initial: str, terminal: set[str],
            transitions: list[Transition]) -> StateMachine:
    return StateMachine(name=name, states=states, initial=initial, terminal=frozenset(terminal),
                        transitions={t.name: t for t in transitions})


async def apply_transition(
    session: AsyncSession,
    machine: StateMachine,
    transition: str,
    *,
    model: type[M],
    id: Any,
    conflict: Callable[[str], DomainError],
    not_found: Callable[[], DomainError],
    values: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    where: tuple[Any, ...] = (),
    status_attr: str = "status",
    version_attr: str | None = None,
) -> M:
    """Move row `id` of `model` along `transition`; answer the updated entity.

    `conflict(current_status)` builds the error when the row exists but is not in a source state (or
    not at `expected_version`); `not_found()` when it does not exist. `where` adds conditions that must
    also hold (for instance "the workspace is not being deleted").
    """
    step = machine.transitions[transition]
    status_col = getattr(model, status_attr)
    id_col = model.__mapper__.primary_key[0]  # type: ignore[attr-defined]
    changes: dict[str, Any] = {status_attr: step.target, **(values or {})}
    conditions = [id_col == id, status_col.in_(sorted(step.sources)), *where]
    if version_attr is not None:
        version_col = getattr(model, version_attr)
        changes[version_attr] = version_col + 1
        if expected_version is not None:
            conditions.append(version_col == expected_version)
    statement = (
        update(model).where(*conditions).values(changes).returning(model)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    updated = (await session.scalars(statement)).one_or_none()
    if updated is not None:
        return updated
    current = (await session.execute(select(status_col).where(id_col == id))).scalar_one_or_none()
    if current is None:
        raise not_found()
    raise conflict(current)
