"""The `tenet` command: serve | worker | migrate | invariants | users | meetings | demo."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from tenet.cli_meetings import meetings_app
from tenet.domains import load_all
from tenet.iam.settings import IamSettings
from tenet.kernel.settings import (
    KernelSettings,
    MissingSecretKey,
    describe_invalid,
    normalize_forwarded_allow_ips,
    section,
)
from tenet.settings import Settings

app = typer.Typer(help="Tenet: four invariant-first business systems on PostgreSQL.", no_args_is_help=True)
invariants_app = typer.Typer(help="The invariant catalog: list, export to docs/, check a live database.")
users_app = typer.Typer(help="User administration from the shell.")
app.add_typer(invariants_app, name="invariants")
app.add_typer(users_app, name="users")
app.add_typer(meetings_app, name="meetings")
console = Console(stderr=True)

FIRST_ADMIN_EMAIL = "admin@example.com"


EXIT_CONFIGURATION = 2  # an invalid setting or option: fix the environment and run again
EXIT_DATABASE_UNREACHABLE = 3  # the database could not be reached: nothing was done, run again when it is up


def _fail(message: str, status: int) -> NoReturn:
    """One line on stderr (no traceback, no markup, never wrapped) and the exit status."""
    typer.echo(f"tenet: {message}", err=True)
    raise typer.Exit(status)


def _settings() -> KernelSettings:
    """The settings from the environment (and .env); an invalid value ends the command with one line per
    variable naming it and what is wrong — never the value, which may be a secret — and status 2."""
    try:
        return Settings()
    except ValidationError as exc:
        for line in describe_invalid(exc):
            typer.echo(f"tenet: {line}", err=True)
        raise typer.Exit(EXIT_CONFIGURATION) from None


@contextmanager
def _reaching(url: str) -> Iterator[None]:
    """Run a command's database work: a database that cannot be reached ends it with one line (where, and
    libpq's reason; never the password) and status 3, instead of a traceback. Other errors pass."""
    from tenet.db.database import connection_failure, database_location

    try:
        yield
    except Exception as exc:
        reason = connection_failure(exc, url)
        if reason is None:
            raise
        _fail(f"cannot reach the database at {database_location(url)} ({reason})", EXIT_DATABASE_UNREACHABLE)


def _database_url(settings: KernelSettings, override: str | None = None) -> str:
    from tenet.db.embedded import resolve_database_url

    return resolve_database_url(override or settings.database_url, settings.pgdata_dir)


def _run(coro):
    return asyncio.run(coro)


# --- stopping on signals -------------------------------------------------------------------------
# uvicorn (one process) lets in-flight requests finish on SIGTERM/SIGINT and then re-raises the signal
# to whatever handler was installed before it; with the default one the process dies of the signal and
# no `finally` or exit hook runs, which left the embedded PostgreSQL running. The long-running commands
# install a handler that turns the signal into an exception, so they unwind, release the embedded
# server and exit 0: a stop that was asked for and completed is a success (docs/decisions.md).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(BaseException):
    """Like KeyboardInterrupt, not an Exception: no `except Exception` on the way may swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, frame: object) -> None:
    raise StopRequested(signum)


@contextmanager
def _stopping_cleanly(settings: KernelSettings) -> Iterator[None]:
    """Run a long-lived command: a stop signal ends it normally, and the embedded server it started or
    joined is released on the way out (the last process holding it stops it)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stop)
    try:
        yield
    except StopRequested as stop:
        console.print(f"{stop} received: stopped")
    finally:
        # Stopping PostgreSQL takes a moment; a second signal must not cut it short and leave it running.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        if settings.uses_embedded_database:
            from tenet.db.embedded import release_embedded_server

            release_embedded_server(settings.pgdata_dir)


@dataclass(frozen=True)
class ProxyOptions:
    proxy_headers: bool
    forwarded_allow_ips: str | None = None


