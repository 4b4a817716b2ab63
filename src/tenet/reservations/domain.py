"""The reservation workflow's declaration to the composition root (tenet.domains)."""

from tenet.kernel.domain import Domain
from tenet.reservations.permissions import POINTS
from tenet.reservations.settings import ReservationSettings

DOMAIN = Domain(
    name="reservations",
    schema="reservation",
    settings=ReservationSettings,
    modules=("tenet.reservations.models", "tenet.reservations.invariants", "tenet.reservations.lifecycles"),
    api="tenet.reservations.api",
    jobs=("tenet.reservations.tasks",),
    events="tenet.reservations.events",
    permissions=POINTS,
    locks=(
        "reservation.workflow_reservation_order (the serialisation point of one order's queue; several in "
        "ascending id order; a back-fill never waits for a second order: NOWAIT, else ORDER_BUSY)",
    ),
)
