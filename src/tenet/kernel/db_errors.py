"""Reading PostgreSQL's verdicts: which constraint a failed statement broke."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError


def violated_constraint(exc: IntegrityError) -> str | None:
    """The name of the constraint or unique index behind an IntegrityError, if PostgreSQL said."""
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None)


def is_violation_of(exc: IntegrityError, *names: str) -> bool:
    return violated_constraint(exc) in names
