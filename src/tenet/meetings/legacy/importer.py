"""`tenet meetings import-sqlite PATH`: the legacy dev.db into Tenet, in the spec's order (§数据迁移与同步: users ->
meeting_series -> meetings -> meeting_required_attendees -> attendances -> templates -> template_attendees ->
audit_logs), one transaction per table batch, after the rows a previous run imported and the file no longer has
are removed (in the reverse order); the meetings' cancellations and deletions come after the attendances, the
removals that had to wait after all tables, then both QR codes of every imported meeting and the fingerprints the
next run compares against. Run it again with a newer file: the result is what a fresh import of that file gives,
except where Tenet changed an imported row since (a conflict, reported, Tenet's version kept).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

from tenet.db.database import Database
from tenet.iam.passwords import Passwords
from tenet.iam.settings import IamSettings
from tenet.kernel.settings import section
from tenet.kernel.statements import statements
from tenet.meetings.legacy import attendances, lists, meetings, others, people
from tenet.meetings.legacy.context import Context, Defaults
from tenet.meetings.legacy.engine import (
    Mapped,
    NoProgress,
    Progress,
    TableRun,
    find_conflicts,
    import_table,
    load_mapping,
    remove_absent,
    store_fingerprints,
)
from tenet.meetings.legacy.qr import stale, store_codes_of
from tenet.meetings.legacy.report import Report
from tenet.meetings.legacy.source import LegacyFile, file_sha256
from tenet.meetings.service import MeetingPolicy
from tenet.meetings.settings import MeetingSettings

RECORD_RUN = """
    INSERT INTO meeting_attendance.legacy_import_runs (file_name, file_sha256, started_at, finished_at, report)
    VALUES (%(name)s, %(sha)s, %(started)s, %(finished)s, %(report)s)"""


def defaults_from(settings: BaseSettings) -> Defaults:
    policy = MeetingPolicy.from_settings(settings)
    own = section(settings, MeetingSettings)
    return Defaults(**vars(policy), guest_retention_days=own.guest_data_retention_days)


async def unusable_password_hash(settings: BaseSettings) -> str:
    """One argon2id hash of a random secret that is thrown away: created accounts cannot sign in with a password
    until one is set for them (IAM-INV-03 wants every stored hash argon2id)."""
    iam = section(settings, IamSettings)
    passwords = Passwords(time_cost=iam.password_hash_time_cost, memory_kib=iam.password_hash_memory_kib)
    return await passwords.hash(secrets.token_urlsafe(32))


def _never(_: Mapped) -> None:
    return None


def _specs(ctx: Context) -> list[tuple[Any, Callable[[Mapped], str | None]]]:
    """The tables in the spec's order, each with why a row of it is never removed (or never, `_never`)."""
    return [(people.Users(ctx), people.kept_because), (meetings.Series(ctx), _never), (meetings.Meetings(ctx), _never),
            (lists.RequiredAttendees(ctx), _never), (attendances.Attendances(ctx), _never),
            (others.Templates(ctx), _never), (lists.TemplateAttendees(ctx), _never),
            (others.AuditLogs(ctx), others.audit_kept_because)]


async def _prepare(db: Database, source: LegacyFile, ctx: Context,
                   report: Report) -> list[tuple[TableRun, Callable[[Mapped], str | None]]]:
    """Each table's mapping and conflicts; then the rows gone from the file removed, in the reverse order, before
    anything is written (a row that now takes the place of a removed one must find it gone)."""
    runs = []
    for spec, kept_because in _specs(ctx):
        run = TableRun(spec, report[spec.name], await load_mapping(db, spec.name), ctx.now)
        await find_conflicts(db, run)
        runs.append((run, kept_because))
    for run, kept_because in reversed(runs):
        await remove_absent(db, run, removable=kept_because, only=set(run.mapping) - source.keys(run.spec.name))
    return runs


async def _run_tables(db: Database, source: LegacyFile, ctx: Context, runs: list[tuple[TableRun, Any]],
                      progress: Progress) -> None:
    for run, _ in runs:
        if run.spec.name == "attendances":
            await meetings.read_statuses(db, ctx)
        await import_table(db, source, run, progress)
        ctx.refused[run.spec.name] = {key for key, _ in run.report.refused}
        if run.spec.name == "attendances":
            meeting_run = runs[2][0]
            await meetings.settle_statuses(db, ctx, meeting_run.report, meeting_run.touched, meeting_run.conflicted)


async def import_file(db: Database, path: Path, *, settings: BaseSettings, now: datetime, dry_run: bool = False,
                      progress: Progress | None = None) -> Report:
    """Import `path` into `db` (whose units of work commit; a dry run passes a database bound to a transaction
    it rolls back). Answers the per-table report."""
    progress = progress or NoProgress()
    source = LegacyFile(path)
    report = Report(dry_run=dry_run)
    ctx = Context(now=now, defaults=defaults_from(settings), password_hash=await unusable_password_hash(settings))
    try:
        runs = await _prepare(db, source, ctx, report)
        await _run_tables(db, source, ctx, runs, progress)
    finally:
        source.close()
    for run, kept_because in reversed(runs):
        await remove_absent(db, run, removable=kept_because)
    meeting_run = runs[2][0]
    live = sorted(f.id for key, f in ctx.meetings.items() if key in meeting_run.kept and f.tenet_status != "DELETED")
    base_url = ctx.defaults.public_base_url
    started = time.monotonic()
    report.qr_codes = await store_codes_of(db, await stale(db, live, base_url=base_url), base_url=base_url, now=now,
                                           progress=progress)
    report.qr_seconds = time.monotonic() - started
    await store_fingerprints(db, [run for run, _ in runs])
    async with db.unit_of_work() as session:
        from psycopg.types.json import Jsonb

        await (await statements(session)).execute(RECORD_RUN, {
            "name": path.name, "sha": file_sha256(path), "started": now, "finished": now,
            "report": Jsonb(report.as_dict())})
    return report
