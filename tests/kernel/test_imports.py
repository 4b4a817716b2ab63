"""The kernel knows no domain; domains reach the rest of the service only through the kernel.

Walks the import statements of every module under src/tenet (without importing anything) and follows them
transitively: a kernel module that imports a domain, or a module that imports every domain (the
composition root, the composed settings, the app), fails here. Domains may import the kernel and each
other's services and events, never the composition root.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from tenet.domains import DOMAINS

SRC = Path(__file__).resolve().parents[2] / "src"
# Modules that import every domain: only boundaries may import them.
COMPOSITION = {"tenet.domains", "tenet.settings", "tenet.app", "tenet.cli", "tenet.worker", "tenet.demo",
               "tenet.__main__"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in (SRC / "tenet").rglob("*.py") if "migrations" not in p.parts}


def _resolve(name: str) -> str | None:
    """The tenet module (or package) an import names, if it is one of ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@cache
def direct_imports(module: str) -> frozenset[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            resolved = _resolve(name) if name.startswith("tenet") else None
            if resolved and resolved != module:
                found.add(resolved)
    return frozenset(found)


def reachable(module: str) -> set[str]:
    seen: set[str] = set()
    stack = [module]
    while stack:
        for imported in direct_imports(stack.pop()):
            if imported not in seen:
                seen.add(imported)
                stack.append(imported)
    return seen


def _domain_packages() -> set[str]:
    packages = set()
    for domain in DOMAINS:
        for path in (*domain.modules, domain.api, *domain.jobs, domain.events):
            if path and not path.startswith("tenet.kernel"):
                packages.add(".".join(path.split(".")[:2]))
    return packages


def _in(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


KERNEL_MODULES = sorted(m for m in MODULES if m.startswith("tenet.kernel"))


@pytest.mark.parametrize("module", KERNEL_MODULES)
def test_the_kernel_reaches_no_domain(module):
    reached = reachable(module)
    domains = sorted(m for m in reached if _in(m, _domain_packages()))
    composition = sorted(reached & COMPOSITION)
    assert not domains and not composition, f"{module} reaches {domains + composition}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _in(m, _domain_packages())))
def test_domains_do_not_import_the_composition_root(module):
    composition = sorted(direct_imports(module) & COMPOSITION)
    assert not composition, f"{module} imports {composition}: read your settings section, not the composed class"


def test_the_walk_finds_imports():
    # The test above must be able to fail: the composition root imports every domain's declaration.
    assert {"tenet.iam.domain", "tenet.workspaces.domain"} <= direct_imports("tenet.domains")
    assert "tenet.workspaces.invitations" in reachable("tenet.workspaces.api")
    assert _domain_packages() >= {"tenet.iam", "tenet.workspaces"}
