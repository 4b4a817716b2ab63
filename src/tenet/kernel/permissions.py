"""Permission points, as the domains declare them (a catalog the composition root fills).

A permission point is a string such as `meeting:agenda:update` that a route checks. The domain that
checks it declares it (in its `Domain`), with the system roles that hold it by default; identity owns the
roles and reads this catalog to answer "what may this role do". The migrations seed the same rows as
literal data, and a test fails when the catalog and the database disagree (the prompt to write a
migration).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class PermissionPoint:
    name: str
    description: str
    # System role names (identity's) that hold this point by default.
    granted_to: frozenset[str]


_CATALOG: dict[str, PermissionPoint] = {}


def register(points: Iterable[PermissionPoint]) -> None:
    for point in points:
        existing = _CATALOG.get(point.name)
        if existing is not None and existing != point:
            raise ValueError(f"permission point {point.name} registered twice with different content")
        _CATALOG[point.name] = point


def catalog() -> dict[str, PermissionPoint]:
    """Every declared point by name (empty until `tenet.domains.load()` ran)."""
    return dict(_CATALOG)


def points_of_role(role: str) -> frozenset[str]:
    return frozenset(name for name, point in _CATALOG.items() if role in point.granted_to)
