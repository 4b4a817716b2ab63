"""`tenet social legacy sample | probe | backfill | sync | reconcile | cutover | cleanup` (issue 20): the cut-over
tooling as commands a team runs on the day (docs/legacy-social.md is the runbook), over tenet.social.legacy. The
legacy tables are read from `--schema` (default `legacy`) in Tenet's own database, or at `--legacy-url`."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

social_app = typer.Typer(help="Social collaboration tools.", no_args_is_help=True)
legacy_app = typer.Typer(help="Move the old social app's data in (spec 000 §G): sample, probe, backfill, sync, "
                                "reconcile, cutover, cleanup.",
                         no_args_is_help=True)
social_app.add_typer(legacy_app, name="legacy")
console = Console(stderr=True)

LegacyUrl = Annotated[str | None, typer.Option(help="The legacy database (default: Tenet's own)")]
Schema = Annotated[str, typer.Option(help="The schema holding the legacy tables")]


def _urls(legacy_url: str | None) -> tuple[str, str]:
    from tenet import cli as root

    url = root._database_url(root._settings())
    return url, legacy_url or url


@asynccontextmanager
async def _connected(url: str, legacy_url: str) -> AsyncIterator[tuple[object, object]]:
    import psycopg

    from tenet.db.database import Database, libpq_url
    from tenet.domains import load_all

    load_all()
    db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False)
    legacy = await psycopg.AsyncConnection.connect(libpq_url(legacy_url), autocommit=True)
    try:
        yield db, legacy
    finally:
        await legacy.close()
        await db.dispose()


async def _context():
    from tenet import cli as root
    from tenet.iam.passwords import Passwords
    from tenet.iam.settings import IamSettings
    from tenet.kernel.clock import SystemClock
    from tenet.kernel.settings import section
    from tenet.social.legacy.engine import Context

    settings = root._settings()
    iam = section(settings, IamSettings)
    passwords = Passwords(time_cost=iam.password_hash_time_cost, memory_kib=iam.password_hash_memory_kib)
    return Context(now=SystemClock().now(), password_hash=await passwords.hash(secrets.token_urlsafe(32)),
                   default_timezone=settings.default_timezone)


def _run(url: str, coro) -> object:
    from tenet import cli as root

    with root._reaching(url):
        return root._run(coro)


@legacy_app.command("sample")
def sample(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
           size: Annotated[int, typer.Option(min=2, max=100_000, help="Legacy users")] = 20,
           dirty: Annotated[bool, typer.Option(help="Add the dirty rows an old database holds")] = False,
           replace: Annotated[bool, typer.Option(help="Drop an existing schema of that name first")] = False) -> None:
    """Create the assumed legacy schema (docs/legacy-social.md) with generated rows."""
    import psycopg

    from tenet.db.database import libpq_url
    from tenet.social.legacy import sample as generator

    _, target = _urls(legacy_url)

    async def go() -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(libpq_url(target), autocommit=True) as connection:
            return await generator.create(connection, schema, generator.generate(size, dirty=dirty), replace=replace)

    try:
        counts = _run(target, go())
    except psycopg.errors.DuplicateSchema:
        console.print(f"schema {schema} exists already; pass --replace to drop and make it again")
        raise typer.Exit(2) from None
    for table, count in counts.items():  # type: ignore[attr-defined]
        console.print(f"{schema}.{table}: {count} row(s)")


@legacy_app.command("probe")
def probe(legacy_url: LegacyUrl = None, schema: Schema = "legacy") -> None:
    """Which legacy tables and columns exist, and the back-fill plan; exit 1 when nothing can be back-filled."""
    from tenet.social.legacy.backfill import plan

    url, target = _urls(legacy_url)

    async def go():
        async with _connected(url, target) as (db, legacy):
            return await plan(db, legacy, schema)  # type: ignore[arg-type]

    lines = _run(url, go())
    for line in lines:  # type: ignore[attr-defined]
        typer.echo(line.describe())
    if not any(line.runnable for line in lines):  # type: ignore[attr-defined]
        raise typer.Exit(1)


@legacy_app.command("backfill")
def backfill(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
             batch_size: Annotated[int, typer.Option(min=1, max=10_000)] = 500) -> None:
    """Copy the legacy rows into the new model: batched, resumable (run it again after a stop), idempotent."""
    from tenet.social.legacy import backfill as filling

    url, target = _urls(legacy_url)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console) as progress:
        tasks: dict[str, object] = {}

        def advance(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = progress.add_task(table, total=total)
            progress.update(tasks[table], completed=done)  # type: ignore[arg-type]

        async def go():
            async with _connected(url, target) as (db, legacy):
                return await filling.backfill(db, legacy, schema, await _context(),  # type: ignore[arg-type]
                                              batch_size=batch_size, progress=advance)

        report = _run(url, go())
    for table, (applied, refused) in report.items():  # type: ignore[attr-defined]
        typer.echo(f"{table}: {applied} applied, {refused} refused")
    typer.echo("refusals and losses: social_legacy.differences")
    broken = _run(url, _rules_broken(url))
    if broken:
        for line in broken:  # type: ignore[attr-defined]
            typer.echo(f"rule broken: {line}")
        raise typer.Exit(1)
    typer.echo("identity's and social's invariants hold")


async def _rules_broken(url: str) -> list[str]:
    """The detectors of the two domains a back-fill writes (identity, social), on one snapshot."""
    from tenet.db.database import make_engine
    from tenet.domains import load_all
    from tenet.kernel.invariants import all_invariants, check

    load_all()
    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as connection:
            violations = await check(connection, all_invariants("iam") + all_invariants("social"))
    finally:
        await engine.dispose()
    return [f"{v.invariant.id} ({v.error or f'{v.rows} row(s)'}): {v.invariant.statement}" for v in violations]


@legacy_app.command("sync")
def sync(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
         install: Annotated[bool, typer.Option(help="Install the capture triggers (dual write on)")] = False,
         uninstall: Annotated[bool, typer.Option(help="Remove them (rollback of dual write)")] = False,
         replay: Annotated[bool, typer.Option(help="Apply again the differences of --since..--until")] = False,
         since: Annotated[datetime | None, typer.Option(help="Window start (capture time, inclusive)")] = None,
         until: Annotated[datetime | None, typer.Option(help="Window end (exclusive)")] = None) -> None:
    """Apply the captured legacy changes to the new model (or install/remove the capture, or replay a window)."""
    from tenet.social.legacy import sync as dual

    if sum((install, uninstall, replay)) > 1:
        console.print("--install, --uninstall and --replay are separate steps: pass one")
        raise typer.Exit(2)
    if replay and (since is None or until is None):
        console.print("--replay needs --since and --until")
        raise typer.Exit(2)
    url, target = _urls(legacy_url)

    async def go() -> list[str]:
        async with _connected(url, target) as (db, legacy):
            if install:
                return await dual.install(legacy, schema)  # type: ignore[arg-type]
            if uninstall:
                return await dual.uninstall(legacy, schema)  # type: ignore[arg-type]
            ctx = await _context()
            if replay:
                done, left = await dual.replay(db, ctx, since=_aware(since), until=_aware(until))  # type: ignore[arg-type]
                return [f"replayed: {done} applied, {left} still refused"]
            done, left = await dual.apply_log(db, legacy, ctx)  # type: ignore[arg-type]
            return [f"synced: {done} change(s) applied, {left} refused (social_legacy.differences)"]

    try:
        lines = _run(url, go())
    except dual.SyncBusy as busy:
        console.print(str(busy))
        raise typer.Exit(1) from None
    for line in lines:  # type: ignore[attr-defined]
        typer.echo(line)


def _aware(moment: datetime | None) -> datetime | None:
    from datetime import UTC

    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)


@legacy_app.command("reconcile")
def reconcile(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
              report: Annotated[Path | None, typer.Option(help="Also write the report here (JSON)")] = None) -> None:
    """Compare old and new per table (counts, status distributions, key-field hashes); exit 1 when a table
    deviates by more than 0.1 %."""
    from tenet.social.legacy import reconcile as checking

    url, target = _urls(legacy_url)

    async def go():
        async with _connected(url, target) as (db, legacy):
            return await checking.reconcile(db, legacy, schema)  # type: ignore[arg-type]

    tables = _run(url, go())
    for table in tables:  # type: ignore[attr-defined]
        typer.echo(table.line())
        if table.legacy_statuses:
            typer.echo(f"    statuses legacy {table.legacy_statuses} / new {table.new_statuses}")
        for sample_line in table.samples:
            typer.echo(f"    {sample_line}")
    if report is not None:
        report.write_text(checking.as_json(tables), encoding="utf-8")  # type: ignore[arg-type]
        typer.echo(f"wrote {report}")
    if not all(table.passes for table in tables):  # type: ignore[attr-defined]
        raise typer.Exit(1)


@legacy_app.command("cutover")
def cutover(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
            percent: Annotated[int | None, typer.Option(min=0, max=100, help="Users reading from Tenet")] = None,
            rollback: Annotated[bool, typer.Option(help="Everyone reads the legacy tables again, and the "
                                                        "dual write stops (any phase)")] = False,
            user: Annotated[str | None, typer.Option(help="Which side this user reads from (Tenet or legacy id)")]
            = None) -> None:
    """The read switch by user percentage: show it, move it (`--percent N`), or roll everything back."""
    from tenet.kernel.clock import SystemClock
    from tenet.social.legacy import cutover as switch
    from tenet.social.legacy import sync as dual

    if rollback and percent is not None:
        console.print("--rollback sets 0 %: pass --percent or --rollback, not both")
        raise typer.Exit(2)
    asked: uuid.UUID | int | None = None
    if user is not None:
        try:
            asked = switch.parse_user(user)
        except ValueError:
            console.print(f"--user {user!r} is neither a Tenet account id (UUID) nor a legacy user id (digits)")
            raise typer.Exit(2) from None
    url, target = _urls(legacy_url)

    async def go() -> list[str]:
        lines = []
        async with _connected(url, target) as (db, legacy):
            async with db.unit_of_work() as session:  # type: ignore[attr-defined]
                if percent is not None or rollback:
                    await switch.set_percent(session, percent=0 if rollback else percent or 0, now=SystemClock().now())
                state = await switch.current(session)
                if asked is not None:
                    side = await switch.side_of(session, asked)
                    lines.append(f"user {user}: no such account" if side is None else
                                 f"user {user}: bucket {side.bucket}, reads from {side.reads_from}")
            if rollback:
                lines += await dual.uninstall(legacy, schema)  # type: ignore[arg-type]
        changed = f" (was {state.previous_percent} %)" if state.previous_percent is not None else ""
        return [f"read switch: {state.read_percent} % of users read from Tenet{changed}", *lines]

    for line in _run(url, go()):  # type: ignore[attr-defined]
        typer.echo(line)


@legacy_app.command("cleanup")
def cleanup(legacy_url: LegacyUrl = None, schema: Schema = "legacy",
            archive_as: Annotated[str | None, typer.Option(help="The archived schema's name")] = None) -> None:
    """Phase 4: with everyone reading from Tenet, end the dual write and archive the legacy schema."""
    from tenet.kernel.clock import SystemClock
    from tenet.social.legacy import cutover as switch

    url, target = _urls(legacy_url)
    name = archive_as or f"{schema}_archived_{SystemClock().now():%Y%m%d}"

    async def go() -> list[str]:
        async with _connected(url, target) as (db, legacy), db.unit_of_work() as session:  # type: ignore[attr-defined]
            return await switch.clean_up(session, legacy, schema, archive_as=name)  # type: ignore[arg-type]

    try:
        lines = _run(url, go())
    except switch.CleanUpRefused as refused:
        console.print(str(refused))
        raise typer.Exit(2) from None
    for line in lines:  # type: ignore[attr-defined]
        typer.echo(line)