def _proxy_options(forwarded_allow_ips: str | None, settings: KernelSettings) -> ProxyOptions:
    """uvicorn's proxy options: X-Forwarded-For/-Proto are honoured only from the proxies named by
    --forwarded-allow-ips, else TENET_FORWARDED_ALLOW_IPS; with neither, from nobody (uvicorn would
    otherwise trust 127.0.0.1, or its own FORWARDED_ALLOW_IPS variable)."""
    trusted = normalize_forwarded_allow_ips(forwarded_allow_ips) or settings.forwarded_allow_ips
    if trusted is None:
        return ProxyOptions(proxy_headers=False)
    return ProxyOptions(proxy_headers=True, forwarded_allow_ips=trusted)


@app.command()
def migrate(database_url: Annotated[str | None, typer.Option(help="Defaults to DATABASE_URL / embedded")] = None,
            revision: str = "head") -> None:
    """Upgrade the database schema to the migrations' head (or to REVISION)."""
    from tenet.db import migrate as migrations

    settings = _settings()
    # Migrations take locks and run DDL: on the primary itself when a pooler stands in front of it.
    url = _database_url(settings, database_url or settings.database_direct_url)
    with _reaching(url):
        direct = database_url is None and bool(settings.database_direct_url)
        migrations.upgrade(url, revision, prepare=settings.server_side_prepare or direct)
    console.print(f"[green]database at {revision}[/green]")


async def _bootstrap_first_admin(settings: KernelSettings, url: str) -> tuple[str, str] | None:
    """First start on the embedded database: create an administrator with a generated password."""
    from tenet.db.database import Database
    from tenet.iam import service
    from tenet.iam.passwords import Passwords
    from tenet.iam.permissions import Role
    from tenet.kernel.audit import Actor
    from tenet.kernel.clock import SystemClock

    load_all()
    db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False)
    try:
        async with db.unit_of_work() as session:
            if await service.count_active_administrators(session) > 0:
                return None
            if await service.find_user_by_email(session, FIRST_ADMIN_EMAIL) is not None:
                return None  # never take over an existing account; the banner explains create-admin
            password = secrets.token_urlsafe(12)
            await service.create_user(
                session, passwords=Passwords(), email=FIRST_ADMIN_EMAIL, password=password,
                display_name="Administrator", now=SystemClock().now(), actor=Actor.system(),
                roles=[Role.ADMINISTRATOR],
            )
            return FIRST_ADMIN_EMAIL, password
    finally:
        await db.dispose()


@app.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: Annotated[int, typer.Option(min=1, help="API processes")] = 1,
    migrate_first: Annotated[bool | None, typer.Option(
        "--migrate/--no-migrate", help="Upgrade the schema before serving (default: only on the embedded database)",
    )] = None,
    forwarded_allow_ips: Annotated[str | None, typer.Option(
        help="Proxies whose X-Forwarded-For names the client: comma-separated IPs/CIDRs or '*' "
             "(default: TENET_FORWARDED_ALLOW_IPS; unset trusts no proxy)",
    )] = None,
) -> None:
    """Serve the HTTP API (migrating the embedded database to head first)."""
    settings = _settings()
    with _stopping_cleanly(settings):
        _serve(settings, host=host, port=port, workers=workers, migrate_first=migrate_first,
               proxy=_proxy_options(forwarded_allow_ips, settings))


# prometheus_client's variable: set, every process writes its metrics to files in that directory and a scrape
# of any API process sums them all.
PROMETHEUS_MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


# How long an idle keep-alive connection stays open. Longer than the idle timeout of the proxies in front
# (nginx's upstream keepalive_timeout and AWS load balancers: 60 s): when the server closes an idle connection
# first (uvicorn's default is 5 s), a proxy may send the next request on it just as it closes, and answers that
# request 502 (a POST is not retried by the proxy). The soak saw it once in 4,000 requests.
KEEP_ALIVE_SECONDS = 75


def _multiprocess_metrics_dir(settings: KernelSettings, workers: int) -> Path | None:
    """With several API processes, a metrics directory for this run (removed when it ends). Made before
    prometheus_client is first imported, which reads the variable once: then this process's own counters
    (the embedded server's restarts) are summed with the API processes' too."""
    if workers == 1 or os.environ.get(PROMETHEUS_MULTIPROC_DIR):
        return None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    metrics_dir = Path(tempfile.mkdtemp(prefix="metrics-", dir=settings.data_dir.resolve()))
    os.environ[PROMETHEUS_MULTIPROC_DIR] = str(metrics_dir)
    return metrics_dir


