"""The composition root: every domain of Tenet, declared once, in lock order.

Adding a domain is one new package (with its `domain.py`) and one line below. Everything that needs "all
domains" reads this list: the app (routers), the worker (jobs), Alembic (tables, schemas), `tenet
invariants` (catalog), the event bus (handlers, run in this order), identity (permission points), the
settings class and the tests. The kernel never imports this module; only boundaries do (app, worker,
CLI, migrations, tests).

The order is the lock order: a command holding rows of one domain may go on to lock rows of a later
domain (directly or through an event handler), never of an earlier one.
"""

from __future__ import annotations

from functools import cache

from tenet.iam.domain import DOMAIN as IAM
from tenet.kernel import events, permissions
from tenet.kernel.domain import KERNEL, Domain, LoadedDomain, check_declarations, load
from tenet.meetings.domain import DOMAIN as MEETINGS
from tenet.reservations.domain import DOMAIN as RESERVATIONS
from tenet.social.domain import DOMAIN as SOCIAL
from tenet.workspaces.domain import DOMAIN as WORKSPACES

DOMAINS: tuple[Domain, ...] = (
    KERNEL,
    IAM,
    WORKSPACES,
    SOCIAL,
    MEETINGS,
    RESERVATIONS,
)

check_declarations(DOMAINS)


@cache
def load_all() -> tuple[LoadedDomain, ...]:
    """Import every domain's modules and wire its event handlers and permission points (once)."""
    loaded = tuple(load(domain) for domain in DOMAINS)
    for domain in loaded:
        permissions.register(domain.declaration.permissions)
        for event_type, handlers in domain.handlers.items():
            for handler in handlers:
                events.BUS.subscribe(event_type, handler)
    events.BUS.mark_loaded()
    return loaded


def schemas() -> tuple[str, ...]:
    """The PostgreSQL schemas Tenet owns, one per domain that has tables."""
    return tuple(domain.schema for domain in DOMAINS if domain.schema)


def domain_names() -> tuple[str, ...]:
    return tuple(domain.name for domain in DOMAINS)
