"""Python's `$` matches before a trailing newline ("v1.1.abc\\n" passes `^v1\\.\\d+\\.abc$` with `.match`), so a
shape check written that way lets a newline through into codes, ids, keys and stored rules. Every literal pattern
given to `re` in src ends with `\\Z` instead (the patterns shared with SQL and pydantic are matched with
`fullmatch`: PostgreSQL's `~` and pydantic's Rust engine already read `$` as the end of the text)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tenet.kernel.errors import DomainError
from tenet.kernel.invariants import Invariant
from tenet.meetings.queries import valid_meeting_id

SRC = Path(__file__).resolve().parents[2] / "src" / "tenet"
RE_FUNCTIONS = {"compile", "match", "fullmatch", "search"}


def _ends_with_dollar(pattern: str) -> bool:
    """An unescaped `$` at the end (an even number of backslashes before it)."""
    if not pattern.endswith("$"):
        return False
    backslashes = len(pattern[:-1]) - len(pattern[:-1].rstrip("\\"))
    return backslashes % 2 == 0


def _dollar_anchored_patterns() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in RE_FUNCTIONS and node.args):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str | bytes):
                    value = first.value if isinstance(first.value, str) else first.value.decode("latin-1")
                    if _ends_with_dollar(value):
                        found.append(f"{path.relative_to(SRC)}:{node.lineno}: {value!r}")
    return found


def test_no_python_pattern_in_src_ends_with_dollar():
    assert _dollar_anchored_patterns() == []


def test_the_guard_sees_a_dollar_and_not_an_escaped_one():
    assert _ends_with_dollar(r"^a$") and not _ends_with_dollar(r"^a\$") and _ends_with_dollar(r"^a\\$")


def test_a_meeting_id_or_an_invariant_id_with_a_trailing_newline_is_refused():
    with pytest.raises(DomainError):
        valid_meeting_id("a" * 16 + "\n")
    with pytest.raises(ValueError):
        Invariant(id="MA-INV-01\n", domain="x", statement="s", scope="s", counterexample="c", db=(), app="a",
                  error_code=None, concurrency="c", detector="SELECT 1")
