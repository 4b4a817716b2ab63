"""calendarView delta: state tokens kept on the server (as Exchange keeps its sync states), rounds paged by skip
tokens, resets (410 / syncStateNotFound), replays and duplicates.

A round is computed when it starts (the first request, or the request with a delta token) and its pages are cut from
that list, rendered when served. Its final delta token remembers the window and what the client was given, so the
next round reports what changed since: new and changed items, and `@removed` for items that are gone from the
window, deleted or not (an occurrence deleted silently is left out: Graph never mentions it).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.support.graph.calendar import Instance, make_id, parse_id
from tests.support.graph.mailbox import Item, Mailbox


@dataclass
class SyncState:
    mailbox_id: str
    window: tuple[datetime, datetime]
    seq: int
    known: dict[str, Any]  # immutable id -> fingerprint of what the client was given
    generation: int


@dataclass
class Round:
    mailbox_id: str
    window: tuple[datetime, datetime]
    entries: list[tuple[str, Item | None]]  # (immutable id, item; None: @removed)
    final: SyncState
    generation: int
    offset: int = 0


@dataclass(frozen=True)
class DeltaReset:
    """What a token of an invalidated generation gets (Graph: 410 Gone; `syncStateNotFound` in any case)."""

    status: int = 410
    code: str = "SyncStateNotFound"
    message: str = "The sync state generation is not found; generation=149;[highest=157][157][155][156]."
    location: bool = True


class UnknownToken(LookupError):
    def __init__(self, mailbox_id: str | None, reset: DeltaReset) -> None:
        super().__init__(reset.code)
        self.mailbox_id, self.reset = mailbox_id, reset


@dataclass
class DeltaEngine:
    states: dict[str, SyncState] = field(default_factory=dict)
    rounds: dict[str, Round] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    resets: dict[str, DeltaReset] = field(default_factory=dict)
    last_round: dict[str, list[tuple[str, Item | None]]] = field(default_factory=dict)
    replay_next: set[str] = field(default_factory=set)

    def invalidate(self, mailbox: Mailbox, reset: DeltaReset) -> None:
        """Every delta and skip token of the mailbox handed out so far now fails with `reset`."""
        self.generations[mailbox.id] = self.generations.get(mailbox.id, 0) + 1
        self.resets[mailbox.id] = reset

    def expire_skip_tokens(self, mailbox: Mailbox) -> None:
        """Rounds in progress can no longer be continued (Graph: old skip tokens fail mid-round)."""
        for token in [t for t, r in self.rounds.items() if r.mailbox_id == mailbox.id]:
            del self.rounds[token]

    def _generation(self, mailbox_id: str) -> int:
        return self.generations.get(mailbox_id, 0)

    def _check(self, mailbox_id: str, generation: int) -> None:
        if generation != self._generation(mailbox_id):
            raise UnknownToken(mailbox_id, self.resets.get(mailbox_id, DeltaReset()))

    def begin(self, mailbox: Mailbox, window: tuple[datetime, datetime] | None, delta_token: str | None) -> str:
        """Start a round (initial when `delta_token` is None) and return its skip token."""
        previous = None
        if delta_token:
            previous = self.states.get(delta_token)
            if previous is None or previous.mailbox_id != mailbox.id:
                raise UnknownToken(mailbox.id, self.resets.get(mailbox.id, DeltaReset()))
            self._check(mailbox.id, previous.generation)
            window = previous.window
        assert window is not None
        current = {mailbox.id_of(item): item for item in mailbox.window(*window)}
        fingerprints = {key: _fingerprint(item) for key, item in current.items()}
        entries = self._changes(mailbox, current, fingerprints, previous)
        if previous is not None and mailbox.id in self.replay_next:
            self.replay_next.discard(mailbox.id)
            entries = self.last_round.get(mailbox.id, []) + entries
        self.last_round[mailbox.id] = list(entries)
        if mailbox.delta_duplicates:
            entries = entries + entries
        generation = self._generation(mailbox.id)
        final = SyncState(mailbox.id, window, mailbox.seq, fingerprints, generation)
        token = secrets.token_urlsafe(24)
        self.rounds[token] = Round(mailbox.id, window, entries, final, generation)
        return token

    def _changes(self, mailbox: Mailbox, current: dict[str, Item], fingerprints: dict[str, Any],
                 previous: SyncState | None) -> list[tuple[str, Item | None]]:
        if previous is None:
            return [(key, item) for key, item in current.items()]
        entries: list[tuple[str, Item | None]] = [
            (key, item) for key, item in current.items() if previous.known.get(key) != fingerprints[key]]
        for key in previous.known:
            if key not in current and not _silently_deleted(mailbox, key):
                entries.append((key, None))
        if mailbox.removed_for_changes_outside_window:
            for event in mailbox.changed_since(previous.seq):
                key = mailbox.id_of(event)
                if not event.is_series and key not in current and key not in previous.known:
                    entries.append((key, None))
        return entries

    def page(self, skip_token: str, size: int) -> tuple[list[tuple[str, Item | None]], str | None, str | None]:
        """The next page of a round: (entries, next skip token or None, delta token when the round ends)."""
        round_ = self.rounds.pop(skip_token, None)
        if round_ is None:
            raise UnknownToken(None, DeltaReset())
        self._check(round_.mailbox_id, round_.generation)
        chunk = round_.entries[round_.offset:round_.offset + size]
        round_.offset += len(chunk)
        if round_.offset < len(round_.entries):
            token = secrets.token_urlsafe(24)
            self.rounds[token] = round_
            return chunk, token, None
        delta_token = secrets.token_urlsafe(24)
        self.states[delta_token] = round_.final
        return chunk, None, delta_token

    def round_mailbox(self, token: str, *, skip: bool) -> str | None:
        holder = self.rounds.get(token) if skip else self.states.get(token)
        return holder.mailbox_id if holder else None

    def window_of(self, token: str) -> tuple[datetime, datetime] | None:
        holder = self.rounds.get(token) or self.states.get(token)
        return holder.window if holder else None


def _fingerprint(item: Item) -> Any:
    if isinstance(item, Instance):
        return item.fingerprint()
    return ("event", item.version, item.start, item.end)


def _silently_deleted(mailbox: Mailbox, key: str) -> bool:
    parsed = parse_id(key)
    if parsed is None or parsed.original_start is None:
        return False
    master = mailbox.events.get(parsed.key)
    return bool(master and master.deleted_occurrences.get(parsed.original_start))


def public_id(mailbox: Mailbox, key: str, *, immutable: bool) -> str:
    """An id of the delta state (kept as ImmutableId) in the form the request asked for."""
    if immutable:
        return key
    parsed = parse_id(key)
    assert parsed is not None
    event = mailbox.events.get(parsed.key)
    return make_id(parsed.key, immutable=False, generation=event.generation if event else 0,
                   original_start=parsed.original_start)
