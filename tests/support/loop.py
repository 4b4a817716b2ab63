"""Proof that heavy work runs off the event loop, without timing it.

The work is paused at its first call of a known function until the test, on the event loop, has had the answer of
another request (`/healthz`). Work running in a worker thread waits there while the loop answers. Work running on
the event loop holds the loop while it waits, so the answer cannot come: the pause gives up after `GIVE_UP` seconds
(a guard against a hung test, not a measure) and reports that it was never released.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

GIVE_UP = 20.0
T = TypeVar("T")
P = TypeVar("P")


@dataclass
class Pause:
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    released: bool | None = None  # once entered: whether the release came while the call waited
    on_loop: bool | None = None  # once entered: whether the paused call ran on the event loop's thread


@contextmanager
def pausing(owner: Any, name: str) -> Iterator[Pause]:
    """Pause the first call of `owner.name` (a function on a class or module) inside the block."""
    own = name in vars(owner)
    original = getattr(owner, name)
    pause = Pause()
    lock = threading.Lock()
    loop_thread = threading.get_ident()

    def paused(*args: Any, **kwargs: Any) -> Any:
        with lock:
            first = not pause.entered.is_set()
            pause.entered.set()
        if first:
            pause.on_loop = threading.get_ident() == loop_thread
            pause.released = pause.release.wait(GIVE_UP)
        return original(*args, **kwargs)

    setattr(owner, name, paused)
    try:
        yield pause
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


async def answered_while_paused(pause: Pause, heavy: Awaitable[T], probe: Callable[[], Awaitable[P]]
                                ) -> tuple[T, P]:
    """Start `heavy`, wait until it reaches the pause, run `probe` on the loop, then let `heavy` finish. Fails unless
    the probe answered while the heavy work was paused (so the work was not holding the loop)."""
    task = asyncio.ensure_future(heavy)
    entered = await anyio.to_thread.run_sync(pause.entered.wait, GIVE_UP)
    answer = await probe()
    pause.release.set()
    result = await task
    assert entered, "the heavy work never reached the paused call"
    assert pause.released and not pause.on_loop, "the heavy work ran on the event loop and held it"
    return result, answer
