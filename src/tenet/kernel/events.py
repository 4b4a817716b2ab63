"""Domain events, published and handled inside the publisher's unit of work.

A command that changes something other domains care about (an account deleted, a workspace deleted)
publishes an event with `await publish(session, event)`. Every handler subscribed to that event class runs
right there, awaited in turn, on the same session: its writes commit or roll back with the command, and a
handler may refuse the whole command by raising a `DomainError` (workspaces refuses to delete the last
owner of a workspace). There is no queue and no "eventually": what must hold together holds at commit.

Handlers run in the order of the domain registry (`tenet.domains.DOMAINS`), which is also the lock order:
identity (accounts) before workspaces before social groups before meetings before reservations. The
publisher holds the locks of its own rows when it publishes; a handler may lock rows of its own domain
(which comes later in the order) but never rows of a domain before it, so two commands can never wait on
each other in a cycle.

Subscriptions come only from the domains' declarations, wired by the composition root. Publishing before
the composition root loaded raises instead of silently reaching no handler: an entry point that forgot to
load the domains fails loudly rather than skipping another domain's rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession


class Event:
    """Base of every domain event: a frozen dataclass named in the past tense (`AccountDeleted`)."""


Handler = Callable[[AsyncSession, Any], Awaitable[None]]


class EventBus:
    def __init__(self) -> None:
        self._handlers: dict[type[Event], list[Handler]] = {}
        self._loaded = False

    def subscribe(self, event_type: type[Event], handler: Handler) -> None:
        handlers = self._handlers.setdefault(event_type, [])
        if handler not in handlers:
            handlers.append(handler)

    def mark_loaded(self) -> None:
        self._loaded = True

    @property
    def loaded(self) -> bool:
        return self._loaded

    def handlers(self, event_type: type[Event]) -> tuple[Handler, ...]:
        return tuple(self._handlers.get(event_type, ()))

    async def publish(self, session: AsyncSession, event: Event) -> None:
        if not self._loaded:
            raise RuntimeError(f"{type(event).__name__} published before the domains were loaded: "
                               "call tenet.domains.load() at the boundary (app, worker, CLI, tests)")
        for handler in self._handlers.get(type(event), ()):
            await handler(session, event)


BUS = EventBus()


async def publish(session: AsyncSession, event: Event) -> None:
    """Run every handler of `event` in the caller's unit of work, in lock order."""
    await BUS.publish(session, event)
