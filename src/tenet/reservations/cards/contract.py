"""The field contracts the code provider ships: `20260711-p0` (current) and `code-v1` (the first version,
kept so cards created under it stay readable; spec §9).

The P0 field set is ours (the business's Excel matrices were not available, spec §14): each card type gets
the fields an agent needs to confirm it, named as the AI extractor names them in `extracted_fields` and
`case_keys`. A database-backed provider can replace these definitions without touching the task flow.

Every confirmable card carries `opera_simulation_outcome` while the OPERA adapter is the simulator: the
agent (or a test) chooses how the simulated OPERA answers, so failures and retries can be shown and
tested deterministically (decisions.md, "Reservations").
"""

from __future__ import annotations

from decimal import Decimal

from tenet.reservations.cards.definitions import CardDefinition, CardRule, FieldDefinition, FieldType, RuleCode

CURRENT_VERSION = "20260711-p0"
LEGACY_VERSION = "code-v1"

T = FieldType
SIMULATION_OUTCOMES = ("SUCCEED", "FAIL_PRECHECK_ONCE", "FAIL_PRECHECK_ALWAYS", "FAIL_WRITE_ONCE",
                       "FAIL_WRITE_ALWAYS", "TIMEOUT_AFTER_WRITE_ONCE")
DEPARTMENTS = ("FRONT_DESK", "RESERVATIONS", "HOUSEKEEPING", "CONCIERGE", "ACCOUNTING", "SALES")


def _f(key: str, label: str, kind: FieldType, *, source: str | None = "extracted_fields", **options: object
       ) -> FieldDefinition:
    return FieldDefinition(key=key, label=label, type=kind,
                           source_path=None if source is None else f"{source}.{key}", **options)  # type: ignore[arg-type]


def _key(key: str, label: str, **options: object) -> FieldDefinition:
    return _f(key, label, T.BUSINESS_KEY, source="case_keys", max_length=128, **options)


def _simulation() -> FieldDefinition:
    return FieldDefinition(
        key="opera_simulation_outcome", label="Simulated OPERA outcome", type=T.ENUM,
        enum_values=SIMULATION_OUTCOMES, default="SUCCEED",
        description="How the OPERA simulator answers this task's operations (SUCCEED unless testing a failure)")


GUEST_NAME = _f("guest_name", "Guest name", T.STRING, max_length=200)
ARRIVAL = _f("arrival_date", "Arrival date", T.DATE)
DEPARTURE = _f("departure_date", "Departure date", T.DATE)
ROOM_TYPE = _f("room_type", "Room type", T.STRING, max_length=32)
ROOMS = _f("number_of_rooms", "Number of rooms", T.INTEGER, min=1, max=99)
ADULTS = _f("adults", "Adults", T.INTEGER, min=1, max=20)
CHILDREN = _f("children", "Children", T.INTEGER, min=0, max=20)
RATE_CODE = _f("rate_code", "Rate code", T.STRING, max_length=32)
TRAVEL_AGENT = _f("travel_agent_name", "Travel agent", T.STRING, max_length=200)
SPECIAL_REQUESTS = _f("special_requests", "Special requests", T.TEXT, max_length=2000)
CONFIRMATION = _key("confirmation_number", "Confirmation number")
GROUP = _key("group_code", "Group code")
DATES = CardRule(RuleCode.DATE_ORDER, ("arrival_date", "departure_date"), "The departure is after the arrival")
KEY_REQUIRED = CardRule(RuleCode.KEY_REQUIRED, ("confirmation_number", "group_code"),
                        "A confirmation number or a group code names the booking")


def _required(definition: FieldDefinition) -> FieldDefinition:
    return FieldDefinition(**{**definition.__dict__, "required": True})


def _read_only(definition: FieldDefinition) -> FieldDefinition:
    return FieldDefinition(**{**definition.__dict__, "editable": False})


_CHANGES = (ARRIVAL, DEPARTURE, ROOM_TYPE, ROOMS, ADULTS, CHILDREN, RATE_CODE, SPECIAL_REQUESTS)

