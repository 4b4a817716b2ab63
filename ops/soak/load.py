"""The soak's load generator: virtual users through the load balancer, each a loop of mixed reads and writes
(workspaces, invitations with mail, social todos and groups, and their reads). Every answer is a Sample; every
write the service acknowledged is an Ack (checked against the database at the end); every invitation's address is
kept (its mail is checked against the SMTP server). A write is retried with the same Idempotency-Key on what a
client retries (a connection error, 502/503/504, 409 while the first attempt is still running), honouring
Retry-After: the retry must land as exactly one effect.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from ops.soak.checks import Ack

PASSWORD = "a soak password 1"
RETRYABLE = {502, 503, 504}
WRITE_ATTEMPTS = 12
WRITE_DEADLINE = 90.0  # seconds a client keeps retrying one write


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the load began
    op: str
    status: int  # 0: no answer (connection error or timeout)
    latency: float
    retry_after: bool = False


@dataclass
class Record:
    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    invited: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)  # writes never acknowledged (not a loss: never promised)
    replayed: int = 0

    def note(self, op: str, status: int, began: float, retry_after: bool = False) -> None:
        now = time.monotonic()
        self.samples.append(Sample(began - self.started, op, status, now - began, retry_after))


class VirtualUser:
    def __init__(self, client: httpx.AsyncClient, record: Record, n: int, seed: int) -> None:
        self.client = client
        self.record = record
        self.n = n
        self.random = random.Random(seed)
        self.email = f"soak-{n}-{uuid.uuid4().hex[:6]}@example.com"
        self.token = ""
        self.workspaces: list[str] = []

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def _attempt(self, op: str, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        began = time.monotonic()
        try:
            response = await self.client.request(method, url, **kwargs)
        except httpx.HTTPError:
            self.record.note(op, 0, began)
            return None
        self.record.note(op, response.status_code, began, "retry-after" in response.headers)
        return response

    async def write(self, op: str, url: str, body: dict[str, Any], *, auth: bool = True,
                    form: bool = False) -> httpx.Response | None:
        """POST until acknowledged or given up, always with the same Idempotency-Key."""
        key = uuid.uuid4().hex
        deadline = time.monotonic() + WRITE_DEADLINE
        for _ in range(WRITE_ATTEMPTS):
            headers = {"Idempotency-Key": key, **(self.headers if auth else {})}
            payload = {"data": body} if form else {"json": body}
            response = await self._attempt(op, "POST", url, headers=headers, **payload)
            if response is not None and response.status_code == 401 and auth:
                await self.sign_in()
                continue
            if response is not None and response.status_code < 500 and not _in_progress(response):
                if response.headers.get("idempotent-replayed") == "true":
                    self.record.replayed += 1
                return response
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(_pause(response))
        self.record.abandoned.append(op)
        return None

    async def read(self, op: str, url: str) -> None:
        response = await self._attempt(op, "GET", url, headers=self.headers)
        if response is not None and response.status_code == 401:
            await self.sign_in()

    async def setup(self) -> None:
        registered = await self.write("register", "/api/v1/auth/register",
                                      {"email": self.email, "password": PASSWORD, "display_name": f"Soak {self.n}"},
                                      auth=False)
        if registered is None or registered.status_code not in (201, 409):
            raise RuntimeError(f"could not register {self.email}: {registered and registered.text}")
        await self.sign_in()

    async def sign_in(self) -> None:
        for _ in range(60):
            began = time.monotonic()
            try:
                response = await self.client.post("/api/v1/auth/token", data={
                    "grant_type": "password", "username": self.email, "password": PASSWORD})
            except httpx.HTTPError:
                self.record.note("sign-in", 0, began)
                await asyncio.sleep(1)
                continue
            self.record.note("sign-in", response.status_code, began, "retry-after" in response.headers)
            if response.status_code == 200:
                self.token = response.json()["access_token"]
                return
            await asyncio.sleep(_pause(response))
        raise RuntimeError(f"could not sign {self.email} in")

    async def step(self) -> None:
        choice = self.random.random()
        if choice < 0.12 or not self.workspaces:
            answer = await self.write("workspace.create", "/api/v1/workspaces",
                                      {"name": f"Soak {self.n} {uuid.uuid4().hex[:6]}"})
            if answer is not None and answer.status_code == 201:
                self.workspaces.append(answer.json()["id"])
                self.record.acks.append(Ack("workspace", answer.json()["id"]))
        elif choice < 0.27:
            address = f"guest-{uuid.uuid4().hex[:10]}@example.com"
            workspace = self.random.choice(self.workspaces)
            answer = await self.write("invitation.create", f"/api/v1/workspaces/{workspace}/invitations",
                                      {"email": address, "role": "member"})
            if answer is not None and answer.status_code == 201:
                self.record.acks.append(Ack("invitation", answer.json()["id"]))
                self.record.invited.append(address)
        elif choice < 0.42:
            answer = await self.write("todo.create", "/api/v1/social/todos", {"title": f"Soak todo {self.n}"})
            if answer is not None and answer.status_code == 201:
                self.record.acks.append(Ack("todo", answer.json()["id"]))
        elif choice < 0.50:
            answer = await self.write("group.create", "/api/v1/social/groups", {"name": f"Soak group {self.n}"})
            if answer is not None and answer.status_code == 201:
                self.record.acks.append(Ack("group", answer.json()["id"]))
        elif choice < 0.62:
            await self.read("workspace.list", "/api/v1/workspaces")
        elif choice < 0.72:
            await self.read("workspace.members", f"/api/v1/workspaces/{self.random.choice(self.workspaces)}/members")
        elif choice < 0.84:
            await self.read("todo.list", "/api/v1/social/todos")
        elif choice < 0.92:
            await self.read("group.list", "/api/v1/social/groups")
        else:
            await self.read("me", "/api/v1/auth/me")


def _in_progress(response: httpx.Response) -> bool:
    return response.status_code == 409 and "retry-after" in response.headers


def _pause(response: httpx.Response | None) -> float:
    if response is not None and "retry-after" in response.headers:
        try:
            return min(2.0, max(0.2, float(response.headers["retry-after"])))
        except ValueError:
            return 1.0
    return 0.5


async def run_load(base_url: str, *, users: int, think: float, record: Record, stop: asyncio.Event,
                   loaded: asyncio.Event | None = None) -> None:
    """`users` virtual users, each pausing `think` seconds between steps (the bound on the load), until `stop`
    is set; `loaded` is set once they have signed in and the load (and its clock, record.started) begins."""
    limits = httpx.Limits(max_connections=users * 2, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(30.0, connect=3.0), limits=limits) as client:
        people = [VirtualUser(client, record, n, seed=n) for n in range(users)]
        await asyncio.gather(*(p.setup() for p in people))
        record.started = time.monotonic()
        if loaded is not None:
            loaded.set()

        async def loop(person: VirtualUser) -> None:
            while not stop.is_set():
                await person.step()
                await asyncio.sleep(person.random.uniform(0.5 * think, 1.5 * think))

        await asyncio.gather(*(loop(p) for p in people))
