"""What the soak checks at the end, each a function of what the load generator recorded and what the database
and the SMTP server hold, so each can be tested on its own (tests/ops/test_soak_checks.py)."""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import psycopg

# Each kind of write the load generator makes, and the table its acknowledged id must be found in.
TABLES: Mapping[str, str] = {
    "workspace": "workspace.workspace",
    "invitation": "workspace.invitation",
    "todo": "social.todos",
    "group": "social.groups",
}


@dataclass(frozen=True)
class Ack:
    """A write the service acknowledged (2xx with the new row's id)."""

    kind: str
    id: str


def missing_writes(connection: psycopg.Connection, acknowledged: Iterable[Ack]) -> list[Ack]:
    """The acknowledged writes whose row is not in the database (on the primary: what was committed)."""
    by_kind: dict[str, list[Ack]] = defaultdict(list)
    for ack in acknowledged:
        by_kind[ack.kind].append(ack)
    lost: list[Ack] = []
    for kind, acks in sorted(by_kind.items()):
        table = TABLES[kind]
        ids = [uuid.UUID(a.id) for a in acks]
        found = {str(row[0]) for row in connection.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s)", (ids,)).fetchall()}  # noqa: S608 - table from TABLES
        lost.extend(a for a in acks if str(uuid.UUID(a.id)) not in found)
    return lost


@dataclass(frozen=True)
class Mail:
    """One message as the SMTP server received it."""

    to: str
    message_id: str


@dataclass(frozen=True)
class MailVerdict:
    expected: int
    received: int
    duplicates: int  # deliveries beyond the first of one message
    never_received: list[str]  # addresses an acknowledged invitation was sent to that got nothing
    split: list[str]  # addresses that got several messages with different Message-IDs

    @property
    def ok(self) -> bool:
        return not self.never_received and not self.split


def check_mail(expected_addresses: Iterable[str], received: Sequence[Mail]) -> MailVerdict:
    """Every expected address (one invitation each, a unique address) received at least once; every repeat
    delivery to it carries the same Message-ID as the first (a retried send, not a second message)."""
    expected = sorted(set(expected_addresses))
    ids_by_address: dict[str, set[str]] = defaultdict(set)
    count_by_id: dict[str, int] = defaultdict(int)
    for mail in received:
        ids_by_address[mail.to.lower()].add(mail.message_id)
        count_by_id[mail.message_id] += 1
    return MailVerdict(
        expected=len(expected), received=len(received),
        duplicates=sum(n - 1 for n in count_by_id.values()),
        never_received=[a for a in expected if not ids_by_address.get(a.lower())],
        split=sorted(a for a, ids in ids_by_address.items() if len(ids) > 1),
    )


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def rss_within(start_kib: int, end_kib: int, *, factor: float, slack_kib: int) -> bool:
    """The stated RSS bound: the end at most `factor` times the start plus `slack_kib`."""
    return end_kib <= start_kib * factor + slack_kib
