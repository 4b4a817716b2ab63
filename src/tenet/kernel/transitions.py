"""Declared state machines, the one conditional-transition primitive, and ordered row locks (INVARIANTS.md §2).

A lifecycle is data: its states, the transitions between them, who may perform each and what happens
atomically with it. `transition` performs a transition as one conditional UPDATE
(`WHERE <rows> AND status IN (:sources) [AND version = :expected] [AND <preconditions>]`) — never a
read-decide-write. For one row (`id=`), zero rows updated means somebody else moved it first or a
condition failed: the row is re-read and the caller's `refuse` turns the `Refusal` (which says whether the
row is missing, in another state, at another version, or failed a precondition, and carries the current
row) into the domain's stable error. For a set of rows (`where=` without `id=`), rows another transaction
moved first are simply not matched (PostgreSQL re-checks the WHERE under the row lock in READ COMMITTED).

`lock_rows` takes row locks on several parents in one statement, in ascending id order, so that two
commands touching the same parents can never deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Generic, Literal, TypeVar, overload

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import errors
from tenet.kernel.errors import DomainError
from tenet.kernel.statements import Row, Statements, Unit, statements

M = TypeVar("M")

_PLAIN_DIALECT = PGDialect_psycopg()  # type: ignore[no-untyped-call]  # compiles a transition for a plain unit: psycopg's %(name)s placeholders

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


RefusalReason = Literal["missing", "state", "version", "precondition"]


@dataclass(frozen=True)
class Refusal(Generic[M]):
    """Why a one-row transition matched no row, with the row as it is now (None when missing)."""

    reason: RefusalReason
    current: M | None
    machine: StateMachine
    transition: Transition
    status: str | None = None
    version: int | None = None


def default_refusal(refusal: Refusal[Any]) -> DomainError:
    """Kernel errors for domains that need nothing more specific."""
    if refusal.reason == "missing":
        return errors.NotFound()
    if refusal.reason == "version":
        return errors.VersionConflict(current_version=refusal.version)
    return errors.StateConflict(current_status=refusal.status, transition=refusal.transition.name)


def _version_attr(model: type[Any], version_attr: str | Literal["auto"] | None) -> str | None:
    if version_attr == "auto":
        return "version" if hasattr(model, "version") else None
    return version_attr


@overload
async def transition(session: AsyncSession, machine: StateMachine, name: str, *, model: type[M], id: Any,
                     where: tuple[Any, ...] = ..., values: Mapping[str, Any] | None = ...,
                     expected_version: int | None = ..., refuse: Callable[[Refusal[M]], DomainError] = ...,
                     status_attr: str = ..., version_attr: str | Literal["auto"] | None = ...) -> M: ...


@overload
async def transition(session: AsyncSession, machine: StateMachine, name: str, *, model: type[M], id: None = ...,
                     where: tuple[Any, ...], values: Mapping[str, Any] | None = ...,
                     expected_version: None = ..., refuse: None = ...,
                     status_attr: str = ..., version_attr: str | Literal["auto"] | None = ...) -> list[M]: ...


@overload
async def transition(session: Statements, machine: StateMachine, name: str, *, model: type[Any], id: None = ...,
                     where: tuple[Any, ...], values: Mapping[str, Any] | None = ...,
                     expected_version: None = ..., refuse: None = ...,
                     status_attr: str = ..., version_attr: str | Literal["auto"] | None = ...) -> list[Row]: ...


async def transition(
    session: Unit,
    machine: StateMachine,
    name: str,
    *,
    model: type[M],
    id: Any = None,
    where: tuple[Any, ...] = (),
    values: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    refuse: Callable[[Refusal[M]], DomainError] | None = None,
    status_attr: str = "status",
    version_attr: str | Literal["auto"] | None = "auto",
) -> M | list[M] | list[Row]:
    """Move rows of `model` along `name`: the row `id` (answering it, or raising `refuse(Refusal)`), or
    every row matching `where` that is in a source state (answering the moved rows).

    `where` adds preconditions that must also hold ("the invitation has not expired"). When the model has
    a `version` column it is incremented; `expected_version` additionally requires the row to be at that
    version (the client's If-Match / expected_version).

    On a plain unit of work (`Database.transaction()`, a `Statements` handle) the same UPDATE runs as a plain
    statement and the moved rows come back as rows (dicts by column name); only the `where=` form is there, as the
    `id=` form answers the entity or its refusal, which the session holds. Its values go to the driver as they are,
    so it is for columns of plain types (text, numbers, times, ids), as a lifecycle's are.
    """
    step = machine.transitions[name]
    status_col = getattr(model, status_attr)
    id_col = model.__mapper__.primary_key[0]  # type: ignore[attr-defined]
    changes: dict[str, Any] = {status_attr: step.target, **(values or {})}
    conditions = [status_col.in_(sorted(step.sources)), *where]
    if id is not None:
        conditions.append(id_col == id)
    version_name = _version_attr(model, version_attr)
    if version_name is not None:
        version_col = getattr(model, version_name)
        changes[version_name] = version_col + 1
        if expected_version is not None:
            conditions.append(version_col == expected_version)
    elif expected_version is not None:
        raise TypeError(f"{model.__name__} has no version column to compare expected_version with")
    statement = (
        update(model).where(*conditions).values(changes).returning(model)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    if isinstance(session, Statements):
        if id is not None:
            raise TypeError("transition(id=...) answers the entity or its refusal: run it in a session's unit of work")
        compiled = statement.compile(dialect=_PLAIN_DIALECT, compile_kwargs={"render_postcompile": True})
        return await session.all(str(compiled), compiled.params)
    moved = list((await session.scalars(statement)).all())
    if id is None:
        return moved
    if moved:
        return moved[0]
    current = (await session.scalars(
        select(model).where(id_col == id).execution_options(populate_existing=True)
    )).one_or_none()
    refusal = _refusal(machine, step, current, status_attr, version_name, expected_version)
    raise (refuse or default_refusal)(refusal)


def _refusal(machine: StateMachine, step: Transition, current: M | None, status_attr: str,
             version_name: str | None, expected_version: int | None) -> Refusal[M]:
    if current is None:
        return Refusal("missing", None, machine, step)
    status = getattr(current, status_attr)
    version = getattr(current, version_name) if version_name else None
    if status not in step.sources:
        reason: RefusalReason = "state"
    elif expected_version is not None and version != expected_version:
        reason = "version"
    else:
        reason = "precondition"
    return Refusal(reason, current, machine, step, status=status, version=version)


LockMode = Literal["update", "no key update", "share", "key share"]


async def lock_rows(session: AsyncSession, model: type[Any], ids: Iterable[Any], *, mode: LockMode = "update",
                    where: tuple[Any, ...] = (), skip_locked: bool = False) -> list[Any]:
    """Row-lock the rows `ids` of `model` (those that exist and match `where`) in ascending id order, in
    one statement; answer the ids locked, in that order.

    Every command that locks several parents (accounts, workspaces, orders ...) goes through here, so two
    commands always take shared parents in the same order and cannot deadlock. `skip_locked` is for sweeps
    that must never wait for a request.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return []
    id_col = model.__mapper__.primary_key[0]
    if not where:
        # Every command takes one: a plain statement on the unit of work's connection (kernel.statements).
        sql = _lock_sql(model.__table__.fullname, id_col.name, mode, skip_locked)
        rows = await (await statements(session)).all(sql, {"ids": wanted})
        return [row["id"] for row in rows]
    statement = (
        select(id_col).where(id_col.in_(wanted), *where).order_by(id_col)
        .with_for_update(read=mode in ("share", "key share"), key_share=mode in ("key share", "no key update"),
                         skip_locked=skip_locked)
    )
    return list((await session.scalars(statement)).all())


@cache
def _lock_sql(table: str, id_column: str, mode: LockMode, skip_locked: bool) -> str:
    return (f"SELECT {id_column} AS id FROM {table} WHERE {id_column} = ANY(%(ids)s) "  # noqa: S608 (identifiers)
            f"ORDER BY {id_column} FOR {mode.upper()}{' SKIP LOCKED' if skip_locked else ''}")
