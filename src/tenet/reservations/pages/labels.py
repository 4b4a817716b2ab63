"""The card contracts' field labels and descriptions as msgids (issue 19): the contract owns them in English; the
desk shows them in the viewer's language. tests/web/test_desk_cards.py fails when a contract names a label missing
here, so a new field cannot reach the page untranslated."""

from __future__ import annotations

from tenet.web.i18n import N_

LABELS = frozenset({
    N_("Adults"),
    N_("Arrival date"),
    N_("Cancel all rooms"),
    N_("Cancellation reason"),
    N_("Category"),
    N_("Children"),
    N_("Commission %"),
    N_("Confirmation number"),
    N_("Currency"),
    N_("Department"),
    N_("Departure date"),
    N_("Group code"),
    N_("Guest name"),
    N_("Handled outside the system"),
    N_("How the OPERA simulator answers this task's operations (SUCCEED unless testing a failure)"),
    N_("IATA number"),
    N_("New group code"),
    N_("Number of rooms"),
    N_("Rate code"),
    N_("Resolution note"),
    N_("Room type"),
    N_("Rooming list"),
    N_("Sharing with"),
    N_("Simulated OPERA outcome"),
    N_("Special requests"),
    N_("Summary"),
    N_("Trace date"),
    N_("Trace text"),
    N_("Travel agent"),
    N_("Voucher amount"),
    N_("Voucher number"),
})
