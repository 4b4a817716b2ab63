"""Error codes are a contract: once a client may have seen a code, it never disappears."""

from __future__ import annotations

import re
from pathlib import Path

import tenet.app  # noqa: F401  (the HTTP layer's own errors)
from tenet.domains import load_all
from tenet.kernel.errors import ERROR_REGISTRY, DomainError

load_all()

KNOWN = Path(__file__).with_name("known_error_codes.txt")


def _known_codes() -> set[str]:
    return {line.strip() for line in KNOWN.read_text().splitlines() if line.strip() and not line.startswith("#")}


def test_no_error_code_disappears():
    missing = _known_codes() - set(ERROR_REGISTRY)
    assert not missing, f"error codes removed or renamed (clients depend on them): {sorted(missing)}"


def test_every_error_code_is_listed():
    unlisted = set(ERROR_REGISTRY) - _known_codes()
    assert not unlisted, f"new error codes: add them to {KNOWN.name} so their removal is caught: {sorted(unlisted)}"


def test_codes_are_upper_snake_and_statuses_are_4xx_or_5xx():
    for code, cls in ERROR_REGISTRY.items():
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", code), code
        assert 400 <= cls.status < 600, (code, cls.status)


def test_problem_document_carries_code_status_and_data():
    class ExampleError(DomainError):
        status, code, title = 409, "EXAMPLE_FOR_TEST", "Example"

    try:
        problem = ExampleError("it broke", current_status="ACCEPTED").to_problem()
    finally:
        ERROR_REGISTRY.pop("EXAMPLE_FOR_TEST")
    assert problem == {
        "type": "urn:tenet:problem:EXAMPLE_FOR_TEST", "title": "Example", "status": 409,
        "detail": "it broke", "code": "EXAMPLE_FOR_TEST", "current_status": "ACCEPTED",
    }


def test_a_code_cannot_be_owned_by_two_errors():
    import pytest

    with pytest.raises(TypeError, match="already owned"):
        class Duplicate(DomainError):
            code = "NOT_FOUND"
