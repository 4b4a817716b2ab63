"""Reading PostgreSQL's verdicts: which constraint a failed statement broke."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError


def violated_constraint(exc: Exception) -> str | None:
    """The name of the constraint or unique index behind an integrity error, if PostgreSQL said: SQLAlchemy's
    IntegrityError (the ORM's flush) or psycopg's own (a statement of tenet.kernel.statements)."""
    diag = getattr(exc, "diag", None) or getattr(getattr(exc, "orig", None), "diag", None)
    return getattr(diag, "constraint_name", None)


async def add_unique(session: AsyncSession, row: object, *,
                     on_violation: Mapping[str, Callable[[], DomainError]], keep_transaction: bool = False) -> None:
    """Insert `row`; a violation of a named unique index becomes that domain error.

    The pattern every uniqueness rule uses: the service's pre-check gives the friendly error first, and
    the database index decides races, answering with the same stable code. The violation aborts the
    transaction, which is what a command that then raises wants; `keep_transaction=True` wraps the insert in
    a savepoint (two more round trips) for a caller that must go on after the violation.
    """
    try:
        if keep_transaction:
            async with session.begin_nested():
                session.add(row)
                await session.flush()
        else:
            session.add(row)
            await session.flush()
    except IntegrityError as exc:
        make_error = on_violation.get(violated_constraint(exc) or "")
        if make_error is None:
            raise
        raise make_error() from None
