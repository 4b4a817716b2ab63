"""What the soak's load acts on besides the virtual users' own accounts, made through the API (never the database)
before the load's clock starts:

- an administrator (made by `tenet users create-admin`, as an operator would) who makes every virtual user a
  MeetingManager, registers the hotel `SOAK` and the SuperAgent's API client (scope `reservations:ingest`);
- one meeting per virtual user, open for check-in during the whole soak, with every virtual user required and one
  agenda item their files are uploaded to;
- daily `todo_digest` automations whose slots fall on the minutes of the soak, a burst every minute (so a worker
  killed while it drains a burst is killed mid-job), each slot to run exactly once.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import httpx

if TYPE_CHECKING:
    from ops.soak.load import VirtualUser

ADMIN_EMAIL = "soak-admin@example.com"
ADMIN_PASSWORD = "a soak administrator password 1"
HOTEL = "SOAK"
ZONE = "America/Los_Angeles"  # TENET_DEFAULT_TIMEZONE of the soak's processes: the users' zone (they set none)
MA = "/api/v1/meeting-attendance"
# The first automation slot is at least this far ahead (the automations are made before it comes); the last
# falls this long before the load ends (the soak then waits for every slot's run before its checks).
FIRST_SLOT_AHEAD = 45.0
LAST_SLOT_MARGIN = 10.0
SETUP_CONCURRENCY = 8


@dataclass(frozen=True)
class Meeting:
    id: str
    offline_code: str
    item_id: str


@dataclass(frozen=True)
class Automation:
    id: str
    slot: datetime  # its first (and, within the soak, only) slot, as the service answered it


@dataclass
class World:
    admin_token: str
    ingest_client: tuple[str, str]  # (client_id, client_secret) of the SuperAgent's API client
    ingest_token: str = ""
    meetings: list[Meeting] = field(default_factory=list)
    automations: list[Automation] = field(default_factory=list)
    _token_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def refresh_ingest_token(self, client: httpx.AsyncClient, stale: str) -> str:
        """A new client-credentials token, once for all the users who found `stale` expired."""
        async with self._token_lock:
            if self.ingest_token == stale:
                client_id, secret = self.ingest_client
                self.ingest_token = await _token(client, {"grant_type": "client_credentials", "client_id": client_id,
                                                          "client_secret": secret})
            return self.ingest_token


async def _token(client: httpx.AsyncClient, form: dict[str, str]) -> str:
    for _ in range(60):
        try:
            response = await client.post("/api/v1/auth/token", data=form)
        except httpx.HTTPError:
            await asyncio.sleep(1)
            continue
        if response.status_code == 200:
            return str(response.json()["access_token"])
        await asyncio.sleep(1)
    raise RuntimeError(f"no token for {form.get('username') or form.get('client_id')}")


async def _ok(response: httpx.Response | None, what: str, *statuses: int) -> dict[str, Any]:
    if response is None or response.status_code not in (statuses or (200, 201)):
        raise RuntimeError(f"{what}: {response.status_code if response else 'no answer'} "
                           f"{response.text[:300] if response else ''}")
    return response.json() if response.content else {}


async def prepare(client: httpx.AsyncClient, people: list[VirtualUser], *, duration: float,
                  automations_per_minute: int) -> World:
    """The administrator's set-up, then each user's meeting and automations (see the module's text)."""
    admin_token = await _token(client, {"grant_type": "password", "username": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
    admin = {"Authorization": f"Bearer {admin_token}"}
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def make_manager(person: VirtualUser) -> None:
        async with gate:
            await _ok(await client.put(f"/api/v1/iam/users/{person.user_id}/roles", headers=admin,
                                       json={"roles": ["MeetingManager"]}), "granting MeetingManager")

    await asyncio.gather(*(make_manager(p) for p in people))
    await _ok(await client.post("/api/v1/reservations/hotels", headers=admin,
                                json={"hotel_id": HOTEL, "display_name": "Soak hotel"}), "registering the hotel", 201)
    made = await _ok(await client.post("/api/v1/iam/api-clients", headers=admin, json={
        "name": "soak superagent", "scopes": ["reservations:ingest"], "hotel_ids": [HOTEL]}), "the ingest client", 201)
    world = World(admin_token=admin_token, ingest_client=(made["client_id"], made["client_secret"]))
    world.ingest_token = await _token(client, {"grant_type": "client_credentials", "client_id": made["client_id"],
                                               "client_secret": made["client_secret"]})
    attendees = [str(p.user_id) for p in people]
    world.meetings = list(await asyncio.gather(*(_meeting(p, attendees, duration) for p in people)))
    slots = _slots(datetime.now(UTC), duration)
    wanted = [(slot, n) for slot in slots for n in range(automations_per_minute)]

    async def automation(slot: datetime, n: int) -> Automation:
        async with gate:
            return await _automation(people[n % len(people)], slot)

    world.automations = list(await asyncio.gather(*(automation(slot, n) for slot, n in wanted)))
    return world


def _slots(now: datetime, duration: float) -> list[datetime]:
    """Whole minutes from FIRST_SLOT_AHEAD after now to LAST_SLOT_MARGIN before the load would end."""
    soonest = now + timedelta(seconds=FIRST_SLOT_AHEAD)
    first = soonest.replace(second=0, microsecond=0)
    if first < soonest:
        first += timedelta(minutes=1)
    last = now + timedelta(seconds=duration - LAST_SLOT_MARGIN)
    slots = []
    while first <= last:
        slots.append(first)
        first += timedelta(minutes=1)
    return slots


async def _meeting(person: VirtualUser, attendees: list[str], duration: float) -> Meeting:
    start = datetime.now(UTC) - timedelta(minutes=5)
    answer = await _ok(await person.write("setup.meeting", f"{MA}/meetings", {
        "title": f"Soak meeting {person.n}", "start_time": start.isoformat(),
        "end_time": (start + timedelta(seconds=duration + 3600)).isoformat(), "required_attendee_ids": attendees,
        "offline_checkin_enabled": True}), "creating a meeting", 201)
    code = httpx.URL(answer["qr_code_offline"]["check_in_url"]).params["code"]
    section = await _ok(await person.write("setup.section", f"{MA}/meetings/{answer['id']}/agenda/sections",
                                           {"title": "Materials"}), "an agenda section", 201)
    item = await _ok(await person.write("setup.item", f"{MA}/agenda/sections/{section['id']}/items",
                                        {"title": "Files of the soak"}), "an agenda item", 201)
    return Meeting(id=answer["id"], offline_code=code, item_id=item["id"])


async def _automation(person: VirtualUser, slot: datetime) -> Automation:
    wall = slot.astimezone(ZoneInfo(ZONE)).strftime("%H:%M")
    answer = await _ok(await person.write("setup.automation", "/api/v1/social/automations", {
        "name": f"Soak digest {uuid.uuid4().hex[:6]}", "job_type": "todo_digest", "params": {"skip_if_empty": False},
        "schedule_type": "daily", "schedule_time": wall}), "creating an automation", 201)
    return Automation(id=answer["id"], slot=datetime.fromisoformat(answer["next_run_at"]))