def _serve(settings: KernelSettings, *, host: str, port: int, workers: int, migrate_first: bool | None,
           proxy: ProxyOptions) -> None:
    metrics_dir = _multiprocess_metrics_dir(settings, workers)
    try:
        _serve_with_metrics(settings, host=host, port=port, workers=workers, migrate_first=migrate_first,
                            proxy=proxy)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _serve_with_metrics(settings: KernelSettings, *, host: str, port: int, workers: int,
                        migrate_first: bool | None, proxy: ProxyOptions) -> None:
    import uvicorn

    from tenet.db import migrate as migrations
    from tenet.observability import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    _require_signing_key(settings)  # generates the development key once, before any worker process starts
    url = _database_url(settings)
    if migrate_first if migrate_first is not None else settings.uses_embedded_database:
        with _reaching(url):
            migrations.upgrade(url)
    # Worker processes inherit the resolved URL, so they join the server this process started (as the
    # embedded database: they keep its development signing key, see KernelSettings.signing_key).
    base = f"http://{host}:{port}"
    if settings.uses_embedded_database:
        os.environ["TENET_EMBEDDED_DATABASE_URL"] = url
        with _reaching(url):
            created = _run(_bootstrap_first_admin(settings, url))

        def greeting() -> None:
            _print_embedded_banner(settings, base, created)
    else:
        def greeting() -> None:
            _print_banner([f"Serving on [bold]{base}[/bold]   API docs: [bold]{base}/docs[/bold]",
                           "No administrator yet? Run: [bold]tenet users create-admin --email E --password P[/bold]"])
    config = uvicorn.Config(
        "tenet.app:create_app", factory=True, host=host, port=port, workers=workers, log_config=None,
        # No `Server: uvicorn` on any answer (uvicorn hands the config to every --workers process).
        access_log=False, server_header=False, timeout_graceful_shutdown=20, proxy_headers=proxy.proxy_headers,
        forwarded_allow_ips=proxy.forwarded_allow_ips, timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    with _watching_embedded_server(settings):
        _run_uvicorn(config, greeting)


def _run_uvicorn(config: Any, greeting: Callable[[], None]) -> None:
    """uvicorn.run's two cases we use, with the greeting last: one process greets once it listens (after
    every start-up line, so the password is the last thing on the screen); with --workers the parent greets
    before it starts them."""
    import uvicorn
    from uvicorn.main import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    class GreetingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                greeting()

    if config.workers > 1:
        greeting()
        Multiprocess(config, sockets=[config.bind_socket()]).run()
        return
    server = GreetingServer(config)
    with suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise typer.Exit(STARTUP_FAILURE)  # uvicorn's own status (the port taken, the app failing to start)


def _print_embedded_banner(settings: KernelSettings, base: str, created: tuple[str, str] | None) -> None:
    lines = [f"Tenet is serving on [bold]{base}[/bold]   API docs: [bold]{base}/docs[/bold]",
             f"Embedded PostgreSQL under {settings.pgdata_dir}"]
    if created:
        email, password = created
        lines += [f"First administrator created: [bold]{email}[/bold] / password [bold]{password}[/bold]",
                  "This password is shown once. Sign in at /docs (Authorize) or POST /api/v1/auth/token."]
    else:
        lines.append("Sign in with your administrator account; to add one: "
                     "[bold]tenet users create-admin --email E --password P[/bold]")
    _print_banner(lines)


def _print_banner(lines: list[str]) -> None:
    # Never wrapped: a password broken over two lines cannot be copied (a pipe's console is 80 columns).
    console.rule("[bold]Tenet")
    for line in lines:
        console.print(line, soft_wrap=True)
    console.rule()


@contextmanager
def _watching_embedded_server(settings: KernelSettings) -> Iterator[None]:
    """While serving on the embedded database, restart it when it dies (tenet.db.embedded); stopped before the
    server is released on the way out."""
    if not settings.uses_embedded_database:
        yield
        return
    from tenet.db.embedded import EmbeddedServerWatchdog
    from tenet.observability import EMBEDDED_DATABASE_RESTARTS

    watchdog = EmbeddedServerWatchdog(settings.pgdata_dir, on_restart=EMBEDDED_DATABASE_RESTARTS.inc).start()
    try:
        yield
    finally:
        watchdog.stop()


def _require_signing_key(settings: KernelSettings) -> None:
    try:
        settings.signing_key()
    except MissingSecretKey as exc:
        console.print(f"[red]Refusing to start:[/red] {exc}")
        raise typer.Exit(EXIT_CONFIGURATION) from None


@app.command()
def worker(concurrency: Annotated[int, typer.Option(min=1)] = 4) -> None:
    """Run background jobs (mail delivery, invitation expiry, clean-up). Run as many as you like."""
    from tenet.observability import configure_logging
    from tenet.worker import DirectConnectionRequired, job_queue_url, run_worker

    settings = _settings()
    configure_logging(settings.log_level, settings.log_format)
    _require_signing_key(settings)
    try:
        job_queue_url(settings, settings.configured_database_url or "")
    except DirectConnectionRequired as exc:
        _fail(str(exc), EXIT_CONFIGURATION)
    # run_worker handles the first signal itself (running jobs finish, then it returns); a second one during
    # that wait raises StopRequested here.
    with _stopping_cleanly(settings):
        url = _database_url(settings)
        with _reaching(url):
            _run(run_worker(settings, url, concurrency=concurrency))


@users_app.command("create-admin")
def create_admin(
    email: Annotated[str, typer.Option(help="Sign-in email")],
    password: Annotated[str, typer.Option(help="At least 10 characters", prompt=True, hide_input=True)],
    display_name: str = "Administrator",
    reset_password: Annotated[bool, typer.Option(help="Also set the password of an existing account")] = False,
) -> None:
    """Create an Administrator, or make an existing account one. Safe to run again."""
    from tenet.db.database import Database
    from tenet.iam import service
    from tenet.iam.passwords import Passwords
    from tenet.kernel.clock import SystemClock
    from tenet.kernel.errors import DomainError

    settings = _settings()
    iam = section(settings, IamSettings)
    load_all()

    url = _database_url(settings)

    async def go() -> tuple[str, bool]:
        db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False,
                               prepare=settings.server_side_prepare)
        try:
            async with db.unit_of_work() as session:
                user, created = await service.ensure_administrator(
                    session, passwords=Passwords(time_cost=iam.password_hash_time_cost,
                                                 memory_kib=iam.password_hash_memory_kib),
                    email=email, password=password, display_name=display_name, now=SystemClock().now(),
                    reset_password=reset_password,
                )
                return str(user.id), created
        finally:
            await db.dispose()

    try:
        with _reaching(url):
            user_id, created = _run(go())
    except DomainError as exc:
        console.print(f"[red]{exc.code}[/red]: {exc.detail}")
        raise typer.Exit(2) from None
    verb = "created" if created else "already existed; ensured it is an active Administrator"
    console.print(f"{email} ({user_id}) {verb}")


