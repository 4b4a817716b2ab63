"""Schemathesis with its number and string strategies widened past what a schema-valid client sends: numbers
whose exponent or digits cost a parser or a conversion dearly (1e400000, 1e999999999999999999, integers of
4,301 and 5,000 digits), long digit strings where text is expected, lone surrogates (legal in a JSON escape,
not in UTF-8) in member names and values, NULs, digits str.isdigit() takes but int() refuses. Each generated
case is schema-valid first, from real rows where a world names them, then one to three of its values, member
names, path or query parameters or headers are replaced by such a value, so the widened value reaches the
code behind the schema checks.

The bytes are written here, not by schemathesis: a number literal is sent exactly as spelt (no Python float
or int could carry 1e400000), and a surrogate as the `\\udXXX` escape a JSON encoder writes. No answer may be
a 5xx; every error is a problem document; every JSON answer is UTF-8.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.core import NotSet
from schemathesis.generation import GenerationMode

from tests.support.fuzz import World

# Examples per place a route takes a value (`make fuzz-wide` raises it for a longer pass).
EXAMPLES = int(os.environ.get("FUZZ_WIDE_EXAMPLES", "5"))
# Which test file fuzzes which routes; whatever no domain claims is fuzzed by tests/ops/test_api_fuzz_wide.py,
# so every operation of the document is widened somewhere.
DOMAINS = {
    "identity": r"^/api/v1/(auth|iam)/",
    "workspaces": r"^/api/v1/(workspaces|invitations)",
    "social": r"^/api/v1/social/",
    "agenda": (r"^/api/v1/meeting-attendance/(meetings/[^/]+/(agenda|attachments)|agenda|agenda-items|upload-tasks|"
               r"me/upload-tasks|attachments)"),
    "meetings": r"^/api/v1/meeting-attendance/",
    "reservations": r"^/api/v1/reservations/",
}


@functools.cache
def _schema():
    from tenet.app import create_app
    from tests.conftest import test_settings

    return schemathesis.openapi.from_dict(create_app(test_settings()).openapi())


def operations(domain: str | None) -> list:
    """The operations a domain's file widens (`meetings` leaves the agenda's to `agenda`); None: the rest."""
    def claimed(path: str, name: str) -> bool:
        return re.match(DOMAINS[name], path) is not None and not (
            name == "meetings" and re.match(DOMAINS["agenda"], path))

    found = [result.ok() for result in _schema().get_all_operations()]
    if domain is not None:
        return [op for op in found if claimed(op.path, domain)]
    return [op for op in found if not any(claimed(op.path, name) for name in DOMAINS)]


@dataclass(frozen=True)
class Raw:
    """A JSON number literal, sent exactly as spelt."""

    text: str


NUMBERS = [Raw(text) for text in (
    "1e400000", "-1e400000", "1E+80000000", "1e999999999999999999", "-1e999999999999999999",
    "1e-999999999999999999", "1e9999999999999999999", "9" * 4300, "9" * 4301, "-" + "9" * 5000,
    "0." + "0" * 5000 + "1", "1" * 20, "-" + "1" * 20, "-0", "1.0e-400000", "12345678901234567890.5")]
STRINGS = ["9" * 5000, "1" * 20, "-" + "9" * 4301, "1e400000", "1e999999999999999999", "9" * 19 + "e9",
           "\ud800", "x\udfffy", "\ud83d", "a\x00b", "\u00b2", "\u0663", " 7 ", "NaN", "-0"]
# Member names: lone surrogates, a NUL, and names the services read from free-form objects (card fields,
# AI item members, settings sections) so that a widened number lands where it is converted.
KEYS = ["\ud800", "\udc00x", "a\x00b", "adults", "children", "number_of_rooms", "voucher_amount",
        "commission_percent", "source_event_index", "parent_source_event_index", "source_message_id",
        "preferences", "notification"]
# Text a form can carry (it is encoded as UTF-8): all but the lone surrogates. A URL carries them all, each
# surrogate as the percent-encoded bytes of its UTF-8-like spelling (invalid UTF-8).
FORM_TEXT = [s for s in STRINGS if not re.search("[\ud800-\udfff]", s)]


def _cursor(key: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).rstrip(b"=").decode()


# Cursors no list issued: JSON a list's sort key cannot be (a boolean for an integer, a surrogate, a NUL, 2^64,
# markers around something that is not text), one to three positions wide.
CURSORS = [_cursor([value] * width) for width in (1, 2, 3) for value in (
    True, "\ud800", "a\x00b", 2**64, {"u": 1}, {"t": 5}, None, 1.5, [])] + [
    _cursor([{"t": "2026-01-05T09:00:00+00:00"}, True]), _cursor([1, "\ud800", "x"])]
HEADERS = {
    "Range": ["bytes=" + "9" * 5000 + "-", "bytes=0-" + "9" * 5000, "bytes=-" + "9" * 5000, "bytes=\u00b2-",
              "bytes=" + "0" * 5000 + "1-2"],
    "If-Match": ['"' + "9" * 5000 + '"', "W/\"" + "9" * 10 + '"', '"\u00b2"'],
    "Idempotency-Key": ["9" * 5000, "k" * 255],
    "X-Request-ID": ["9" * 5000],
}


def encode_json(value: Any) -> bytes:
    """JSON text of `value` with each Raw as its literal and each lone surrogate as its escape."""
    literals: dict[str, str] = {}

    def mark(item: Any) -> Any:
        if isinstance(item, Raw):
            token = f"\x00raw{len(literals)}\x00"
            literals[json.dumps(token)] = item.text
            return token
        if isinstance(item, dict):
            return {key: mark(member) for key, member in item.items()}
        if isinstance(item, list):
            return [mark(member) for member in item]
        return item

    text = json.dumps(mark(value))  # ensure_ascii: a lone surrogate is written as its \\udXXX escape
    for token, literal in literals.items():
        text = text.replace(token, literal)
    return text.encode("ascii")


def _url_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value.text if isinstance(value, Raw) else str(value)
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every member and element of a JSON document (containers too, so one can be replaced)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, member in value.items():
            found += _leaves(member, (*path, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += _leaves(member, (*path, index))
    return found


def _objects(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path] if isinstance(value, dict) else []
    if isinstance(value, dict):
        for key, member in value.items():
            found += _objects(member, (*path, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += _objects(member, (*path, index))
    return found


def _at(document: Any, path: tuple) -> Any:
    for step in path:
        document = document[step]
    return document


def _replace(document: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _at(document, path[:-1])[path[-1]] = value
    return document


@dataclass
class WideTally:
    """(status, problem code) of every answer, and the requests that broke a promise."""

    seen: Counter = field(default_factory=Counter)
    broken: list[str] = field(default_factory=list)


def _check(response: requests.Response, tally: WideTally, sent: str) -> None:
    kind = response.headers.get("content-type", "")
    code = ""
    if kind.startswith("application/problem+json"):
        code = response.json().get("code", "")
    tally.seen[(response.status_code, code)] += 1
    problem: str | None = None
    if response.status_code >= 500:
        problem = "a 5xx"
    elif response.status_code >= 400 and not kind.startswith("application/problem+json"):
        problem = f"an error that is not a problem document ({kind})"
    elif "json" in kind:
        try:
            response.content.decode("utf-8")
        except UnicodeDecodeError:
            problem = "JSON that is not UTF-8"
    if problem is not None:
        tally.broken.append(f"{problem}: {response.status_code} {response.text[:300]!r} for {sent}")


def places(operation) -> list[str]:
    """Where `operation` can take a widened value: each place is tried `examples` times."""
    parameters = {(p.location.value, p.name) for p in operation.iter_parameters()}
    found = ["header"]
    if any(location == "path" for location, _ in parameters):
        found.append("path")
    if any(location == "query" for location, _ in parameters) or operation.method.upper() == "GET":
        found.append("query")
    if ("query", "cursor") in parameters:
        found.append("cursor")
    media = [body.media_type for body in operation.body]
    if any("json" in m for m in media):
        found += ["value", "key"]
    elif media:
        found.append("form")
    return found


def wide_fuzz(operation, *, base_url: str, world: World, examples: int = EXAMPLES) -> WideTally:
    """For each place `operation` takes a value, `examples` schema-valid cases (from the world's real rows where
    it names them), each with one value at that place widened; every answer is checked (no 5xx, problems for
    errors, UTF-8 JSON) and the tally says what came back."""
    tally = WideTally()
    strategy = operation.as_strategy(GenerationMode.POSITIVE)
    with requests.Session() as session:
        for place in places(operation):
            _widened_run(strategy, place, examples, base_url, world, session, tally)
    return tally


def _widened_run(strategy, place: str, examples: int, base_url: str, world: World, session: requests.Session,
                 tally: WideTally) -> None:
    @given(case=strategy, data=st.data())
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.generate])  # a failure is reported with its request, not shrunk against a live server
    def run(case, data):
        _from_world(case, data, world)
        _send(case, _widen(case, data, place), base_url, world, session, tally)

    run()


def _from_world(case, data, world: World) -> None:
    """Most of the time, real values where the world has them (path and query ids, body fields), and no
    noise where it would only meet the HTTP layer (a random cursor or Idempotency-Key)."""
    for name in list(case.path_parameters or {}):
        if name in world.path and data.draw(st.integers(0, 9)) < 8:
            case.path_parameters[name] = data.draw(st.sampled_from(world.path[name]), label=name)
    if isinstance(case.body, dict):
        for name in list(case.body):
            if name in world.body and data.draw(st.integers(0, 9)) < 8:
                case.body[name] = data.draw(st.sampled_from(world.body[name]), label=name)
    for name in [n for n in (case.query or {}) if n in world.path]:
        if data.draw(st.integers(0, 9)) < 8:
            case.query[name] = data.draw(st.sampled_from(world.path[name]), label=name)
    for container in (case.query, case.headers):
        for name in [n for n in (container or {}) if n in world.omit]:
            if data.draw(st.integers(0, 9)) < 8:
                del container[name]


@dataclass
class _Widened:
    path: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    raw_body: bool = False


def _widen(case, data, place: str) -> _Widened:
    """One value of the case at `place` widened (in place for its query and form fields)."""
    widened = _Widened()
    body = None if isinstance(case.body, NotSet) else case.body
    if place == "path" and case.path_parameters:
        name = data.draw(st.sampled_from(sorted(case.path_parameters)), label="path parameter")
        widened.path[name] = data.draw(st.sampled_from(STRINGS + NUMBERS), label="path value")
    elif place in ("query", "cursor"):
        name = "cursor" if place == "cursor" else data.draw(
            st.sampled_from([*sorted(case.query or {}), "limit"]), label="query parameter")
        values = CURSORS if name == "cursor" else STRINGS + NUMBERS
        case.query = {**(case.query or {}), name: data.draw(st.sampled_from(values), label="query value")}
    elif place == "header":
        name = data.draw(st.sampled_from(sorted(HEADERS)), label="header")
        widened.headers[name] = data.draw(st.sampled_from(HEADERS[name]), label="header value")
    elif place == "form" and isinstance(body, dict) and body:
        name = data.draw(st.sampled_from(sorted(body)), label="form field")
        body[name] = data.draw(st.sampled_from(FORM_TEXT), label="form value")
    elif place == "value":
        where = data.draw(st.sampled_from(_leaves(body) or [()]), label="member")
        body = _replace(body, where, data.draw(st.sampled_from(NUMBERS + STRINGS), label="value"))
    elif place == "key":  # a member name, in any object of the body (or a body that becomes one)
        value = data.draw(st.sampled_from([*NUMBERS, *STRINGS, 1, {}]), label="member value")
        name = data.draw(st.sampled_from(KEYS), label="member name")
        objects = _objects(body)
        if objects:
            _at(body, data.draw(st.sampled_from(objects), label="object"))[name] = value
        else:
            body = {name: value}
    widened.body = body
    widened.raw_body = case.media_type is not None and "json" in case.media_type
    return widened


def _send(case, widened: _Widened, base_url: str, world: World, session: requests.Session,
          tally: WideTally) -> None:
    tokens = {name: f"zzwide{index}zz" for index, name in enumerate(widened.path)}
    for name, token in tokens.items():
        case.path_parameters[name] = token
    query, case.query = case.query or {}, None
    body, media_type = widened.body, case.media_type
    if widened.raw_body:
        case.body = None
    kwargs = case.as_transport_kwargs(base_url=base_url, headers=world.headers)
    url = kwargs.pop("url")
    for name, token in tokens.items():
        url = url.replace(token, _url_text(widened.path[name]))
    pairs = [(k, v) for k, values in query.items() for v in (values if isinstance(values, list) else [values])]
    if pairs:
        url += "?" + "&".join(f"{_url_text(k)}={_url_text(v)}" for k, v in pairs)
    headers = {**kwargs.pop("headers", {}), **widened.headers}
    kwargs.pop("params", None)
    kwargs.pop("json", None)
    if widened.raw_body:
        headers["Content-Type"] = media_type
        kwargs["data"] = encode_json(body) if body is not None else None
    sent = f"{kwargs['method']} {url[:300]} headers={ {k: v[:80] for k, v in widened.headers.items()} } " \
           f"body={repr(kwargs.get('data'))[:300]}"
    response = session.request(url=url, headers=headers, timeout=120, **kwargs)
    _check(response, tally, sent)
