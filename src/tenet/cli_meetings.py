"""`tenet meetings ...` (issue 20): import-sqlite, regenerate-qr and legacy-sample over tenet.meetings.legacy.
Progress bars on stderr (rich), the report on stdout; exit 1 when the invariants check after an import is not
clean, 2 for a file that is not a legacy dev.db or a meeting that does not exist."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

meetings_app = typer.Typer(help="Meeting attendance: the legacy SQLite import, QR codes, sample legacy files.")
console = Console(stderr=True)


class Bars:
    """engine.Progress over one rich progress display: a bar per table."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None

    def start(self, table: str, total: int) -> None:
        self._task = self._progress.add_task(table, total=total)

    def advance(self, rows: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, rows)


@contextmanager
def _bars() -> Iterator[Bars]:
    with Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        yield Bars(progress)


# One import at a time (a transaction-level advisory lock of the run's own connection): two runs at once would
# both insert what neither had imported yet.
IMPORT_LOCK = "SELECT pg_try_advisory_xact_lock(19778, 1)"


class Refusal(Exception):
    """The import did not start: the line says why."""


def _problems(violations: list) -> list[str]:
    return [f"{v.invariant.id}: {v.rows} row(s) {v.error or ''} {v.sample[:3]}".strip() for v in violations]


async def _import(url: str, path: Path, dry_run: bool, bars: Bars) -> tuple[list[str], list[str]]:
    from sqlalchemy import text

    from tenet.db.database import Database, make_engine
    from tenet.kernel.clock import SystemClock
    from tenet.kernel.invariants import all_invariants, check
    from tenet.meetings.legacy.importer import import_file
    from tenet.meetings.legacy.source import LegacyFile
    from tenet.settings import Settings

    LegacyFile(path).close()  # the file's shape first: a wrong file stops before the database is touched
    engine = make_engine(url, pool_size=2, max_overflow=0)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            if not (await connection.execute(text(IMPORT_LOCK))).scalar_one():
                raise Refusal("another import-sqlite is running on this database; nothing was done")
            # Rows that already break a rule are named, never silently kept or "repaired" (issue 20, spec 002).
            before = await check(connection, all_invariants())
            if before:
                raise Refusal("the database already breaks rules; nothing was imported:\n  "
                              + "\n  ".join(_problems(before)))
            # A dry run is the real run inside one transaction that is rolled back: the plan is what would happen.
            db = Database(engine, bind=connection) if dry_run else Database(engine, watch_outages=False)
            report = await import_file(db, path, settings=Settings(), now=SystemClock().now(), dry_run=dry_run,
                                       progress=bars)
            violations = await check(connection, all_invariants())
            await transaction.rollback()
        return list(report.lines()), _problems(violations)
    finally:
        await engine.dispose()


@meetings_app.command("import-sqlite")
def import_sqlite(path: Path, dry_run: Annotated[bool, typer.Option(help="Print the plan; write nothing")] = False,
                  database_url: Annotated[str | None, typer.Option(help="Defaults to DATABASE_URL / embedded")] = None,
                  ) -> None:
    """Import (again) the legacy system's dev.db: users, series, meetings, attendees, attendances, templates,
    audit rows; then both QR codes of every imported meeting and the invariants check."""
    from tenet import cli
    from tenet.domains import load_all
    from tenet.meetings.legacy.source import NotALegacyFile

    load_all()
    url = cli._database_url(cli._settings(), database_url)
    try:
        with cli._reaching(url), _bars() as bars:
            lines, problems = asyncio.run(_import(url, path, dry_run, bars))
    except NotALegacyFile as exc:
        cli._fail(str(exc), 2)
    except Refusal as exc:
        cli._fail(str(exc), 1)
    for line in lines:
        typer.echo(line)
    if problems:
        typer.echo("invariants check: NOT clean")
        for line in problems:
            typer.echo("  " + line)
        raise typer.Exit(1)
    typer.echo("invariants check: clean")


async def _regenerate(url: str, meeting: str | None, bars: Bars) -> int:
    from tenet.db.database import Database
    from tenet.kernel.clock import SystemClock
    from tenet.meetings.legacy.importer import defaults_from
    from tenet.meetings.legacy.qr import live_meeting_ids, store_codes_of
    from tenet.settings import Settings

    db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False)
    try:
        ids = await live_meeting_ids(db, meeting)
        if meeting is not None and not ids:
            return -1
        return await store_codes_of(db, ids, base_url=defaults_from(Settings()).public_base_url,
                                    now=SystemClock().now(), progress=bars)
    finally:
        await db.dispose()


@meetings_app.command("regenerate-qr")
def regenerate_qr(all_meetings: Annotated[bool, typer.Option("--all", help="Every meeting not deleted")] = False,
                  meeting: Annotated[str | None, typer.Option(help="One meeting's id")] = None,
                  database_url: Annotated[str | None, typer.Option(help="Defaults to DATABASE_URL / embedded")] = None,
                  ) -> None:
    """Rewrite both stored QR codes from the current TENET_PUBLIC_BASE_URL (after a migration, or when the
    public address changed)."""
    from tenet import cli
    from tenet.domains import load_all

    if all_meetings == (meeting is not None):
        cli._fail("give either --all or --meeting ID", 2)
    load_all()
    url = cli._database_url(cli._settings(), database_url)
    with cli._reaching(url), _bars() as bars:
        count = asyncio.run(_regenerate(url, meeting, bars))
    if count < 0:
        cli._fail(f"no meeting {meeting!r} (or it is deleted)", 2)
    typer.echo(f"regenerated the QR codes of {count} meeting(s)")


@meetings_app.command("legacy-sample")
def legacy_sample(path: Path, dirty: Annotated[bool, typer.Option(help="Add the rows the import must refuse")] = False,
                  size: Annotated[int, typer.Option(min=1, max=100000, help="About this many meetings")] = 20,
                  seed: int = 1,
                  newer: Annotated[bool, typer.Option(help="Turn the existing file at PATH into a newer one")] = False,
                  ) -> None:
    """Write a legacy dev.db to try `import-sqlite` with (replacing PATH), or with --newer evolve it."""
    from tenet.meetings.legacy.sample import evolve, generate

    if newer:
        changed = evolve(path, seed=seed)
        typer.echo(f"{path}: " + ", ".join(f"{k} {v}" for k, v in changed.items()))
        return
    sample = generate(path, size=size, dirty=dirty, seed=seed)
    typer.echo(f"{path}: " + ", ".join(f"{k} {v}" for k, v in sample.counts.items()))
    if sample.refused:
        typer.echo(f"{len(sample.refused)} row(s) the import must refuse")
