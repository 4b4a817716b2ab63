"""The AI's JSON as text with positions: how an item's original text survives (RSV-INV-03).

`parse(body)` decodes the body as strict UTF-8 and walks the envelope object, the item lists and each
item's top-level members with the standard library's own JSON scanner (`JSONDecoder.raw_decode(text, i)`
answers a value *and where it ends*), recording the character span of every item and member. A stored
item is `text[start:end]` of the body — the characters the AI sent, so key order, number spelling (`1.50`,
`1e2`, `-0`, 25-digit integers), escapes, whitespace inside the item and unknown members are exactly as
received. Nothing is ever re-serialised. Values are parsed with `Decimal` for non-integers (mapping never
turns `1.50` into a float); `NaN` and `Infinity` are refused (RFC 8259); objects record duplicate member
names so the envelope can refuse them and items can report them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed
from typing import Any

_WHITESPACE = re.compile(r"[ \t\n\r]*")


class MalformedJson(ValueError):
    """The body is not RFC 8259 JSON in UTF-8 (or nests deeper than the parser goes)."""


class JsonObject(dict):
    """A decoded object that remembers which member names appeared more than once (the last one wins)."""

    duplicates: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> JsonObject:
    found = JsonObject(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        found.duplicates = frozenset(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return found


def _constant(name: str) -> Any:
    raise MalformedJson(f"{name} is not JSON")


# RFC 8259 section 9 lets a parser limit the range and precision of numbers. Ours: an integer of at most
# 4,300 digits (what Python's int() reads, sys.get_int_max_str_digits) and an exponent a Decimal holds
# (|exponent| up to 10^18). Past either the body is refused as malformed, never a 500; within them a number
# stays exact (a card's prefill bounds what it converts).
def _integer(literal: str) -> int:
    try:
        return int(literal)
    except ValueError:
        raise MalformedJson("an integer has more digits than this parser reads (4300)") from None


def _decimal(literal: str) -> Decimal:
    try:
        return Decimal(literal)
    except InvalidOperation:
        raise MalformedJson("a number's exponent is larger than this parser reads") from None


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_decimal, parse_int=_integer,
                            parse_constant=_constant)


def loads(text: str) -> Any:
    """One JSON value as this module decodes it (decimals exact, the same number limits): how a stored item
    is read again."""
    value, end = _value(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise MalformedJson(f"unexpected text after the JSON value at character {end}")
    return value


@dataclass
class Member:
    """One member of an object: its decoded value and the span of its raw value text."""

    value: Any
    start: int
    end: int


@dataclass
class RawObject:
    """An object walked member by member (the envelope, an item)."""

    members: dict[str, Member] = field(default_factory=dict)
    duplicates: set[str] = field(default_factory=set)


@dataclass
class Element:
    """One element of an item list: its span, and its members when it is an object."""

    start: int
    end: int
    value: Any
    object: RawObject | None


@dataclass
class Envelope:
    text: str
    envelope: RawObject
    lists: dict[str, list[Element]]


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]


def _value(text: str, index: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, index)
    except json.JSONDecodeError as exc:
        raise MalformedJson(f"invalid JSON at character {exc.pos}") from None
    except RecursionError:
        raise MalformedJson("JSON nested too deeply") from None


def _expect(text: str, index: int, char: str) -> int:
    if index >= len(text) or text[index] != char:
        raise MalformedJson(f"expected {char!r} at character {index}")
    return index + 1


def _member_name(text: str, index: int) -> tuple[str, int]:
    """`text[index]` should open a member's name: the name, and where its value starts (after the colon)."""
    index = _expect(text, index, '"')
    try:
        name, index = scanstring(text, index, True)
    except json.JSONDecodeError as exc:
        raise MalformedJson(f"invalid member name at character {exc.pos}") from None
    index = _expect(text, _skip(text, index), ":")
    return name, _skip(text, index)


def _walk_object(text: str, index: int) -> tuple[RawObject, Any, int]:
    """`text[index]` is '{': walk its members, answering them, the decoded object and the end index."""
    found = RawObject()
    pairs: list[tuple[str, Any]] = []
    index = _skip(text, index + 1)
    if index < len(text) and text[index] == "}":
        return found, _object(pairs), index + 1
    while True:
        name, start = _member_name(text, index)
        value, end = _value(text, start)
        if name in found.members:
            found.duplicates.add(name)
        found.members[name] = Member(value, start, end)
        pairs.append((name, value))
        index = _skip(text, end)
        if index < len(text) and text[index] == ",":
            index = _skip(text, index + 1)
            continue
        return found, _object(pairs), _expect(text, index, "}")


def _walk_list(text: str, index: int) -> tuple[list[Element], int]:
    """`text[index]` is '[': each element with its span (objects walked member by member)."""
    elements: list[Element] = []
    index = _skip(text, index + 1)
    if index < len(text) and text[index] == "]":
        return elements, index + 1
    while True:
        start = index
        if index < len(text) and text[index] == "{":
            walked, value, end = _walk_object(text, index)
            elements.append(Element(start, end, value, walked))
        else:
            value, end = _value(text, index)
            elements.append(Element(start, end, value, None))
        index = _skip(text, end)
        if index < len(text) and text[index] == ",":
            index = _skip(text, index + 1)
            continue
        return elements, _expect(text, index, "]")


def decode(body: bytes) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedJson("the body is not UTF-8") from None
    if text.startswith("\ufeff"):
        raise MalformedJson("a byte-order mark is not JSON (RFC 8259 §8.1)")
    return text


def parse(body: bytes, list_names: tuple[str, ...]) -> Envelope:
    """Walk `body` (an object); the members named in `list_names` that are arrays are walked element by
    element. Raises MalformedJson for anything that is not one JSON object."""
    text = decode(body)
    index = _skip(text, 0)
    if index >= len(text) or text[index] != "{":
        # Not an object: still tell "not JSON" from "JSON but not an object".
        _value(text, index)
        raise MalformedJson("the body must be a JSON object")
    envelope = RawObject()
    lists: dict[str, list[Element]] = {}
    index = _skip(text, index + 1)
    if index < len(text) and text[index] == "}":
        index += 1
    else:
        while True:
            name, start = _member_name(text, index)
            if name in list_names and start < len(text) and text[start] == "[":
                elements, end = _walk_list(text, start)
                value: Any = [e.value for e in elements]
                if name not in lists:
                    lists[name] = elements
            else:
                value, end = _value(text, start)
            if name in envelope.members:
                envelope.duplicates.add(name)
            else:
                envelope.members[name] = Member(value, start, end)
            index = _skip(text, end)
            if index < len(text) and text[index] == ",":
                index = _skip(text, index + 1)
                continue
            index = _expect(text, index, "}")
            break
    if _skip(text, index) != len(text):
        raise MalformedJson(f"unexpected text after the JSON object at character {index}")
    return Envelope(text, envelope, lists)


class ByteOffsets:
    """Byte offsets of character positions of one text, for positions asked in increasing order: one pass
    over the text however many items it holds."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._ascii = text.isascii()
        self._char = 0
        self._byte = 0

    def __call__(self, position: int) -> int:
        if self._ascii:
            return position
        if position < self._char:
            self._char, self._byte = 0, 0
        self._byte += len(self._text[self._char:position].encode("utf-8"))
        self._char = position
        return self._byte
