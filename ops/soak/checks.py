"""What the soak checks at the end, each a function of what the load generator recorded and what the database
and the SMTP server hold, so each can be tested on its own (tests/ops/test_soak_checks.py)."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx
import psycopg

# Each kind of write the load generator makes: the table its acknowledged id must be found in, and the id's type.
TABLES: Mapping[str, tuple[str, str]] = {
    "workspace": ("workspace.workspace", "uuid"),
    "invitation": ("workspace.invitation", "uuid"),
    "todo": ("social.todos", "uuid"),
    "group": ("social.groups", "uuid"),
    "attendance": ("meeting_attendance.attendances", "uuid"),
    "attachment": ("meeting_attendance.meeting_agenda_item_attachments", "uuid"),
    "ai_batch": ("reservation.workflow_reservation_ai_batch", "bigint"),
}


@dataclass(frozen=True)
class Ack:
    """A write the service acknowledged (2xx with the new row's id)."""

    kind: str
    id: str


@dataclass(frozen=True)
class Upload:
    """An acknowledged upload: the file's id, the SHA-256 of the bytes the client sent, where it downloads."""

    id: str
    sha256: str
    download_url: str


def _key(kind: str, value: str) -> str:
    return str(uuid.UUID(value)) if TABLES[kind][1] == "uuid" else str(int(value))


def missing_writes(connection: psycopg.Connection, acknowledged: Iterable[Ack]) -> list[Ack]:
    """The acknowledged writes whose row is not in the database (on the primary: what was committed)."""
    by_kind: dict[str, list[Ack]] = defaultdict(list)
    for ack in acknowledged:
        by_kind[ack.kind].append(ack)
    lost: list[Ack] = []
    for kind, acks in sorted(by_kind.items()):
        table, id_type = TABLES[kind]
        ids = [_key(kind, a.id) for a in acks]
        found = {str(row[0]) for row in connection.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s::{id_type}[])", (ids,)).fetchall()}  # noqa: S608 - TABLES
        lost.extend(a for a in acks if _key(kind, a.id) not in found)
    return lost


def unacknowledged_uploads(connection: psycopg.Connection, items: Sequence[str], uploads: Sequence[Upload]) -> int:
    """Files stored on the soak's agenda items that no acknowledged upload names: a retried upload stored twice
    shows here (an upload the client gave up on may too; the caller compares with those)."""
    acknowledged = [uuid.UUID(u.id) for u in uploads]
    row = connection.execute(
        "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_attachments "
        "WHERE agenda_item_id = ANY(%s::uuid[]) AND NOT id = ANY(%s::uuid[])", ([uuid.UUID(i) for i in items],
                                                                                 acknowledged)).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class SlotVerdict:
    """The automation slots the soak expected to run: each exactly once, succeeded, with one digest message."""

    expected: int
    ran_once: int
    missing: list[str]  # job ids whose slot has no run
    not_succeeded: list[str]  # job ids whose run did not succeed (status)
    effects_not_once: list[str]  # job ids whose run wrote other than one inbox message

    @property
    def ok(self) -> bool:
        return not self.missing and not self.not_succeeded and not self.effects_not_once


def check_slots(connection: psycopg.Connection, slots: Sequence[tuple[str, datetime]]) -> SlotVerdict:
    """Each (job id, slot) has one run for that slot (the unique key makes more impossible), succeeded, whose
    effect is exactly one inbox message (a digest; a run executed twice would have written two)."""
    runs = {(str(job), at): (status, effects, f"attempt {attempt}, {code}: {message}")
            for job, at, status, effects, attempt, code, message in connection.execute(
                "SELECT r.job_id, r.scheduled_at, r.status, (SELECT count(*) FROM social.inbox_messages m "
                "WHERE m.automation_run_id = r.id), r.attempt, r.error_code, left(r.error_message, 120) "
                "FROM social.automation_runs r WHERE r.job_id = ANY(%s::uuid[])",
                ([uuid.UUID(job) for job, _ in slots],)).fetchall()}
    missing, failed, effects = [], [], []
    for job, slot in slots:
        found = runs.get((job, slot))
        if found is None:
            missing.append(job)
        elif found[0] != "succeeded":
            failed.append(f"{job} ({found[0]}, {found[2]})")
        elif found[1] != 1:
            effects.append(f"{job} ({found[1]} messages)")
    return SlotVerdict(expected=len(slots), ran_once=len(slots) - len(missing) - len(failed) - len(effects),
                       missing=missing, not_succeeded=failed, effects_not_once=effects)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str


def check_runs_cut(connection: psycopg.Connection, runs: Sequence[str]) -> Verdict:
    """The automation runs a killed worker was executing: each finished, succeeded, on a later attempt (the
    killed one's transaction was rolled back, the run recovered after its lease and claimed again), with
    exactly one digest message."""
    distinct = sorted(set(runs))  # a run cut by one kill may be cut again by a later one
    rows = connection.execute(
        "SELECT r.id, r.status, r.attempt, (SELECT count(*) FROM social.inbox_messages m "
        "WHERE m.automation_run_id = r.id), r.error_code, left(r.error_message, 120) "
        "FROM social.automation_runs r WHERE r.id = ANY(%s::uuid[])", ([uuid.UUID(r) for r in distinct],)).fetchall()
    wrong = [f"{run} ({status}, attempt {attempt}, {effects} messages, last error {code}: {message})"
             for run, status, attempt, effects, code, message in rows
             if status != "succeeded" or attempt < 2 or effects != 1]
    absent = len(distinct) - len(rows)
    return Verdict(not wrong and not absent,
                   f"{len(rows) - len(wrong)} succeeded on a later attempt with one digest each"
                   f"{'; ' + ', '.join(wrong[:3]) if wrong else ''}{f'; {absent} not found' if absent else ''}")


ABANDONED_PREFIX = "abandoned:"  # kernel.jobs.ABANDONED: a stalled job put back in the queue


def abandoned_jobs(connection: psycopg.Connection) -> Verdict:
    """Runs of jobs whose worker stopped (kernel.job_run closed as abandoned by the stalled-job recovery): each
    job ran again afterwards and succeeded (the same procrastinate job retried, or its periodic next tick)."""
    rows = connection.execute(
        "SELECT a.job_name, a.procrastinate_job_id, EXISTS (SELECT 1 FROM kernel.job_run b WHERE "
        "b.job_name = a.job_name AND b.status = 'succeeded' AND b.started_at > a.started_at) "
        "FROM kernel.job_run a WHERE a.error LIKE %s", (ABANDONED_PREFIX + "%",)).fetchall()
    not_rerun = [f"{name} #{job}" for name, job, again in rows if not again]
    return Verdict(not not_rerun, f"{len(rows)} ({', '.join(sorted({r[0] for r in rows})) or 'none'}), "
                                  f"{len(rows) - len(not_rerun)} ran again and succeeded"
                                  f"{'; not again: ' + ', '.join(not_rerun[:3]) if not_rerun else ''}")


async def downloads_differ(client: httpx.AsyncClient, admin: tuple[str, str], uploads: Sequence[Upload]) -> list[str]:
    """Each acknowledged upload downloaded by an administrator through `client` (the load balancer: so from
    either host): the ids whose bytes do not hash to what the client sent."""
    differ: list[str] = []
    token = (await client.post("/api/v1/auth/token", data={"grant_type": "password", "username": admin[0],
                                                           "password": admin[1]})).json()["access_token"]
    for upload in uploads:
        response = await client.get(upload.download_url, headers={"Authorization": f"Bearer {token}"})
        if response.status_code != 200 or hashlib.sha256(response.content).hexdigest() != upload.sha256:
            differ.append(f"{upload.id} ({response.status_code})")
    return differ


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
