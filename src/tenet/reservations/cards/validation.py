"""Card payloads against their definition (RSV-INV-16): one issue per bad field, never stopping at the first.

Drafts are checked leniently (known fields, types, lengths, ranges, formats, enums — anything may be
missing); confirmation strictly (also required fields, read-only fields equal to the AI's value, and the
card's cross-field rules), because the confirmed payload is what OPERA reads. Messages are fixed per code:
a value is never echoed. The prefill is the AI's value for each defined field, where it satisfies the
definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from tenet.kernel.text import storable
from tenet.reservations import rawjson
from tenet.reservations.cards.definitions import CardDefinition, FieldDefinition, FieldType, RuleCode
from tenet.reservations.keys import UnusableKey, normalize_key
from tenet.reservations.rawjson import MalformedJson

Mode = Literal["draft", "confirm"]
_DECIMAL = re.compile(r"^-?\d{1,12}(\.\d{1,4})?\Z")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
MESSAGES = {
    "UNKNOWN_FIELD": "not a field of this card",
    "WRONG_TYPE": "wrong type",
    "TOO_LONG": "too long",
    "OUT_OF_RANGE": "out of range",
    "BAD_FORMAT": "not in the expected format",
    "NOT_IN_ENUM": "not one of the allowed values",
    "REQUIRED": "required",
    "NOT_EDITABLE": "read-only: keeps the AI's value",
    "DATE_ORDER": "the departure must be after the arrival",
    "KEY_REQUIRED": "a confirmation number or a group code is required",
    "CHANGE_REQUIRED": "at least one change is required",
    "SAME_VALUE": "must differ from the current value",
    "REQUIRED_WITH": "required together with another field",
}


@dataclass(frozen=True)
class Issue:
    field: str
    code: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": MESSAGES[self.code]}


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _value(definition: FieldDefinition, value: Any, path: str, issues: list[Issue]) -> Any:
    """The field's value as stored (keys normalised, lists checked item by item), or the issue."""
    kind = definition.type
    if kind in (FieldType.STRING, FieldType.TEXT, FieldType.ENUM, FieldType.DATE, FieldType.DECIMAL,
                FieldType.BUSINESS_KEY) and not isinstance(value, str):
        issues.append(Issue(path, "WRONG_TYPE"))
        return None
    if kind in (FieldType.STRING, FieldType.TEXT, FieldType.BUSINESS_KEY):
        if not storable(value) or (kind != FieldType.TEXT and not value.isprintable()):
            issues.append(Issue(path, "BAD_FORMAT"))
            return None
        if definition.max_length is not None and len(value) > definition.max_length:
            issues.append(Issue(path, "TOO_LONG"))
            return None
        if definition.pattern is not None and not re.fullmatch(definition.pattern, value):
            issues.append(Issue(path, "BAD_FORMAT"))
            return None
        if kind == FieldType.BUSINESS_KEY:
            try:
                return normalize_key(value)
            except UnusableKey:
                issues.append(Issue(path, "BAD_FORMAT"))
                return None
        return value
    if kind == FieldType.ENUM:
        if value not in definition.enum_values:
            issues.append(Issue(path, "NOT_IN_ENUM"))
            return None
        return value
    if kind == FieldType.DATE:
        try:
            if not _DATE.match(value):
                raise ValueError
            date.fromisoformat(value)
        except ValueError:
            issues.append(Issue(path, "BAD_FORMAT"))
            return None
        return value
    if kind == FieldType.DECIMAL:
        if not _DECIMAL.match(value):
            issues.append(Issue(path, "BAD_FORMAT"))
            return None
        number = Decimal(value)
        if (definition.min is not None and number < definition.min) or (
                definition.max is not None and number > definition.max):
            issues.append(Issue(path, "OUT_OF_RANGE"))
            return None
        return value
    if kind == FieldType.INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            issues.append(Issue(path, "WRONG_TYPE"))
            return None
        if (definition.min is not None and value < definition.min) or (
                definition.max is not None and value > definition.max):
            issues.append(Issue(path, "OUT_OF_RANGE"))
            return None
        return value
    if kind == FieldType.BOOLEAN:
        if not isinstance(value, bool):
            issues.append(Issue(path, "WRONG_TYPE"))
            return None
        return value
    # LIST of objects
    if not isinstance(value, list):
        issues.append(Issue(path, "WRONG_TYPE"))
        return None
    if (definition.max_items is not None and len(value) > definition.max_items) or (
            definition.min_items is not None and len(value) < definition.min_items):
        issues.append(Issue(path, "OUT_OF_RANGE"))
        return None
    entries = []
    for index, entry in enumerate(value):
        entry_path = f"{path}[{index}]"
        if not isinstance(entry, dict):
            issues.append(Issue(entry_path, "WRONG_TYPE"))
            continue
        entries.append(_object(definition.item_fields, entry, entry_path + ".", issues, required=True))
    return entries


def _object(fields: tuple[FieldDefinition, ...], payload: dict[str, Any], prefix: str, issues: list[Issue], *,
            required: bool) -> dict[str, Any]:
    known = {f.key: f for f in fields}
    for key in payload:
        if key not in known:
            issues.append(Issue(prefix + str(key)[:64], "UNKNOWN_FIELD"))
    found: dict[str, Any] = {}
    for definition in fields:
        value = payload.get(definition.key)
        if _absent(value) and required and definition.default is not None:
            value = definition.default  # confirming fills in what the agent left at its default
        if _absent(value):
            if required and definition.required:
                issues.append(Issue(prefix + definition.key, "REQUIRED"))
            continue
        checked = _value(definition, value, prefix + definition.key, issues)
        if checked is not None:
            found[definition.key] = checked
    return found


