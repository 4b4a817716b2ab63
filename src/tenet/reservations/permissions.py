"""Who may do what in the reservation workflow: permission points (declared to the composition root),
API client scopes, and the visible-hotel rule every statement of the domain carries.

Visible hotels (RSV-INV-21): a user holding `reservation:hotel:manage` (Administrators) sees every hotel;
another user sees the hotels they are assigned to (`reservation.hotel_staff`); an API client sees its
`hotel_ids`. The rule is rendered as one SQL predicate inside each statement, so a read stays one round
trip and its visibility check and its rows come from one snapshot. Rows of invisible hotels answer 404.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum

from tenet.iam.principal import Principal
from tenet.kernel.errors import PermissionDenied
from tenet.kernel.permissions import PermissionPoint

ADMINISTRATOR, AGENT = "Administrator", "ReservationAgent"


class ReservationPermission(StrEnum):
    ORDER_READ = "reservation:order:read"
    ORDER_MANAGE = "reservation:order:manage"
    TASK_EDIT = "reservation:task:edit"
    TASK_CONFIRM = "reservation:task:confirm"
    TASK_EXECUTE = "reservation:task:execute"
    TASK_MOVE = "reservation:task:move"
    AUDIT_READ = "reservation:audit:read"
    # Register hotels, assign staff; holders see every hotel.
    HOTEL_MANAGE = "reservation:hotel:manage"


class ReservationScope(StrEnum):
    """API client scopes (identity issues them; these are the ones this domain checks)."""

    INGEST = "reservations:ingest"
    READ = "reservations:read"


_DESCRIPTIONS = {
    ReservationPermission.ORDER_READ: "Read orders, tasks, operations, batches and card definitions",
    ReservationPermission.ORDER_MANAGE: "Create, end and logic-delete orders; abandon tasks",
    ReservationPermission.TASK_EDIT: "Save task card drafts; convert manual reviews",
    ReservationPermission.TASK_CONFIRM: "Confirm task cards",
    ReservationPermission.TASK_EXECUTE: "Execute tasks and retry failed OPERA operations",
    ReservationPermission.TASK_MOVE: "Move tasks between orders",
    ReservationPermission.AUDIT_READ: "Read the reservation audit log",
    ReservationPermission.HOTEL_MANAGE: "Register hotels and assign staff; see every hotel",
}

# The same default grants identity seeded for the `reservation:*` points before they moved here; the new
# `reservation:hotel:manage` is seeded by this domain's migration.
POINTS: tuple[PermissionPoint, ...] = tuple(
    PermissionPoint(name=p.value, description=_DESCRIPTIONS[p],
                    granted_to=frozenset({ADMINISTRATOR} if p is ReservationPermission.HOTEL_MANAGE
                                         else {ADMINISTRATOR, AGENT}))
    for p in ReservationPermission
)


@dataclass(frozen=True)
class Viewer:
    """The caller as the visibility predicate needs it."""

    principal: Principal

    @property
    def all_hotels(self) -> bool:
        return self.principal.is_user and self.principal.can(ReservationPermission.HOTEL_MANAGE)

    @property
    def user_id(self) -> uuid.UUID | None:
        return self.principal.id if self.principal.is_user else None

    @property
    def client_hotels(self) -> list[str]:
        return sorted(self.principal.hotel_ids) if not self.principal.is_user else []

    def params(self) -> dict[str, object]:
        """Parameters of `visible_sql`."""
        return {"v_all": self.all_hotels, "v_user": self.user_id, "v_hotels": self.client_hotels}

    def can(self, permission: ReservationPermission) -> bool:
        return self.principal.is_user and self.principal.can(permission)

    def sees(self, hotel_id: str, staff_hotels: set[str]) -> bool:
        return self.all_hotels or hotel_id in self.principal.hotel_ids or hotel_id in staff_hotels


def visible_sql(column: str) -> str:
    """The visibility predicate on `column` (a hotel_id column), with psycopg placeholders (`%(v_all)s`: the
    parameters of `Viewer.params`)."""
    staff = f"SELECT 1 FROM reservation.hotel_staff vs WHERE vs.hotel_id = {column} AND vs.user_id = %(v_user)s"  # noqa: S608
    return f"(%(v_all)s OR {column} = ANY(CAST(%(v_hotels)s AS text[])) OR EXISTS ({staff}))"


def require_read(principal: Principal) -> Viewer:
    """Reads: a user with `reservation:order:read` or an API client with `reservations:read`."""
    if principal.is_user:
        if not principal.can(ReservationPermission.ORDER_READ):
            raise PermissionDenied(f"Requires the permission {ReservationPermission.ORDER_READ}",
                                   permission=str(ReservationPermission.ORDER_READ))
    elif not principal.has_scope(ReservationScope.READ):
        raise PermissionDenied(f"Requires the scope {ReservationScope.READ}", scope=str(ReservationScope.READ))
    return Viewer(principal)


def require_batch_read(principal: Principal) -> Viewer:
    """A batch is read like orders, and also by the ingest client that may post for its hotel."""
    if not principal.is_user and principal.has_scope(ReservationScope.INGEST):
        return Viewer(principal)
    return require_read(principal)
