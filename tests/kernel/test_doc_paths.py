"""Every test path the code and the docs name exists: a reader sent to `tests/x/test_y.py` finds that file.

Paths are read from `src/`, `docs/` and README.md: a `tests/...py` file, optionally followed by `::test_name`
(that test must be defined in the file), and `tests/.../` folders. A pattern (`tests/x/test_<module>.py`,
`tests/x/test_*.py`) names a folder: the folder must exist. A dotted name (`tests/support/invariants.rules_hold`)
names a module and an attribute: the module must exist and define it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
# tests/, then path characters; a pattern (<module>, *) and what follows a file (::test, .attribute) are parsed out.
MENTION = re.compile(r"(?<![\w/.-])tests/[\w/.<>*{}-]*")
# Named in the text but landing with another branch: {path: why}. Empty when every branch has landed.
PENDING: dict[str, str] = {}


def mentions() -> list[tuple[str, str]]:
    """(where, the mentioned text) for every `tests/...` in the sources, in file order."""
    found = []
    for source in SOURCES:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for match in MENTION.finditer(line):
                rest = line[match.end():]
                test = re.match(r"::(\w+)", rest)
                text = match.group(0).rstrip(".,;:")
                found.append((f"{source.relative_to(ROOT)}:{number}", text + (f"::{test.group(1)}" if test else "")))
    return found


def problem(text: str) -> str | None:
    """Why `text` names nothing that exists, or None when it does."""
    path, _, test = text.partition("::")
    if any(c in path for c in "<>*{}"):  # a pattern: its folder must exist
        folder = path[: min(path.index(c) for c in "<>*{}" if c in path)].rsplit("/", 1)[0]
        return None if (ROOT / folder).is_dir() else f"no folder {folder}/"
    if path.endswith("/") or "." not in path.rsplit("/", 1)[-1]:
        return None if (ROOT / path).is_dir() else f"no folder {path}"
    module, dot, attribute = path.partition(".py")
    if not dot:  # tests/support/invariants.rules_hold: module and attribute
        module, _, attribute = path.rpartition(".")
        attribute = "." + attribute
    file = ROOT / f"{module}.py"
    if path in PENDING or f"{module}.py" in PENDING:
        return None
    if not file.is_file():
        return f"no file {module}.py"
    names = set(re.findall(r"^(?:async )?def (\w+)|^class (\w+)|^(\w+) =", file.read_text(encoding="utf-8"), re.M))
    defined = {n for group in names for n in group if n} | set(
        re.findall(r"^\s+(?:async )?def (test_\w+)", file.read_text(encoding="utf-8"), re.M))
    wanted = test or attribute.lstrip(".")
    if wanted and wanted not in defined:
        return f"{module}.py defines no {wanted}"
    return None


def test_the_sources_name_test_paths_at_all():
    """The check reads something: the docs do name test files (a broken pattern would find none and pass)."""
    named = {text for _, text in mentions()}
    assert "tests/concurrency/test_meeting_races.py" in named and len(named) > 20, sorted(named)


def test_every_test_path_named_in_src_and_docs_exists():
    wrong = [f"{where}: {text} ({why})" for where, text in mentions() if (why := problem(text))]
    assert not wrong, "test paths that name nothing:\n" + "\n".join(wrong)


@pytest.mark.parametrize("text, why", [
    ("tests/nowhere/test_missing.py", "no file tests/nowhere/test_missing.py"),
    ("tests/nowhere/", "no folder tests/nowhere/"),
    ("tests/nowhere/test_<module>.py", "no folder tests/nowhere/"),
    ("tests/kernel/test_doc_paths.py::test_absent", "tests/kernel/test_doc_paths.py defines no test_absent"),
    ("tests/support/invariants.nothing_here", "tests/support/invariants.py defines no nothing_here"),
])
def test_a_wrong_path_is_reported(text, why):
    assert problem(text) == why


@pytest.mark.parametrize("text", [
    "tests/kernel/test_doc_paths.py", "tests/kernel/", "tests/kernel/test_<module>.py",
    "tests/kernel/test_doc_paths.py::test_a_wrong_path_is_reported", "tests/support/smtp.running_smtp_server",
])
def test_a_right_path_passes(text):
    assert problem(text) is None