def _read_new_password() -> str:
    """The password from a hidden prompt (typed twice) on a terminal, else the first line of stdin; never argv,
    where other users' `ps` and the shell's history would see it."""
    if sys.stdin.isatty():
        return str(typer.prompt("New password", hide_input=True, confirmation_prompt=True))
    return sys.stdin.readline().rstrip("\r\n")


@users_app.command("set-password")
def set_password(email: Annotated[str, typer.Argument(help="The account's sign-in email")]) -> None:
    """Set an account's password (read from a prompt, or from stdin: `... | tenet users set-password E`). Every
    sign-in of the account ends (tokens, console sessions, reset links). For imported people, see
    docs/legacy-meeting-attendance.md (they can also set it themselves: the sign-in page's reset link)."""
    from tenet.db.database import Database
    from tenet.iam import errors as iam_errors
    from tenet.iam import password_reset, service
    from tenet.iam.passwords import Passwords
    from tenet.kernel.audit import Actor
    from tenet.kernel.clock import SystemClock
    from tenet.kernel.errors import DomainError

    settings = _settings()
    iam = section(settings, IamSettings)
    load_all()
    password = _read_new_password()
    url = _database_url(settings)

    async def go() -> str:
        db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False,
                               prepare=settings.server_side_prepare)
        passwords = Passwords(time_cost=iam.password_hash_time_cost, memory_kib=iam.password_hash_memory_kib)
        try:
            async with db.unit_of_work() as session:
                user = await service.find_user_by_email(session, email)
                if user is None:
                    raise iam_errors.UserNotFound(f"No account with the email {email!r}")
                hashed = await password_reset.new_hash(passwords, password=password, email=user.email)
                await password_reset.set_password(session, user_id=user.id, password_hash=hashed,
                                                  now=SystemClock().now(), actor=Actor.system())
                return str(user.id)
        finally:
            await db.dispose()

    try:
        with _reaching(url):
            user_id = _run(go())
    except DomainError as exc:
        console.print(f"[red]{exc.code}[/red]: {exc.detail}")
        raise typer.Exit(2) from None
    console.print(f"{email} ({user_id}): password set; every earlier sign-in of the account has ended")


