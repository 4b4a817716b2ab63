"""The invariant catalog is executable (INVARIANTS.md §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from tenet.kernel.invariants import all_invariants, check, markdown
from tenet.kernel.transitions import STATE_MACHINES
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _invariant_marks(node: ast.AST) -> list[ast.Call]:
    """Every `<...>.mark.invariant(...)` call inside `node` (a decorator, including pytest.param(marks=...))."""
    return [call for call in ast.walk(node) if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "invariant" and isinstance(call.func.value, ast.Attribute)
            and call.func.value.attr == "mark"]


def _test_modules() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(TESTS.rglob("test_*.py"))]


def tagged_ids(modules: list[tuple[str, ast.Module]] | None = None) -> dict[str, list[str]]:
    """invariant id -> the tests tagging it, read statically so any subset of the suite can run this. Only a
    mark on the test function itself counts (written ids, not computed ones): a module's `pytestmark` or a
    class decorator would tag every test beside the ones that prove the rule."""
    found: dict[str, list[str]] = {}
    for module, tree in _test_modules() if modules is None else modules:
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test"):
                continue
            for decorator in node.decorator_list:
                for mark in _invariant_marks(decorator):
                    for arg in mark.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            found.setdefault(arg.value, []).append(f"{module}::{node.name}")
    return found


def test_every_invariant_has_a_tagged_test():
    tagged = tagged_ids()
    untested = [i.id for i in all_invariants() if i.id not in tagged]
    assert not untested, f"invariants without a test tagged @pytest.mark.invariant(id): {untested}"


def test_invariant_tags_are_per_test():
    """No module-wide or class-wide invariant tag: each test names only the rules it proves."""
    wide = []
    for module, tree in _test_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                    for t in node.targets):
                wide += [f"{module}: pytestmark" for _ in _invariant_marks(node.value)]
            elif isinstance(node, ast.ClassDef):
                wide += [f"{module}::{node.name}" for d in node.decorator_list for _ in _invariant_marks(d)]
    assert not wide, f"tag the tests that prove each rule instead: {wide}"


def test_the_tag_reader_sees_marks_on_tests_only():
    """The reader above can fail: a module-wide tag is not counted, a test's own tag is."""
    tree = ast.parse(
        "import pytest\n"
        "pytestmark = pytest.mark.invariant('X-INV-01')\n"
        "@pytest.mark.invariant('X-INV-02')\n"
        "class TestGroup:\n"
        "    @pytest.mark.invariant('X-INV-03')\n"
        "    async def test_one(self): ...\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.invariant('X-INV-04'))])\n"
        "def test_two(x): ...\n"
        "def helper(): ...\n")
    assert tagged_ids([("m", tree)]) == {"X-INV-03": ["m::test_one"], "X-INV-04": ["m::test_two"]}


def test_every_tag_names_a_registered_invariant():
    known = {i.id for i in all_invariants()}
    unknown = {i: files for i, files in tagged_ids().items() if i not in known}
    assert not unknown, f"tests tag unknown invariant ids: {unknown}"


async def test_every_named_database_object_exists(db):
    async with db.read_only() as session:
        names = set((await session.execute(text(
            "SELECT conname FROM pg_constraint UNION SELECT relname FROM pg_class "
            "UNION SELECT tgname FROM pg_trigger"))).scalars())
    missing = {i.id: [n for n in i.db if n not in names] for i in all_invariants()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"invariants name database objects the schema lacks: {missing}"


async def test_every_detector_runs_and_finds_nothing_on_a_fresh_database(db):
    async with db.read_only() as session:
        violations = await check(await session.connection())
    assert violations == [], [(v.invariant.id, v.sample) for v in violations]


def test_catalog_in_docs_is_up_to_date():
    """docs/invariants.md is generated (`tenet invariants export`); it must match the code."""
    assert (ROOT / "docs" / "invariants.md").read_text(encoding="utf-8") == markdown(all_invariants()), (
        "run `tenet invariants export` and commit docs/invariants.md"
    )


def test_state_machine_diagrams_in_docs_are_up_to_date():
    document = (ROOT / "docs" / "state-machines.md").read_text(encoding="utf-8")
    for machine in STATE_MACHINES.values():
        if machine.name.startswith("test."):
            continue
        assert machine.mermaid() in document, f"{machine.name}: run `tenet invariants export`"


def test_cli_check_is_clean_on_a_migrated_database(migrated_database):
    url = migrated_database("cli_clean")
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 0, result.stderr
    assert f"all {len(all_invariants())} invariants hold" in result.stderr


def test_cli_check_names_a_violated_invariant(migrated_database):
    url = migrated_database("cli_dirty")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ALTER TABLE kernel.audit_log DISABLE TRIGGER audit_log_append_only")
    result = run_cli("invariants", "check", "--database-url", url)
    assert result.returncode == 1
    assert "KERNEL-INV-01" in result.stderr


def test_cli_list_prints_every_id():
    result = run_cli("invariants", "list", env_extra={"COLUMNS": "250"})
    assert result.returncode == 0, result.stderr
    for invariant in all_invariants():
        assert invariant.id in result.stdout


@pytest.mark.parametrize("bad_id", ["WS-03", "ws-INV-03", "WS-INV-3"])
def test_invariant_ids_are_checked(bad_id):
    from tenet.kernel.invariants import Invariant

    with pytest.raises(ValueError):
        Invariant(id=bad_id, statement="s", scope="s", counterexample="c", db=("x",), app="a", error_code=None,
                  concurrency="c", detector="SELECT 1 WHERE false")
