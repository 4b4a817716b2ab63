"""The task card's form, generated from the card's field contract (the data GET /task-card-definitions/{type}
answers, definitions_api.read): one input per field by its type, list fields as rows, and the form's values back
into the JSON payload the API's PUT /card/draft and POST /confirm take.

Inputs are named after the payload's paths, the way the card's 422 names a bad field (`rooming_list[0].guest_name`
is the input `f:rooming_list:0:guest_name`), so each error lands next to its field. Decimals stay the text typed
(never a float); an integer that is not one is sent as typed, and the card's check says WRONG_TYPE at the field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData

from tenet.reservations.schemas import FieldDefinitionRead, TaskCardDefinitionRead

MAX_ROWS = 500
_INTEGER = re.compile(r"^-?\d{1,18}\Z")


@dataclass
class Input:
    """One input of the form: its name, id, the error path the card's 422 uses, its value as text and its error."""

    definition: FieldDefinitionRead
    name: str
    path: str
    value: str
    error: str | None = None
    issue: str | None = None  # the AI prefill's issue for this field

    @property
    def id(self) -> str:
        return "field-" + self.name[2:].replace(":", "-")


@dataclass
class Rows:
    """A list field: its rows, each a list of inputs, and how many there are (the form's `n:<key>`)."""

    definition: FieldDefinitionRead
    rows: list[list[Input]] = field(default_factory=list)
    error: str | None = None
    issue: str | None = None

    @property
    def id(self) -> str:
        return "field-" + self.definition.key


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def inputs(definition: TaskCardDefinitionRead, values: dict[str, Any], errors: dict[str, str],
           issues: dict[str, str]) -> list[Input | Rows]:
    """The form's inputs, filled with `values` (the draft, else the AI's prefill), errors at their fields."""
    shown: list[Input | Rows] = []
    for f in definition.fields:
        if f.type == "list":
            listed = values.get(f.key)
            entries = listed if isinstance(listed, list) else []
            rows = Rows(f, error=errors.get(f.key), issue=issues.get(f.key))
            for index, entry in enumerate(entries[:MAX_ROWS]):
                entry = entry if isinstance(entry, dict) else {}
                rows.rows.append([Input(sub, f"f:{f.key}:{index}:{sub.key}", f"{f.key}[{index}].{sub.key}",
                                        _text(entry.get(sub.key)),
                                        errors.get(f"{f.key}[{index}].{sub.key}") or errors.get(f"{f.key}[{index}]"))
                                  for sub in f.item_fields])
            shown.append(rows)
        else:
            value = values.get(f.key, f.default)
            shown.append(Input(f, f"f:{f.key}", f.key, _text(value), errors.get(f.key), issues.get(f.key)))
    return shown


def error_paths(shown: list[Input | Rows]) -> list[tuple[str, str | None]]:
    """(element id, error code) of every field's error slot (an autosave answer refreshes each one)."""
    paths: list[tuple[str, str | None]] = []
    for item in shown:
        paths.append((item.id + "-error", item.error))
        if isinstance(item, Rows):
            paths.extend((i.id + "-error", i.error) for row in item.rows for i in row)
    return paths


def _scalar(f: FieldDefinitionRead, raw: str) -> Any:
    if f.type == "integer":
        return int(raw) if _INTEGER.match(raw) else raw
    if f.type == "boolean":
        return {"true": True, "false": False}.get(raw, raw)
    return raw


def _typed(form: FormData, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def row_count(form: FormData, key: str) -> int:
    raw = _typed(form, f"n:{key}")
    return min(int(raw), MAX_ROWS) if raw.isdigit() and len(raw) < 5 else 0


def payload(definition: TaskCardDefinitionRead, form: FormData, *, add_row: str = "",
            remove_row: tuple[str, int] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card payload the form says (read-only fields are the AI's: never sent), and the values to show on the
    form again (each list with its empty rows where they were). Empty inputs are left out (a draft may lack
    anything); an empty row is kept on the form but not sent, so adding a row never makes a draft invalid."""
    values: dict[str, Any] = {}
    display: dict[str, Any] = {}
    for f in definition.fields:
        if not f.editable:
            continue
        if f.type != "list":
            raw = _typed(form, f"f:{f.key}")
            if raw:
                values[f.key] = display[f.key] = _scalar(f, raw)
            continue
        rows = []
        for index in range(row_count(form, f.key)):
            if remove_row == (f.key, index):
                continue
            entry = {sub.key: _scalar(sub, raw) for sub in f.item_fields
                     if (raw := _typed(form, f"f:{f.key}:{index}:{sub.key}"))}
            rows.append(entry)
        if add_row == f.key and len(rows) < MAX_ROWS:
            rows.append({})
        display[f.key] = rows
        if any(rows):
            values[f.key] = [entry for entry in rows if entry]
    return values, display


def errors_by_field(problem: dict[str, Any]) -> dict[str, str]:
    """A 422 TASK_CARD_PAYLOAD_INVALID's `errors` as {field path: code}."""
    found: dict[str, str] = {}
    for issue in problem.get("errors") or []:
        if isinstance(issue, dict) and "field" in issue:
            found.setdefault(str(issue["field"]), str(issue.get("code", "")))
    return found


def shown_paths(errors: dict[str, str], display: dict[str, Any]) -> dict[str, str]:
    """The 422's paths moved onto the rows as the form shows them: an empty row is not sent, so the card's
    `rooming_list[1]` may be the form's third row."""
    moved: dict[str, str] = {}
    for path, code in errors.items():
        key, bracket, rest = path.partition("[")
        rows = display.get(key)
        index, _, tail = rest.partition("]")
        if bracket and isinstance(rows, list) and index.isdigit():
            sent = [position for position, row in enumerate(rows) if row]
            if int(index) < len(sent):
                path = f"{key}[{sent[int(index)]}]{tail}"
        moved[path] = code
    return moved
