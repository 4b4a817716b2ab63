"""The soak's topology, as processes on this machine: a PostgreSQL primary and a streaming replica
(pg_basebackup), PgBouncer (transaction pooling), API hosts each in its own network namespace with its own address,
workers, nginx in front of the API hosts, and a local SMTP server. Everything is made here and removed in close().

Addresses: API host i lives in the namespace tenet-soak-i behind a veth pair, 10.231.i.1 on this side and
10.231.i.2 inside. PostgreSQL, PgBouncer and the SMTP server listen on loopback and on the 10.231.i.1 side of each
pair; nginx listens on loopback only.
"""

from __future__ import annotations

import email
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from aiosmtpd.controller import Controller

from ops.cluster import PgBouncer, StreamingCluster, ensure_pgbouncer, free_port, postgres_bin

NGINX = "/usr/sbin/nginx"
DATABASE = "tenet"
NAMESPACE_PREFIX = "tenet-soak-"
API_PORT = 8000
# A health probe that takes longer than this counts as failed (a starved host is as good as down to a client).
HEALTH_TIMEOUT = 5.0
METRICS_TOKEN = "soak-metrics-token-0123456789abcdef"
SECRET = "soak-secret-key-0123456789abcdef0123456789abcdef"


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60)


@dataclass
class Namespace:
    """A network namespace joined to this one by a veth pair: `outside` here, `inside` there."""

    index: int

    @property
    def name(self) -> str:
        return f"{NAMESPACE_PREFIX}{self.index}"

    @property
    def outside(self) -> str:
        return f"10.231.{self.index}.1"

    @property
    def inside(self) -> str:
        return f"10.231.{self.index}.2"

    @property
    def link(self) -> str:
        return f"tsoak{self.index}h"

    def create(self) -> None:
        self.remove()
        peer = f"tsoak{self.index}n"
        _sh("ip", "netns", "add", self.name)
        _sh("ip", "link", "add", self.link, "type", "veth", "peer", "name", peer)
        _sh("ip", "link", "set", peer, "netns", self.name)
        _sh("ip", "addr", "add", f"{self.outside}/24", "dev", self.link)
        _sh("ip", "link", "set", self.link, "up")
        _sh("ip", "netns", "exec", self.name, "ip", "addr", "add", f"{self.inside}/24", "dev", peer)
        _sh("ip", "netns", "exec", self.name, "ip", "link", "set", peer, "up")
        _sh("ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up")

    def remove(self) -> None:
        _sh("ip", "link", "del", self.link, check=False)  # removes the peer too
        _sh("ip", "netns", "del", self.name, check=False)


class SmtpSink:
    """aiosmtpd on loopback and on each namespace's outside address, collecting (to, Message-ID) pairs."""

    def __init__(self, hosts: list[str]) -> None:
        self.port = free_port()
        self.received: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        sink = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                message = email.message_from_bytes(envelope.content)
                with sink._lock:
                    for to in envelope.rcpt_tos:
                        sink.received.append((time.time(), to, str(message.get("Message-ID", ""))))
                return "250 OK"

        self._controllers = [Controller(Handler(), hostname=host, port=self.port) for host in hosts]

    def start(self) -> None:
        for controller in self._controllers:
            controller.start()

    def stop(self) -> None:
        for controller in self._controllers:
            controller.stop()


