"""The soak's load generator: virtual users through the load balancer, each a loop of weighted steps, reads and
writes of every system: workspaces and invitations (with mail), social todos, groups and the inbox, meeting
check-ins by users and by guests without an account, uploads to an agenda item, the SuperAgent's AI batches, and
their reads (ops/soak/world.py makes what these act on). Every answer is a Sample; every write the service
acknowledged is an Ack (checked against the database at the end, an upload's bytes included); every invitation's
address is kept (its mail is checked against the SMTP server). A write is retried with the same Idempotency-Key
on what a client retries (a connection error, 502/503/504, 409 while the first attempt is still running),
honouring Retry-After: the retry must land as exactly one effect.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import string
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ops.soak import world as soak_world
from ops.soak.checks import Ack, Upload
from ops.soak.world import MA, World

PASSWORD = "a soak password 1"
RETRYABLE = {502, 503, 504}
WRITE_ATTEMPTS = 60  # at most; WRITE_DEADLINE is the bound (a dead claim answers 409 for up to 15 s, an outage 503)
WRITE_DEADLINE = 90.0  # seconds a client keeps retrying one write
UPLOAD_BYTES = (8 * 1024, 128 * 1024)


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
    uploads: list[Upload] = field(default_factory=list)
    invited: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)  # writes never acknowledged (not a loss: never promised)
    replayed: int = 0

    def note(self, op: str, status: int, began: float, retry_after: bool = False) -> None:
        now = time.monotonic()
        self.samples.append(Sample(max(0.0, began - self.started), op, status, now - began, retry_after))


class VirtualUser:
    def __init__(self, client: httpx.AsyncClient, record: Record, n: int, seed: int) -> None:
        self.client = client
        self.record = record
        self.n = n
        self.random = random.Random(seed)
        self.email = f"soak-{n}-{uuid.uuid4().hex[:6]}@example.com"
        self.token = ""
        self.user_id = ""
        self.workspaces: list[str] = []
        self.world: World | None = None
        self.checked_in: set[str] = set()  # meetings this user has checked in to

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

    async def write(self, op: str, url: str, body: dict[str, Any] | None = None, *, auth: bool = True,
                    form: bool = False, files: dict[str, Any] | None = None, content: bytes | None = None,
                    token: Callable[[], Awaitable[dict[str, str]]] | None = None) -> httpx.Response | None:
        """POST until acknowledged or given up, always with the same Idempotency-Key. `files` is sent as
        multipart/form-data (a new boundary on every attempt, as real clients do); `token` gives other
        credentials than the user's (the SuperAgent's) and renews them on 401."""
        key = uuid.uuid4().hex
        deadline = time.monotonic() + WRITE_DEADLINE
        for _ in range(WRITE_ATTEMPTS):
            credentials = (await token()) if token is not None else (self.headers if auth else {})
            headers = {"Idempotency-Key": key, **credentials}
            payload: dict[str, Any] = (
                {"files": files} if files is not None else {"content": content} if content is not None
                else {"data": body} if form else {"json": body})
            if content is not None:
                headers["Content-Type"] = "application/json"
            response = await self._attempt(op, "POST", url, headers=headers, **payload)
            if response is not None and response.status_code == 401 and (auth or token is not None):
                await (self._renew_ingest(credentials) if token is not None else self.sign_in())
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

    async def _renew_ingest(self, stale: dict[str, str]) -> None:
        assert self.world is not None
        await self.world.refresh_ingest_token(self.client, stale["Authorization"].removeprefix("Bearer "))

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
        me = await self.client.get("/api/v1/auth/me", headers=self.headers)
        self.user_id = me.json()["user"]["id"]

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
        draw = self.random.random() * TOTAL_WEIGHT
        for weight, action in STEPS:
            if draw < weight:
                await action(self)
                return
            draw -= weight

    # --- writes ------------------------------------------------------------------------------------------------

    def _acked(self, answer: httpx.Response | None, kind: str, key: str = "id") -> dict[str, Any] | None:
        if answer is None or answer.status_code not in (200, 201):
            return None
        body: dict[str, Any] = answer.json()
        self.record.acks.append(Ack(kind, str(body[key])))
        return body

    async def create_workspace(self) -> None:
        answer = await self.write("workspace.create", "/api/v1/workspaces",
                                  {"name": f"Soak {self.n} {uuid.uuid4().hex[:6]}"})
        body = self._acked(answer, "workspace")
        if body is not None:
            self.workspaces.append(body["id"])

    async def invite(self) -> None:
        if not self.workspaces:
            await self.create_workspace()
            return
        address = f"guest-{uuid.uuid4().hex[:10]}@example.com"
        workspace = self.random.choice(self.workspaces)
        answer = await self.write("invitation.create", f"/api/v1/workspaces/{workspace}/invitations",
                                  {"email": address, "role": "member"})
        if self._acked(answer, "invitation") is not None:
            self.record.invited.append(address)

    async def create_todo(self) -> None:
        self._acked(await self.write("todo.create", "/api/v1/social/todos", {"title": f"Soak todo {self.n}"}), "todo")

    async def create_group(self) -> None:
        self._acked(await self.write("group.create", "/api/v1/social/groups", {"name": f"Soak group {self.n}"}),
                    "group")

    async def guest_check_in(self) -> None:
        meeting = self.random.choice(self._world().meetings)
        device = uuid.uuid4().hex
        answer = await self.write("checkin.guest", f"{MA}/public/meetings/{meeting.id}/check-in", {
            "mode": "offline", "code": meeting.offline_code, "device_id": device, "name": f"Guest {device[:8]}",
            "email": f"{device}@guests.example.com"}, auth=False)
        self._acked(answer, "attendance", "attendance_id")

    async def user_check_in(self) -> None:
        waiting = [m for m in self._world().meetings if m.id not in self.checked_in]
        if not waiting:
            await self.guest_check_in()
            return
        meeting = self.random.choice(waiting)
        answer = await self.write("checkin.user", f"{MA}/meetings/{meeting.id}/check-in",
                                  {"mode": "online", "device_id": f"soak-{self.n}-{meeting.id}"})
        if self._acked(answer, "attendance", "attendance_id") is not None:
            self.checked_in.add(meeting.id)

    async def upload(self) -> None:
        meeting = self._world().meetings[self.n % len(self._world().meetings)]
        size = self.random.randint(*UPLOAD_BYTES)
        text = "".join(self.random.choices(string.ascii_letters + string.digits + " \n", k=size)).encode()
        answer = await self.write("upload", f"{MA}/agenda-items/{meeting.item_id}/attachments",
                                  files={"file": (f"notes-{uuid.uuid4().hex[:6]}.txt", text, "text/plain")})
        body = self._acked(answer, "attachment")
        if body is not None:
            self.record.uploads.append(Upload(body["id"], hashlib.sha256(text).hexdigest(), body["download_url"]))

    async def ingest(self) -> None:
        world = self._world()
        message = self.random.randint(1, 2**53)
        items = ",".join(
            '{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","current_or_history":"current",'
            f'"source_event_index":{i + 1},"case_keys":{{"confirmation_number":"SK{message % 10**8:08d}{i}"}},'
            '"extracted_fields":{"room_type":"KING","adults":2}}' for i in range(self.random.randint(1, 3)))
        body = (f'{{"hotel_id":"{soak_world.HOTEL}","source_message_id":{message},'
                f'"request_id":"soak-{uuid.uuid4().hex}","ai_task_results":[{items}]}}').encode()

        async def credentials() -> dict[str, str]:
            return {"Authorization": f"Bearer {world.ingest_token}"}

        self._acked(await self.write("ai.ingest", "/api/v1/reservations/ai-batches", content=body,
                                     token=credentials), "ai_batch", "batch_id")

    # --- reads -------------------------------------------------------------------------------------------------

    async def read_attendance(self) -> None:
        meeting = self.random.choice(self._world().meetings)
        await self.read("meeting.attendances", f"{MA}/meetings/{meeting.id}/attendances?limit=50")

    async def read_agenda(self) -> None:
        meeting = self.random.choice(self._world().meetings)
        await self.read("meeting.agenda", f"{MA}/meetings/{meeting.id}/agenda")

    async def read_members(self) -> None:
        if self.workspaces:
            await self.read("workspace.members", f"/api/v1/workspaces/{self.random.choice(self.workspaces)}/members")

    def _world(self) -> World:
        assert self.world is not None, "prepare() gives every user the world"
        return self.world


def _read(op: str, url: str) -> Callable[[VirtualUser], Awaitable[None]]:
    async def read(person: VirtualUser) -> None:
        await person.read(op, url)
    return read


# The mix of one step (weights out of 100): two writes in five, every system's.
STEPS: list[tuple[float, Callable[[VirtualUser], Awaitable[None]]]] = [
    (6, VirtualUser.create_workspace), (9, VirtualUser.invite), (8, VirtualUser.create_todo),
    (4, VirtualUser.create_group), (14, VirtualUser.guest_check_in), (4, VirtualUser.user_check_in),
    (8, VirtualUser.ingest), (5, VirtualUser.upload),
    (5, _read("workspace.list", "/api/v1/workspaces")), (4, VirtualUser.read_members),
    (8, _read("todo.list", "/api/v1/social/todos")), (3, _read("group.list", "/api/v1/social/groups")),
    (7, _read("inbox", "/api/v1/social/inbox")), (2, _read("me", "/api/v1/auth/me")),
    (9, VirtualUser.read_attendance), (4, VirtualUser.read_agenda),
]
TOTAL_WEIGHT = sum(weight for weight, _ in STEPS)


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
                   duration: float, automations_per_minute: int, loaded: asyncio.Event | None = None,
                   prepared: Callable[[World], None] | None = None) -> None:
    """`users` virtual users, each pausing `think` seconds between steps (the bound on the load), until `stop`
    is set; `loaded` is set once they have signed in and the world is made, when the load (and its clock,
    record.started) begins; `prepared` is given the world."""
    limits = httpx.Limits(max_connections=users * 2, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(30.0, connect=3.0), limits=limits) as client:
        people = [VirtualUser(client, record, n, seed=n) for n in range(users)]
        await asyncio.gather(*(p.setup() for p in people))
        world = await soak_world.prepare(client, people, duration=duration,
                                         automations_per_minute=automations_per_minute)
        for person in people:
            person.world = world
        if prepared is not None:
            prepared(world)
        record.started = time.monotonic()
        if loaded is not None:
            loaded.set()

        async def loop(person: VirtualUser) -> None:
            while not stop.is_set():
                await person.step()
                await asyncio.sleep(person.random.uniform(0.5 * think, 1.5 * think))

        await asyncio.gather(*(loop(p) for p in people))
