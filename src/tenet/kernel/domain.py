"""What a domain declares about itself, once, to the composition root (`tenet.domains`).

A domain package writes one `domain.py` holding a `Domain`; the composition root lists the declarations in
lock order and everything that needs "all domains" reads that list: the app (routers, OpenAPI tags),
the worker (job blueprints), Alembic's env (models, schemas), `tenet invariants` (catalog), the event bus
(handlers), identity (permission points) and the tests. The kernel defines this shape and never imports a
domain.

Heavy parts (models, routes, jobs, handlers) are named by module path and imported by `load_domains`
only, so reading a declaration (for instance to compose the settings class) stays cheap and cannot
create an import cycle. Each named module exposes a conventional attribute:

| field | module must expose |
|---|---|
| `api` | `ROUTERS` (sequence of `APIRouter`) and `OPENAPI_TAGS` (sequence of tag dicts) |
| `jobs` | `blueprint` (`procrastinate.Blueprint`) in each module named (one per sub-package, say) |
| `events` | `HANDLERS` (mapping of event class to a handler or a sequence of handlers) |
| `modules` | nothing: they register tables, invariants and state machines when imported |
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from pydantic_settings import BaseSettings

from tenet.kernel import events, permissions


@dataclass(frozen=True)
class Domain:
    name: str
    # The PostgreSQL schema its tables live in (None for a domain without tables).
    schema: str | None = None
    # Its settings section, composed into `tenet.settings.Settings`.
    settings: type[BaseSettings] | None = None
    # Modules imported for what they register: models (tables), invariants, lifecycles.
    modules: tuple[str, ...] = ()
    api: str | None = None
    jobs: tuple[str, ...] = ()
    events: str | None = None
    # Permission points this domain checks, with the system roles that hold each by default.
    permissions: tuple[permissions.PermissionPoint, ...] = ()
    # The rows this domain locks, named for the lock-order documentation (`docs/decisions.md`): a domain
    # may lock rows of domains *after* it in the registry while holding its own, never before.
    locks: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadedDomain:
    """A declaration with its modules imported."""

    declaration: Domain
    routers: tuple[Any, ...] = ()
    openapi_tags: tuple[Mapping[str, Any], ...] = ()
    # One per module of `jobs`; the worker registers them all under the domain's name.
    blueprints: tuple[Any, ...] = ()
    handlers: Mapping[type[events.Event], tuple[events.Handler, ...]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.declaration.name


def _module(path: str) -> ModuleType:
    return importlib.import_module(path)


def _attribute(module: ModuleType, name: str, owner: Domain) -> Any:
    try:
        return getattr(module, name)
    except AttributeError:
        raise TypeError(f"domain {owner.name}: module {module.__name__} must define {name}") from None


def load(declaration: Domain) -> LoadedDomain:
    """Import a domain's modules and collect what they expose."""
    for path in declaration.modules:
        _module(path)
    routers: tuple[Any, ...] = ()
    tags: tuple[Mapping[str, Any], ...] = ()
    if declaration.api:
        api = _module(declaration.api)
        routers = tuple(_attribute(api, "ROUTERS", declaration))
        tags = tuple(_attribute(api, "OPENAPI_TAGS", declaration))
    blueprints = tuple(_attribute(_module(path), "blueprint", declaration) for path in declaration.jobs)
    handlers: dict[type[events.Event], tuple[events.Handler, ...]] = {}
    if declaration.events:
        raw: Mapping[type[events.Event], events.Handler | Sequence[events.Handler]] = _attribute(
            _module(declaration.events), "HANDLERS", declaration)
        for event_type, handler in raw.items():
            handlers[event_type] = tuple(handler) if isinstance(handler, Sequence) else (handler,)
    return LoadedDomain(declaration, routers, tags, blueprints, handlers)


def check_declarations(domains: Iterable[Domain]) -> None:
    """Refuse a registry that two domains would both own a name, schema or permission point of."""
    seen_names: set[str] = set()
    seen_schemas: set[str] = set()
    seen_points: set[str] = set()
    for domain in domains:
        if domain.name in seen_names:
            raise ValueError(f"domain {domain.name} is declared twice")
        seen_names.add(domain.name)
        if domain.schema is not None:
            if domain.schema in seen_schemas:
                raise ValueError(f"schema {domain.schema} is claimed by two domains")
            seen_schemas.add(domain.schema)
        for point in domain.permissions:
            if point.name in seen_points:
                raise ValueError(f"permission point {point.name} is declared by two domains")
            seen_points.add(point.name)


# The kernel declares itself like a domain: its tables (audit log, idempotency keys, rate limits, mail
# outbox, job runs), its own invariants and its periodic clean-up jobs.
KERNEL = Domain(
    name="kernel",
    schema="kernel",
    modules=("tenet.kernel.models", "tenet.kernel.rules"),
    jobs=("tenet.kernel.tasks",),
)