@dataclass
class Managed:
    """A Tenet process (`python -m tenet ...`, in a namespace or here) the soak may kill and restart."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    namespace: str | None = None
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready_at: float | None = None  # when it answered /readyz (API) or logged "worker started" (worker)
    restarts: int = 0
    rss_samples: list[tuple[float, int, int]] = field(default_factory=list)  # (time, pid, KiB)

    def start(self) -> None:
        command = [sys.executable, "-m", "tenet", *self.args]
        if self.namespace:
            # `ip netns exec` execs the command itself: the pid is Tenet's.
            command = ["ip", "netns", "exec", self.namespace, *command]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.started_at = time.monotonic()
        self.ready_at = None

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def restart(self) -> None:
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def sample_rss(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        if self.ready_at is None and self.namespace is None and "worker started" in self.log_path.read_text(
                errors="replace")[-200_000:]:
            self.ready_at = time.monotonic()
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except FileNotFoundError:
            return
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                self.rss_samples.append((time.monotonic(), self.process.pid, int(line.split()[1])))


class Topology:
    def __init__(self, run_dir: Path, *, api_hosts: int = 2, workers: int = 2, pool_size: int = 8) -> None:
        self.run_dir = run_dir
        self.namespaces = [Namespace(i + 1) for i in range(api_hosts)]
        self.worker_count = workers
        self.pool_size = pool_size
        self.dir = Path(tempfile.mkdtemp(prefix="tenet-soak-"))
        os.chmod(self.dir, 0o755)
        self.cluster: StreamingCluster | None = None
        self.bouncer: PgBouncer | None = None
        self.smtp: SmtpSink | None = None
        self.apis: list[Managed] = []
        self.workers: list[Managed] = []
        self.nginx: subprocess.Popen[bytes] | None = None
        self.nginx_port = free_port()
        self.nginx_dir = self.dir / "nginx"
        self.healthy: dict[str, bool] = {}
        self._health_stop = threading.Event()
        self._health_thread: threading.Thread | None = None
        self.health_changes: list[tuple[float, str, bool]] = []

    # --- building -------------------------------------------------------------------------------------------

    def build(self) -> None:
        if os.geteuid() != 0:
            raise SystemExit("the soak makes network namespaces: run it as root")
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise SystemExit("no PostgreSQL server binaries (Debian's postgresql-15 or the embedded wheel's)")
        if ensure_pgbouncer() is None:
            raise SystemExit("PgBouncer is missing and could not be installed (apt-get install pgbouncer)")
        if not Path(NGINX).exists():
            subprocess.run(["make", "-s", NGINX], cwd=Path(__file__).resolve().parents[2], check=False,
                           capture_output=True, timeout=600)
            if not Path(NGINX).exists():
                raise SystemExit("nginx is missing and could not be installed (apt-get install nginx-light)")
        for ns in self.namespaces:
            ns.create()
        outsides = tuple(ns.outside for ns in self.namespaces)
        self.cluster = StreamingCluster(bin_dir, listen=("127.0.0.1", *outsides), clients=("10.231.0.0/16",))
        self.cluster.start()
        with psycopg.connect(self.cluster.primary.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {DATABASE}")
        self.bouncer = PgBouncer(self.cluster.primary.url(DATABASE), pool_size=self.pool_size,
                                 listen=("127.0.0.1", *outsides)).start()
        self.smtp = SmtpSink(["127.0.0.1", *outsides])
        self.smtp.start()
        migrated = subprocess.run([sys.executable, "-m", "tenet", "migrate"], env=self.env("127.0.0.1", "migrate"),
                                  capture_output=True, text=True, timeout=300)
        if migrated.returncode != 0:
            raise RuntimeError(f"tenet migrate failed:\n{migrated.stdout}\n{migrated.stderr}")
        for ns in self.namespaces:
            api = Managed(f"api-{ns.index}", ["serve", "--host", ns.inside, "--port", str(API_PORT), "--workers", "1",
                                              "--no-migrate", "--forwarded-allow-ips", ns.outside],
                          self.env(ns.outside, f"api-{ns.index}"), self.run_dir / f"api-{ns.index}.log",
                          namespace=ns.name)
            api.start()
            self.apis.append(api)
        for n in range(self.worker_count):
            worker = Managed(f"worker-{n + 1}", ["worker", "--concurrency", "2"],
                             self.env("127.0.0.1", f"worker-{n + 1}"), self.run_dir / f"worker-{n + 1}.log")
            worker.start()
            self.workers.append(worker)
        for ns, api in zip(self.namespaces, self.apis, strict=True):
            self.wait_ready(ns, api)
            self.healthy[ns.inside] = True
        self._write_nginx()
        self.nginx = subprocess.Popen([NGINX, "-c", str(self.nginx_dir / "nginx.conf"), "-p", str(self.nginx_dir)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.wait_url(f"{self.base_url}/readyz", 30)
        self._health_thread = threading.Thread(target=self._health_loop, daemon=True)
        self._health_thread.start()

    def env(self, database_host: str, name: str) -> dict[str, str]:
        assert self.cluster is not None and self.bouncer is not None and self.smtp is not None
        data = self.dir / "data" / name
        data.mkdir(parents=True, exist_ok=True)
        # Files are shared by every host, as a bucket or a network file system would be in production
        # (docs/operations.md): a file uploaded through one host downloads through any.
        shared_files = self.dir / "shared" / "meeting-attachments"
        shared_files.mkdir(parents=True, exist_ok=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith("TENET_") and k != "DATABASE_URL"}
        return {**base,
                "DATABASE_URL": self.bouncer.url_on(database_host),
                "TENET_DATABASE_PGBOUNCER": "1",
                "TENET_DATABASE_DIRECT_URL": self.cluster.primary.url(DATABASE, host=database_host),
                "TENET_DATABASE_READ_URL": self.cluster.standby.url(DATABASE, host=database_host),
                "TENET_DATA_DIR": str(data),
                "TENET_SECRET_KEY": SECRET,
                "TENET_METRICS_TOKEN": METRICS_TOKEN,
                "TENET_SMTP_HOST": database_host, "TENET_SMTP_PORT": str(self.smtp.port),
                "TENET_PASSWORD_HASH_TIME_COST": "1", "TENET_PASSWORD_HASH_MEMORY_KIB": "1024",
                "TENET_REGISTRATION_LIMIT": "100000/hour", "TENET_LOGIN_FAILURE_LIMIT": "100000/15min",
                "TENET_DB_POOL_SIZE": "6", "TENET_DB_READ_POOL_SIZE": "4", "TENET_LOG_LEVEL": "INFO",
                "MEETING_ATTACHMENT_STORAGE_ROOT": str(shared_files),
                "TENET_DEFAULT_TIMEZONE": "America/Los_Angeles",
                # Every guest comes through one load balancer address: the per-address limit would be the
                # load generator's, not the service's.
                "TENET_GUEST_CHECKIN_LIMIT": "1000000/minute",
                # A virtual user is busier than a person: it owns a burst of automations and makes groups all day.
                "TENET_SOCIAL_AUTOMATIONS_PER_USER": "10000", "TENET_SOCIAL_GROUP_CREATION_LIMIT": "100000/hour",
                # A killed worker's work comes back within the soak: its automation runs after a 20 s lease (then
                # 5 s of back-off), its procrastinate jobs after 15 s without heartbeats.
                "TENET_AUTOMATION_LEASE_SECONDS": "20", "TENET_AUTOMATION_RETRY_BASE_SECONDS": "5",
                "TENET_WORKER_HEARTBEAT_SECONDS": "3", "TENET_STALLED_WORKER_SECONDS": "15",
                "PYTHONUNBUFFERED": "1"}

    def create_admin(self, email: str, password: str) -> None:
        """The soak's administrator, made as an operator makes one (`tenet users create-admin`)."""
        made = subprocess.run([sys.executable, "-m", "tenet", "users", "create-admin", "--email", email,
                               "--password", password], env=self.env("127.0.0.1", "create-admin"),
                              capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            raise RuntimeError(f"tenet users create-admin failed:\n{made.stdout}\n{made.stderr}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.nginx_port}"

    def _write_nginx(self) -> None:
        """nginx as the load balancer. Open-source nginx has no active health check: the soak's own checker
        probes each host's /readyz and marks a host that is not ready `down` (with a reload), unless no host is
        ready (then every host stays in, and each answers 503 with Retry-After itself)."""
        self.nginx_dir.mkdir(exist_ok=True)
        ready = [host for host, ok in self.healthy.items() if ok]
        servers = "\n".join(
            f"    server {ns.inside}:{API_PORT} max_fails=1 fail_timeout=2s"
            f"{'' if not ready or ns.inside in ready else ' down'};" for ns in self.namespaces)
        temp = self.nginx_dir
        (self.nginx_dir / "nginx.conf").write_text(f"""user root;
worker_processes 1;
daemon off;
pid {temp}/nginx.pid;
error_log {temp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {temp}/body;
  proxy_temp_path {temp}/proxy;
  fastcgi_temp_path {temp}/fastcgi;
  uwsgi_temp_path {temp}/uwsgi;
  scgi_temp_path {temp}/scgi;
  upstream tenet {{
{servers}
    keepalive 16;
  }}
  server {{
    listen 127.0.0.1:{self.nginx_port};
    client_max_body_size 25m;
    location / {{
      proxy_pass http://tenet;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_connect_timeout 1s;
      proxy_read_timeout 60s;
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries 2;
    }}
  }}
}}
""")

    def _health_loop(self) -> None:
        with httpx.Client(timeout=HEALTH_TIMEOUT) as client:
            while not self._health_stop.wait(0.5):
                changed = False
                for ns in self.namespaces:
                    try:
                        ok = client.get(f"http://{ns.inside}:{API_PORT}/readyz").status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    if self.healthy.get(ns.inside) != ok:
                        self.healthy[ns.inside] = ok
                        self.health_changes.append((time.monotonic(), ns.inside, ok))
                        changed = True
                if changed and self.nginx is not None and self.nginx.poll() is None:
                    self._write_nginx()
                    self.nginx.send_signal(signal.SIGHUP)

    def wait_ready(self, ns: Namespace, api: Managed, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert api.process is not None
            if api.process.poll() is not None:
                raise RuntimeError(f"{api.name} exited with {api.process.returncode}: see {api.log_path}")
            try:
                if httpx.get(f"http://{ns.inside}:{API_PORT}/readyz", timeout=15).status_code == 200:
                    api.ready_at = time.monotonic()
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{api.name} not ready after {timeout}s: see {api.log_path}")

    @staticmethod
    def wait_url(url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=15).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{url} not answering 200 after {timeout}s")

    # --- what the checks read --------------------------------------------------------------------------------

    def server_connections(self) -> dict[str, int]:
        """Client connections on the primary by application (this query's own excluded)."""
        assert self.cluster is not None
        with psycopg.connect(self.cluster.primary.url(DATABASE), autocommit=True) as connection:
            rows = connection.execute(
                "SELECT coalesce(nullif(application_name, ''), client_addr::text, 'local'), count(*) "
                "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "GROUP BY 1 ORDER BY 1").fetchall()
        return {str(name): int(count) for name, count in rows}

    def processes(self) -> list[Managed]:
        return [*self.apis, *self.workers]

    # --- closing ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove everything build() made, each part on its own (one that fails does not keep the rest)."""
        self._health_stop.set()
        steps = [lambda: self._health_thread.join(5) if self._health_thread else None, self._stop_nginx,
                 *(p.stop for p in self.processes()),
                 lambda: self.smtp.stop() if self.smtp else None,
                 lambda: self.bouncer.stop() if self.bouncer else None,
                 lambda: self.cluster.stop() if self.cluster else None,
                 *(ns.remove for ns in self.namespaces),
                 lambda: shutil.rmtree(self.dir, ignore_errors=True)]
        for step in steps:
            try:
                step()
            except Exception as exc:
                print(f"soak: while closing: {exc!r}", file=sys.stderr)

    def _stop_nginx(self) -> None:
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.terminate()
            self.nginx.wait(10)
