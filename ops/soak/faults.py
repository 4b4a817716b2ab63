"""The faults the soak injects, each blocking until the topology is whole again (run in a thread while the load
runs). Each returns an Outcome: a note for the report, and what the checks must find done exactly once."""

from __future__ import annotations

import hashlib
import string
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import psycopg

from ops.soak.checks import Upload
from ops.soak.topology import API_PORT, DATABASE, Managed, Topology
from ops.soak.world import ADMIN_EMAIL, ADMIN_PASSWORD, MA, World

API_DOWN = 3.0  # seconds a killed API process stays down before it is restarted
PRIMARY_DOWN = 6.0  # seconds the primary is stopped
REPLICA_DOWN = 12.0  # seconds the replica is stopped


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the load began
    kind: str


@dataclass(frozen=True)
class Outcome:
    """What a fault did: a note for the report and, for a worker killed mid-job, the automation runs it was
    executing (each must still run exactly once, on another worker)."""

    note: str
    runs_cut: list[str] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)  # acknowledged uploads the fault itself made


MID_DRAIN_TIMEOUT = 75.0  # seconds to wait for a worker executing automation runs (a burst falls every minute)

KINDS = ("api-kill", "worker-kill", "pgbouncer-restart", "primary-restart", "replica-stop")


def schedule(duration: float) -> list[Fault]:
    """Every kind in turn from 15 s in, spread evenly; at 2 minutes that is one of each kind."""
    rounds = max(1, int(duration // 120))
    gap = (duration - 25) / (rounds * len(KINDS))
    return [Fault(round(15 + i * gap, 1), KINDS[i % len(KINDS)]) for i in range(rounds * len(KINDS))]


def inject(topology: Topology, fault: Fault, n: int, made: World) -> Outcome:
    if fault.kind == "api-kill":
        return _kill_an_api_host(topology, n, made)
    if fault.kind == "worker-kill":
        return _kill_a_worker(topology, n)
    if fault.kind == "pgbouncer-restart":
        assert topology.bouncer is not None
        topology.bouncer.halt()
        topology.bouncer.start()
        return Outcome("PgBouncer stopped and started on the same port")
    if fault.kind == "primary-restart":
        assert topology.cluster is not None
        topology.cluster.primary.stop("fast")
        time.sleep(PRIMARY_DOWN)
        topology.cluster.primary.start()
        return Outcome(f"primary stopped (fast) for {PRIMARY_DOWN:.0f} s, Tenet not restarted")
    if fault.kind == "replica-stop":
        assert topology.cluster is not None
        topology.cluster.standby.stop("fast")
        time.sleep(REPLICA_DOWN)
        topology.cluster.standby.start()
        return Outcome(f"replica stopped for {REPLICA_DOWN:.0f} s")
    raise ValueError(fault.kind)


def _kill_an_api_host(topology: Topology, n: int, made: World) -> Outcome:
    """SIGKILL an API host while an upload is streaming into it (sent straight to the host, throttled), restart
    it after API_DOWN; the client sends the upload again through the load balancer under the same
    Idempotency-Key until it is acknowledged: one file must be stored (the checks count the soak's files)."""
    index = n % len(topology.apis)
    api, ns = topology.apis[index], topology.namespaces[index]
    upload = InFlightUpload(made, f"http://{ns.inside}:{API_PORT}", topology.base_url)
    streaming = threading.Thread(target=upload.send_straight, daemon=True)
    streaming.start()
    upload.started.wait(10)
    time.sleep(0.6)  # the claim of its Idempotency-Key is made and the body is streaming
    api.kill()
    time.sleep(API_DOWN)
    api.restart()
    streaming.join(30)
    retried = upload.retry_through_the_balancer()
    topology.wait_ready(ns, api)
    return Outcome(f"{api.name} SIGKILLed with an upload streaming into it, restarted after {API_DOWN:.0f} s; "
                   f"{retried}", uploads=upload.acknowledged)


class InFlightUpload:
    """A 4 MiB text upload to the soak's first agenda item as the administrator, under one Idempotency-Key."""

    SIZE = 4 * 1024 * 1024
    CHUNK = 256 * 1024
    PAUSE = 0.1  # between chunks: the upload takes about 1.6 s, so the kill lands in the middle of it

    def __init__(self, made: World, host_url: str, balancer_url: str) -> None:
        self.host_url, self.balancer_url = host_url, balancer_url
        self.path = f"{MA}/agenda-items/{made.meetings[0].item_id}/attachments"
        self.key = f"soak-inflight-{uuid.uuid4().hex}"
        self.content = (string.ascii_letters * (self.SIZE // len(string.ascii_letters) + 1))[:self.SIZE].encode()
        self.boundary = uuid.uuid4().hex
        self.started = threading.Event()
        self.first_attempt = ""
        self.acknowledged: list[Upload] = []

    def _token(self, client: httpx.Client) -> str:
        answer = client.post("/api/v1/auth/token", data={"grant_type": "password", "username": ADMIN_EMAIL,
                                                          "password": ADMIN_PASSWORD})
        return str(answer.json()["access_token"])

    def _body(self, throttled: bool) -> Iterator[bytes]:
        yield (f'--{self.boundary}\r\nContent-Disposition: form-data; name="file"; filename="in-flight.txt"\r\n'
               f"Content-Type: text/plain\r\n\r\n").encode()
        for start in range(0, self.SIZE, self.CHUNK):
            if throttled:
                self.started.set()
                time.sleep(self.PAUSE)
            yield self.content[start:start + self.CHUNK]
        yield f"\r\n--{self.boundary}--\r\n".encode()

    def _headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}", "Idempotency-Key": self.key,
                "Content-Type": f"multipart/form-data; boundary={self.boundary}"}

    def send_straight(self) -> None:
        with httpx.Client(base_url=self.host_url, timeout=30) as client:
            try:
                answer = client.post(self.path, headers=self._headers(self._token(client)), content=self._body(True))
                self.first_attempt = str(answer.status_code)
            except httpx.HTTPError as exc:
                self.first_attempt = type(exc).__name__
            finally:
                self.started.set()

    def retry_through_the_balancer(self, deadline: float = 120.0) -> str:
        """Again and again under the same key until acknowledged: say how it went."""
        statuses: list[str] = []
        ends = time.monotonic() + deadline
        with httpx.Client(base_url=self.balancer_url, timeout=30) as client:
            token = self._token(client)
            while time.monotonic() < ends:
                try:
                    answer = client.post(self.path, headers=self._headers(token), content=self._body(False))
                except httpx.HTTPError as exc:
                    statuses.append(type(exc).__name__)
                    time.sleep(1)
                    continue
                statuses.append(str(answer.status_code))
                if answer.status_code == 201:
                    body = answer.json()
                    self.acknowledged.append(Upload(body["id"], hashlib.sha256(self.content).hexdigest(),
                                                    body["download_url"]))
                    replayed = answer.headers.get("idempotent-replayed") == "true"
                    return (f"the upload's first attempt ended {self.first_attempt}; its retries under the same key "
                            f"answered {', '.join(statuses)}{' (replayed)' if replayed else ''}")
                time.sleep(min(5.0, float(answer.headers.get("retry-after", "1"))))
        return f"the upload was never acknowledged: {', '.join(statuses)}"


def _kill_a_worker(topology: Topology, n: int) -> Outcome:
    """SIGKILL a worker while it executes automation runs (mid-job: its drain holds them), else the next worker
    while any job runs; restart it a second later."""
    worker, runs = _wait_for_a_worker_mid_drain(topology, MID_DRAIN_TIMEOUT)
    busy = bool(runs)
    if worker is None:
        worker = topology.workers[n % len(topology.workers)]
        busy = _wait_for_running_job(topology, 10.0)
    worker.kill()
    time.sleep(1.0)
    worker.restart()
    what = f"executing {len(runs)} automation runs" if runs else ("with a job running" if busy else "idle")
    return Outcome(f"{worker.name} SIGKILLed {what}", runs_cut=runs)


def _wait_for_a_worker_mid_drain(topology: Topology, timeout: float) -> tuple[Managed | None, list[str]]:
    """The first worker seen executing automation runs on their first attempt (claimed_by is `host:pid:token`),
    and those runs. Runs a kill already cut once are not aimed at again: recovered runs are the first a drainer
    claims at the next minute, when the next kill comes, and three deaths of their workers in a row would fail
    them by design (max_attempts bounds a run that kills its worker); the issue's case is one kill per job."""
    assert topology.cluster is not None
    by_pid = {str(w.process.pid): w for w in topology.workers if w.process is not None}
    deadline = time.monotonic() + timeout
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            rows = connection.execute("SELECT id, split_part(claimed_by, ':', 2), attempt FROM social.automation_runs "
                                      "WHERE status = 'running'").fetchall()
            for pid in {pid for _, pid, _ in rows} & by_pid.keys():
                held = [(str(run), attempt) for run, owner, attempt in rows if owner == pid]
                if all(attempt == 1 for _, attempt in held):
                    return by_pid[pid], [run for run, _ in held]
            time.sleep(0.02)
    return None, []


def _wait_for_running_job(topology: Topology, timeout: float) -> bool:
    """Until a job is running (procrastinate's 'doing'), so the kill lands mid-job when there is one."""
    assert topology.cluster is not None
    deadline = time.monotonic() + timeout
    with psycopg.connect(topology.cluster.primary.url(DATABASE), autocommit=True) as connection:
        while time.monotonic() < deadline:
            row = connection.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'").fetchone()
            if row and row[0]:
                return True
            time.sleep(0.05)
    return False
