"""Reading PostgreSQL's verdicts: which constraint a failed statement broke."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import DomainError


def violated_constraint(exc: IntegrityError) -> str | None:
    """The name of the constraint or unique index behind an IntegrityError, if PostgreSQL said."""
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None)


async def add_unique(session: AsyncSession, row: object, *,
                     on_violation: Mapping[str, Callable[[], DomainError]]) -> None:
    """Insert `row` in a savepoint; a violation of a named unique index becomes that domain error.

    The pattern every uniqueness rule uses: the service's pre-check gives the friendly error first, and
    the database index decides races, answering with the same stable code. The savepoint keeps the
    caller's transaction usable after the violation.
    """
    try:
        async with session.begin_nested():
            session.add(row)
            await session.flush()
    except IntegrityError as exc:
        make_error = on_violation.get(violated_constraint(exc) or "")
        if make_error is None:
            raise
        raise make_error() from None
