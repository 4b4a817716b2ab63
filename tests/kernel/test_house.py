"""One house for every domain (issue 23; ARCHITECTURE.md "Layout", docs/kernel.md §1): the skeleton and the
one way to run SQL, checked on the source without importing it (like tests/kernel/test_imports.py).

- routes live in `api` modules (`<domain>/api.py`, a package `<domain>/api/`, or `<sub>/api.py`); no SQL
  in them; no route module imports another;
- queries (`queries.py`) import no command module (a module with a function taking `session` first);
- no SQLAlchemy `text(":name")` statement and no placeholder translator in domain code: commands use the
  ORM or `kernel.statements`, reads the read path, both with psycopg's `%(name)s`;
- no function over 80 lines and no file over 800 outside migrations;
- routes name their caller `principal`.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from tenet.domains import DOMAINS
from tests.kernel.test_imports import MODULES, direct_imports

SRC = Path(__file__).resolve().parents[2] / "src"
DOMAIN_PACKAGES = sorted({f"tenet.{d.name}" for d in DOMAINS if d.name != "kernel"})
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 800
# A statement in a string: an uppercase SQL verb followed by what it works on.
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w[\w.]*\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS\s*\()",
                 re.S)
# SQLAlchemy's named bind (`:name`), not a PostgreSQL cast (`::text`) or a time (`09:00`).
COLON_BIND = re.compile(r"(?<![:\w]):[A-Za-z_]\w*")


def _in_domain(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in DOMAIN_PACKAGES)


def _is_route_module(module: str) -> bool:
    parts = module.split(".")
    return "api" in parts[2:] and _in_domain(module)


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def _strings(module: str) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(_tree(module))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _is_command_module(module: str) -> bool:
    """A module with a public function whose first parameter is the unit of work's `session`."""
    for node in _tree(module).body:
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and not node.name.startswith("_"):
            arguments = node.args.posonlyargs + node.args.args
            if arguments and arguments[0].arg == "session":
                return True
    return False


DOMAIN_MODULES = sorted(m for m in MODULES if _in_domain(m))
ROUTE_MODULES = sorted(m for m in DOMAIN_MODULES if _is_route_module(m))
QUERY_MODULES = sorted(m for m in DOMAIN_MODULES if m.rsplit(".", 1)[-1] == "queries")


def test_every_domain_declares_its_routes_in_an_api_module():
    for domain in DOMAINS:
        if domain.api is not None:
            assert domain.api == f"tenet.{domain.name}.api", domain
    legacy = [m for m in DOMAIN_MODULES if m.rsplit(".", 1)[-1].startswith("routes")]
    assert legacy == [], "routes live in `api` modules, not routes*.py"


@pytest.mark.parametrize("module", ROUTE_MODULES)
def test_a_route_module_holds_no_sql(module):
    statements = [(line, text[:60]) for line, text in _strings(module) if SQL.search(text)]
    assert statements == [], f"{module}: SQL belongs in the domain's queries.py or its commands"
    # The session's type for an annotation is all a route may take from the database layers.
    imported = {name for name in _external_imports(module) if name != "sqlalchemy.ext.asyncio"}
    assert not {"sqlalchemy", "psycopg"} & {name.split(".")[0] for name in imported}, module


@pytest.mark.parametrize("module", ROUTE_MODULES)
def test_a_route_module_imports_no_other_route_module(module):
    others = {m for m in direct_imports(module) if _is_route_module(m) and m != module and _defines_routes(m)}
    if MODULES[module].name == "__init__.py":  # a domain's api package collects its (sub-packages') routers
        domain = ".".join(module.split(".")[:2])
        others = {m for m in others if not m.startswith(domain + ".")}
    assert others == set(), module


@pytest.mark.parametrize("module", QUERY_MODULES)
def test_queries_import_no_command(module):
    commands = sorted(m for m in direct_imports(module) if _in_domain(m) and _is_command_module(m))
    assert commands == [], f"{module} reads; it must not depend on commands"


@pytest.mark.parametrize("module", DOMAIN_MODULES)
def test_sql_is_written_one_way(module):
    """No `text(":x")` statement (the ORM or kernel.statements instead) and no translation of placeholders."""
    found = []
    for node in ast.walk(_tree(module)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if name == "text" and any(COLON_BIND.search(t) for t in texts):
            found.append((node.lineno, "text() with a :name bind"))
        if name == "sub" and any("%\\(" in t or "%(" in t for t in texts):
            found.append((node.lineno, "a placeholder translator"))
    assert found == [], module


@pytest.mark.parametrize("path", sorted(p for p in (SRC / "tenet").rglob("*.py") if "migrations" not in p.parts),
                         ids=lambda p: str(p.relative_to(SRC)))
def test_functions_and_files_stay_short(path):
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") <= MAX_FILE_LINES, f"split {path.name}: {text.count(chr(10))} lines"
    long = [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == [], f"{path.name}: functions over {MAX_FUNCTION_LINES} lines"


def test_routes_name_their_caller_principal(app):
    """The caller is `principal` in every route (one name throughout; commands take `principal_id`)."""
    from tenet.iam.auth import Authenticated

    misnamed = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            misnamed += [(route.path, route.endpoint.__name__, dependency.name)
                         for dependency in route.dependant.dependencies
                         if isinstance(dependency.call, Authenticated) and dependency.name != "principal"]
    assert misnamed == []


def _external_imports(module: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def _defines_routes(module: str) -> bool:
    """A module with a function decorated `@<router>.get(...)` (or post, put, patch, delete)."""
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and target.attr in ("get", "post", "put", "patch", "delete"):
                    return True
    return False