@invariants_app.command("list")
def invariants_list() -> None:
    """Print the catalog as a table."""
    from tenet.domains import load_all
    from tenet.kernel.invariants import all_invariants

    load_all()
    table = Table("id", "statement", "database", "error code")
    for inv in all_invariants():
        table.add_row(inv.id, inv.statement, ", ".join(inv.db) or "-", inv.error_code or "-")
    Console().print(table)


@invariants_app.command("export")
def invariants_export(output: Path = Path("docs/invariants.md")) -> None:
    """Write the catalog (and the state diagrams) as markdown."""
    from tenet.domains import load_all
    from tenet.kernel.invariants import all_invariants, markdown
    from tenet.kernel.transitions import STATE_MACHINES

    load_all()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(markdown(all_invariants()), encoding="utf-8")
    diagrams = output.parent / "state-machines.md"
    parts = ["# State machines", "", "Generated by `tenet invariants export`; do not edit by hand.", ""]
    for machine in sorted(STATE_MACHINES.values(), key=lambda m: m.name):
        parts += [f"## {machine.name}", "", "```mermaid", machine.mermaid(), "```", ""]
    diagrams.write_text("\n".join(parts), encoding="utf-8")
    console.print(f"wrote {output} and {diagrams}")


@invariants_app.command("check")
def invariants_check(
    database_url: Annotated[str | None, typer.Option(help="Defaults to DATABASE_URL / embedded")] = None,
    domain: Annotated[str | None, typer.Option(help="Only this domain's rules (kernel, iam, workspaces, ...)")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each detector may run")] = 30.0,
) -> None:
    """Run the detectors against a live database on one snapshot; exit 1 naming the rules that do not hold
    (with the count of violating rows and a sample), or whose detector could not finish."""
    from tenet.db.database import make_engine
    from tenet.domains import domain_names, load_all
    from tenet.kernel.invariants import all_invariants, check

    load_all()
    if domain is not None and domain not in domain_names():
        console.print(f"[red]no domain {domain!r}[/red]; one of: {', '.join(domain_names())}")
        raise typer.Exit(2)
    selected = all_invariants(domain)
    settings = _settings()
    url = _database_url(settings, database_url)

    async def go():
        engine = make_engine(url, pool_size=1, max_overflow=0, prepare=settings.server_side_prepare)
        try:
            async with engine.connect() as connection:
                return await check(connection, selected, timeout_ms=int(timeout * 1000))
        finally:
            await engine.dispose()

    with _reaching(url):
        violations = _run(go())
    if not violations:
        console.print(f"[green]all {len(selected)} invariants hold[/green]")
        return
    for violation in violations:
        if violation.error:
            console.print(f"[red]{violation.invariant.id}[/red] unproven ({violation.error}): "
                          f"{violation.invariant.statement}")
            continue
        console.print(f"[red]{violation.invariant.id}[/red] {violation.rows} row(s): {violation.invariant.statement}")
        for row in violation.sample:
            console.print(f"    {row}")
    raise typer.Exit(1)


@app.command()
def demo() -> None:
    """Load demo data for every system that has landed (idempotent)."""
    from tenet.demo import load_demo

    load_all()
    settings = _settings()
    url = _database_url(settings)
    with _reaching(url):
        summary = _run(load_demo(settings, url))
    for line in summary:
        console.print(line)


from tenet.cli_social import social_app  # noqa: E402 (its commands reach back into this module lazily)

app.add_typer(social_app, name="social")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