def _dates_backwards(values: dict[str, Any]) -> bool:
    arrival, departure = values.get("arrival_date"), values.get("departure_date")
    return bool(arrival and departure and departure <= arrival)


def _rules(definition: CardDefinition, values: dict[str, Any], issues: list[Issue], unconverted: set[str]) -> None:
    """The card's cross-field rules on the values that converted. A rule naming a field that was sent but did
    not convert is not judged: that field's own issue (WRONG_TYPE, BAD_FORMAT...) is the answer, and the rule
    would only repeat it as "required" (issue 23)."""
    for rule in definition.rules:
        if unconverted.intersection(rule.fields):
            continue
        present = [values.get(key) for key in rule.fields]
        if rule.code == RuleCode.DATE_ORDER:
            if definition.field("rooming_list") is not None:
                for index, entry in enumerate(values.get("rooming_list", [])):
                    if _dates_backwards(entry):
                        issues.append(Issue(f"rooming_list[{index}].departure_date", "DATE_ORDER"))
            elif _dates_backwards(values):
                issues.append(Issue("departure_date", "DATE_ORDER"))
        elif rule.code in (RuleCode.KEY_REQUIRED, RuleCode.CHANGE_REQUIRED):
            if all(_absent(v) for v in present):
                issues.append(Issue(rule.fields[0], rule.code.value))
        elif rule.code == RuleCode.SAME_VALUE:
            if present[0] is not None and present[0] == present[1]:
                issues.append(Issue(rule.fields[1], "SAME_VALUE"))
        elif rule.code == RuleCode.REQUIRED_WITH and not _absent(present[0]) and _absent(present[1]):
            issues.append(Issue(rule.fields[1], "REQUIRED_WITH"))


def validate(definition: CardDefinition, payload: dict[str, Any], *, mode: Mode,
             prefill: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Issue]]:
    """The payload as it is stored (keys normalised, defaults and read-only values filled in when
    confirming), and every issue found."""
    issues: list[Issue] = []
    values = _object(definition.fields, payload, "", issues, required=mode == "confirm")
    if mode == "confirm":
        for field in definition.fields:
            if not field.editable:
                ai_value = (prefill or {}).get(field.key)
                if field.key in values and values[field.key] != ai_value:
                    issues.append(Issue(field.key, "NOT_EDITABLE"))
                elif ai_value is not None:
                    values[field.key] = ai_value
        sent = {key for key, value in payload.items() if not _absent(value)}
        _rules(definition, values, issues, sent - set(values))
    return values, issues


def _json_value(value: Any) -> Any:
    """The AI's decoded value as a card field sees it: a number with a fraction stays exact, as its text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


# The AI's numbers are exact and unbounded (`1e999999999999999999` is one Decimal): converting one into an int
# or its positional text costs time and memory in its exponent. Each is measured by its exponent first, and
# converted only when the result can be a value of the field.
_BIGINT = 2**63


def _decimal_text_fits(number: Decimal) -> bool:
    """Whether `format(number, "f")` would match `_DECIMAL` (at most 12 integer and 4 fraction digits), known
    from the exponent alone, so a number that could not is never written out."""
    return (number.is_zero() or number.adjusted() < 12) and int(number.as_tuple().exponent) >= -4


def _prefill_candidate(definition: FieldDefinition, value: Any) -> Any | Issue:
    """The AI's value in the form the field reads (a number as its text for DECIMAL, an integral number as an
    int for INTEGER), or the issue that names a number the field can never hold."""
    if definition.type == FieldType.DECIMAL and isinstance(value, int | Decimal) and not isinstance(value, bool):
        number = Decimal(value)
        if not _decimal_text_fits(number):
            return Issue(definition.key, "BAD_FORMAT")
        return format(number, "f")
    if definition.type == FieldType.INTEGER and isinstance(value, Decimal) and value == value.to_integral_value():
        if not -_BIGINT < value < _BIGINT:
            return Issue(definition.key, "OUT_OF_RANGE")
        return int(value)
    return _json_value(value)


def prefill(definition: CardDefinition, ai_item_text: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The AI's value for each field with a `source_path`, where it satisfies the definition; an issue per
    value that does not (the agent then types it)."""
    try:
        item = rawjson.loads(ai_item_text)
    except MalformedJson:
        return {}, []
    if not isinstance(item, dict):
        return {}, []
    found: dict[str, Any] = {}
    issues: list[dict[str, str]] = []
    for field in definition.fields:
        if field.source_path is None:
            continue
        value: Any = item
        for step in field.source_path.split("."):
            value = value.get(step) if isinstance(value, dict) else None
        if _absent(value):
            continue
        candidate = _prefill_candidate(field, value)
        problems: list[Issue] = [candidate] if isinstance(candidate, Issue) else []
        checked = None if problems else _value(field, candidate, field.key, problems)
        if problems:
            issues.extend({"field": p.field, "code": p.code} for p in problems)
        elif checked is not None:
            found[field.key] = checked
    return found, issues


def changed_fields(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """The names of the fields whose values differ (what the audit records: names, never values)."""
    before = before or {}
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