_P0: dict[str, tuple[tuple[FieldDefinition, ...], tuple[CardRule, ...], bool]] = {
    "NEW_BOOKING": ((
        _required(GUEST_NAME), _required(ARRIVAL), _required(DEPARTURE), _required(ROOM_TYPE),
        FieldDefinition(**{**_required(ROOMS).__dict__, "default": 1}), _required(ADULTS), CHILDREN, RATE_CODE,
        CONFIRMATION, GROUP, TRAVEL_AGENT, SPECIAL_REQUESTS, _simulation(),
    ), (DATES,), True),
    "UPDATE_BOOKING": ((CONFIRMATION, GROUP, *_CHANGES, _simulation()), (
        KEY_REQUIRED,
        CardRule(RuleCode.CHANGE_REQUIRED, tuple(f.key for f in _CHANGES), "At least one field to change"),
        DATES,
    ), True),
    "CANCEL_BOOKING": ((
        CONFIRMATION, GROUP, _f("cancellation_reason", "Cancellation reason", T.TEXT, max_length=500),
        _f("cancel_all_rooms", "Cancel all rooms", T.BOOLEAN, default=True), _simulation(),
    ), (KEY_REQUIRED,), True),
    "VOUCHER_RECEIVED": ((
        CONFIRMATION, GROUP, _required(_f("voucher_number", "Voucher number", T.STRING, max_length=64)),
        _f("voucher_amount", "Voucher amount", T.DECIMAL, min=Decimal(0)),
        _f("currency", "Currency", T.STRING, pattern=r"^[A-Z]{3}$", max_length=3), TRAVEL_AGENT, _simulation(),
    ), (KEY_REQUIRED, CardRule(RuleCode.REQUIRED_WITH, ("voucher_amount", "currency"),
                               "An amount needs its currency")), True),
    "ROOMING_LIST": ((
        _required(GROUP),
        FieldDefinition(key="rooming_list", label="Rooming list", type=T.LIST, required=True, min_items=1,
                        max_items=500, source_path="extracted_fields.rooming_list", item_fields=(
                            FieldDefinition(key="guest_name", label="Guest name", type=T.STRING, required=True,
                                            max_length=200),
                            FieldDefinition(key="room_type", label="Room type", type=T.STRING, max_length=32),
                            FieldDefinition(key="arrival_date", label="Arrival date", type=T.DATE),
                            FieldDefinition(key="departure_date", label="Departure date", type=T.DATE),
                            FieldDefinition(key="sharing_with", label="Sharing with", type=T.STRING, max_length=200),
                        )),
        _simulation(),
    ), (DATES,), True),
    "AMEND_GROUP_CODE": ((
        _required(CONFIRMATION), GROUP, _required(_key("new_group_code", "New group code")), _simulation(),
    ), (CardRule(RuleCode.SAME_VALUE, ("group_code", "new_group_code"), "The new group code differs"),), True),
    "TRACE_RESERVATION_NOTES": ((
        CONFIRMATION, GROUP, _required(_f("trace_date", "Trace date", T.DATE)),
        _required(_f("department", "Department", T.ENUM, enum_values=DEPARTMENTS)),
        _required(_f("trace_text", "Trace text", T.TEXT, max_length=2000)), _simulation(),
    ), (KEY_REQUIRED,), True),
    "TA_RECORDER": ((
        _required(CONFIRMATION), _required(TRAVEL_AGENT),
        _f("iata_number", "IATA number", T.STRING, pattern=r"^[0-9]{7,8}$", max_length=8),
        _f("commission_percent", "Commission %", T.DECIMAL, min=Decimal(0), max=Decimal(100)), _simulation(),
    ), (), True),
    "MESSAGE_NOTIFICATION": ((
        _read_only(_f("summary", "Summary", T.TEXT, source="informational_message", max_length=4000)),
        _read_only(_f("category", "Category", T.STRING, source="informational_message", max_length=128)),
        _read_only(CONFIRMATION), _read_only(GROUP),
    ), (), False),
    "FALLBACK_REVIEW": ((
        _required(_f("resolution_note", "Resolution note", T.TEXT, source=None, max_length=2000)),
        CONFIRMATION, GROUP,
        _f("handled_outside_system", "Handled outside the system", T.BOOLEAN, source=None, default=False),
        _simulation(),
    ), (), True),
}

# The first contract: the same cards without the simulator's field and the optional extras P0 added.
_LEGACY_DROPPED = {"opera_simulation_outcome", "travel_agent_name", "rate_code", "special_requests"}


def _definitions() -> dict[tuple[str, str], CardDefinition]:
    found: dict[tuple[str, str], CardDefinition] = {}
    for card_type, (fields, rules, confirmable) in _P0.items():
        found[(card_type, CURRENT_VERSION)] = CardDefinition(card_type, CURRENT_VERSION, confirmable, fields, rules)
        legacy = tuple(f for f in fields if f.key not in _LEGACY_DROPPED or f.required)
        kept = {f.key for f in legacy}
        legacy_rules = tuple(r for r in rules if set(r.fields) & kept)
        found[(card_type, LEGACY_VERSION)] = CardDefinition(card_type, LEGACY_VERSION, confirmable, legacy,
                                                            legacy_rules)
    return found


DEFINITIONS = _definitions()
