"""The shape of a task card's field contract: fields with types and limits, and cross-field rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any


class FieldType(StrEnum):
    STRING = "string"          # one line
    TEXT = "text"              # several lines
    INTEGER = "integer"
    DECIMAL = "decimal"        # a JSON string like "120.50" (never a float: money and rates stay exact)
    DATE = "date"              # "YYYY-MM-DD"
    BOOLEAN = "boolean"
    ENUM = "enum"
    BUSINESS_KEY = "business_key"  # a confirmation number or group code, normalised (rsv-key-v1) when saved
    LIST = "list"              # a list of objects described by `item_fields`


@dataclass(frozen=True)
class FieldDefinition:
    key: str
    label: str
    type: FieldType
    required: bool = False     # for confirmation; drafts may leave anything out
    editable: bool = True      # read-only fields keep the AI's value
    max_length: int | None = None
    min: Decimal | int | None = None
    max: Decimal | int | None = None
    pattern: str | None = None
    enum_values: tuple[str, ...] = ()
    item_fields: tuple[FieldDefinition, ...] = ()
    min_items: int | None = None
    max_items: int | None = None
    # Where the prefill comes from in the AI item (`extracted_fields.arrival_date`); None: nowhere.
    source_path: str | None = None
    default: Any = None
    description: str = ""


class RuleCode(StrEnum):
    DATE_ORDER = "DATE_ORDER"              # departure after arrival
    KEY_REQUIRED = "KEY_REQUIRED"          # at least one business key
    CHANGE_REQUIRED = "CHANGE_REQUIRED"    # at least one field to change
    SAME_VALUE = "SAME_VALUE"              # the new value differs from the current one
    REQUIRED_WITH = "REQUIRED_WITH"        # the second field is required when the first is given


@dataclass(frozen=True)
class CardRule:
    code: RuleCode
    fields: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class CardDefinition:
    task_card_type: str
    field_contract_version: str
    confirmable: bool
    fields: tuple[FieldDefinition, ...]
    rules: tuple[CardRule, ...] = field(default=())

    def field(self, key: str) -> FieldDefinition | None:
        return next((f for f in self.fields if f.key == key), None)
