"""checkin_burst: a burst of distinct check-ins on one meeting, users and guests mixed (issue 10, "Performance").

Requests: seven in ten are `POST /api/v1/meeting-attendance/meetings/{id}/check-in` by a signed-in user (each
user once, with their own token and device), three in ten (and every request once the users are used up)
`POST /api/v1/meeting-attendance/public/meetings/{id}/check-in` by a new guest (a new name, email and device, and
the meeting's offline code, as its offline QR code's address carries it).
Every answer should be 201: a distinct check-in. Each wrk run (Tenet's warm-up and measurement, the baseline's)
has a meeting of its own, so the sides never answer each other's people.

What Tenet does for one (src/tenet/meetings/checkin.py): verify the JWT and load the principal (users); count the
guest rate limit in one autocommit statement, only if the meeting exists (guests); then one unit of work: the
probe statement (the meeting, the person's live attendance, the device's) and one write statement inserting the
attendance, its ACCEPTED scan and its audit row (plus the guest row for guests) while the insert trigger takes the
meeting's shared advisory lock and decides the window and lateness; COMMIT. The write goes behind a savepoint sent
in the same round trip (tenet.kernel.refusals: a refusal of the trigger is taken back and recorded); the baseline
sets none, so what the savepoint costs shows in the ratio. Otherwise the baseline runs the same statements (Tenet's
own SQL constants) with the same values, the count as one autocommit statement, then the same transaction.

After the runs, `describe` counts each meeting's rows: attendances, accepted scans, live duplicates per person
and per device (must be 0), and runs `tenet invariants check` on the database.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg

from bench.loading import check_invariants, register_users, sign_in
from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.kernel import ratelimit
from tenet.kernel.settings import Rate
from tenet.meetings import checkin
from tenet.meetings.checkin import Guest

DESCRIPTION = "POST check-in: distinct users (own token and device) and guests on one meeting per run"
USERS = 1000
RUNS = ("tenet-warmup", "tenet", "baseline-warmup", "baseline")
GUEST_LIMIT = "100000000/minute"
SERVICE_ENV = {"TENET_GUEST_CHECKIN_LIMIT": GUEST_LIMIT}
BASE = "/api/v1/meeting-attendance"


USER_PROBE = checkin.USER_PROBE
USER_INSERT = checkin.USER_INSERT
GUEST_PROBE = checkin.GUEST_PROBE
GUEST_INSERT = checkin.GUEST_INSERT
# Tenet counts a guest only when the meeting exists, in the same statement (issue 24 item 8), on an autocommit
# connection of its own (kernel.ratelimit.consume): its own SQL constants.
RATE_SQL = ratelimit._COUNT_IF.format(condition=checkin._MEETING_EXISTS)


@dataclass(frozen=True)
class Context:
    database_url: str
    meetings: dict[str, str]          # wrk run label -> meeting id
    offline_codes: dict[str, str]     # wrk run label -> the meeting's offline code (its offline QR code's `code`)
    users: list[tuple[str, str]]      # (user id, token)
    manager_token: str


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (manager,) = await register_users(client, 1, prefix="manager")
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await connection.execute("INSERT INTO iam.user_role (user_id, role_name, granted_at) "
                                  "VALUES (%s, 'MeetingManager', now())", (manager.id,))
        await connection.commit()
    manager_token = await sign_in(client, manager)
    people = await register_users(client, USERS, prefix="attendee")
    tokens = [(str(p.id), await sign_in(client, p)) for p in people]
    start = datetime.now(UTC) - timedelta(minutes=10)
    meetings, offline_codes = {}, {}
    for run in RUNS:
        response = await client.post(f"{BASE}/meetings", headers={"Authorization": f"Bearer {manager_token}"}, json={
            "title": f"Burst {run}", "start_time": start.isoformat(),
            "end_time": (start + timedelta(hours=4)).isoformat(),
            "required_attendee_ids": [p.id.hex for p in people[: USERS // 2]]})
        if response.status_code != 201:
            raise SystemExit(f"creating the meeting answered {response.status_code}: {response.text[:300]}")
        meetings[run] = response.json()["id"]
        offline_codes[run] = parse_qs(urlsplit(response.json()["qr_code_offline"]["check_in_url"]).query)["code"][0]
    return Context(database_url=database_url, meetings=meetings, offline_codes=offline_codes, users=tokens,
                   manager_token=manager_token)


def wrk_request(context: Context) -> Request:
    """The one-off request of the answer check: a guest of the warm-up meeting."""
    device = uuid.uuid4().hex
    return Request(path=f"{BASE}/public/meetings/{context.meetings['tenet-warmup']}/check-in", method="POST",
                   headers={"Content-Type": "application/json"},
                   body=json.dumps({"name": f"Check {device[:6]}", "device_id": device, "mode": "offline",
                                    "code": context.offline_codes["tenet-warmup"]}))


def wrk_lua(context: Context) -> str:
    meetings = ", ".join(f'["{run}"] = "{meeting}"' for run, meeting in context.meetings.items())
    codes = ", ".join(f'["{run}"] = "{code}"' for run, code in context.offline_codes.items())
    tokens = ",\n".join(f'"{token}"' for _, token in context.users)
    return f"""
local meetings = {{{meetings}}}
local codes = {{{codes}}}
local tokens = {{
{tokens}
}}
local sent, users_sent = 0, 0

function scenario_init()
  meeting = meetings[bench_run]
  code = codes[bench_run]
end

function request()
  sent = sent + 1
  local device = bench_run .. "-t" .. thread_index .. "-" .. sent
  local user = (thread_index - 1) + bench_threads * users_sent + 1
  if sent % 10 < 7 and user <= #tokens then
    users_sent = users_sent + 1
    -- ?u= names the user for the baseline, which sees no headers; Tenet ignores it.
    return wrk.format("POST", "{BASE}/meetings/" .. meeting .. "/check-in?u=" .. (user - 1),
      {{["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[user]}},
      '{{"mode":"online","device_id":"' .. device .. '"}}')
  end
  return wrk.format("POST", "{BASE}/public/meetings/" .. meeting .. "/check-in",
    {{["Content-Type"] = "application/json"}},
    '{{"mode":"offline","code":"' .. code .. '","device_id":"' .. device .. '","name":"Guest ' .. device ..
    '","email":"' .. device .. '@bench.example"}}')
end
"""


def baseline_config(context: Context) -> dict[str, object]:
    return {"users": [[user_id, token] for user_id, token in context.users]}


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    parts = request.path.split("/")
    body = json.loads(request.body)
    now = datetime.now(UTC)
    params = {"now": now, "mode": body["mode"], "device_id": body["device_id"], "client_address": "127.0.0.1",
              "code_step": None, "request_id": uuid.uuid4().hex, "attendance_id": uuid.uuid4()}
    if parts[4] == "public":  # /api/v1/meeting-attendance/public/meetings/{id}/check-in
        meeting_id = parts[6]
        rate = Rate.parse(GUEST_LIMIT)
        start = ratelimit._window_start(now, rate.window)
        await cursor.connection.set_autocommit(True)  # Tenet counts in one autocommit statement
        await cursor.execute(RATE_SQL, {"bucket": f"ma.guest-checkin:{meeting_id}:127.0.0.1", "start": start,
                                        "expires": start + rate.window, "meeting_id": meeting_id})
        await cursor.fetchall()
        await cursor.connection.set_autocommit(False)
        guest = Guest.clean(name=body["name"], email=body.get("email"), phone=None, organization=None)
        digest = guest.digest(meeting_id)
        await cursor.execute(GUEST_PROBE, {"meeting_id": meeting_id, "digest": digest, "device_id": body["device_id"]})
        probe = await cursor.fetchone()
        assert probe is not None  # the probe's aggregates answer one row
        await cursor.execute(GUEST_INSERT, {
            **params, "meeting_id": meeting_id, "channel": "GUEST", "guest_id": uuid.uuid4(),
            "existing_guest_id": probe["guest_id"], "name": guest.name, "email": guest.email, "phone": None,
            "organization": None, "digest": digest, "action": "GUEST_CHECK_IN", "actor_type": "guest"})
    else:  # /api/v1/meeting-attendance/meetings/{id}/check-in
        meeting_id = parts[5]
        user, token = config["users"][int(request.query["u"])]
        user_id = uuid.UUID(user)
        await cursor.execute(PRINCIPAL_SQL, principal_params(user_id, token))
        await cursor.fetchall()
        await cursor.execute(USER_PROBE, {"meeting_id": meeting_id, "user_id": user_id,
                                          "device_id": body["device_id"]})
        await cursor.fetchone()
        await cursor.execute(USER_INSERT, {**params, "meeting_id": meeting_id, "channel": "USER", "user_id": user_id,
                                           "action": "CHECK_IN", "actor_type": "user"})
    row = await cursor.fetchone()
    if row is None or row.get("id") is None:
        return BaselineAnswer(409, {"code": "DEVICE_ALREADY_USED"})
    return BaselineAnswer(201, {"attendance_id": row["id"], "meeting_id": meeting_id, "status": row["status"],
                                "checked_in_at": row["checked_in_at"], "already_checked_in": False})


def describe(context: Context) -> dict[str, object]:
    return {"users": len(context.users), "required_attendees": USERS // 2, "meetings": context.meetings}


def verify(context: Context) -> dict[str, object]:
    """Per run: the check-ins the database holds, and the duplicates and losses it must not have."""
    facts: dict[str, object] = {}
    with psycopg.connect(context.database_url) as connection:
        for run, meeting in context.meetings.items():
            counts = connection.execute(
                "SELECT count(*), count(user_id), count(guest_id), (SELECT count(*) FROM "
                "meeting_attendance.checkin_scans s WHERE s.meeting_id = %(m)s AND s.outcome = 'ACCEPTED') "
                "FROM meeting_attendance.attendances WHERE meeting_id = %(m)s", {"m": meeting}).fetchone()
            doubled = connection.execute(
                "SELECT (SELECT count(*) FROM (SELECT user_id FROM meeting_attendance.attendances WHERE meeting_id = "
                "%(m)s AND user_id IS NOT NULL AND status <> 'VOIDED' GROUP BY user_id HAVING count(*) > 1) d) + "
                "(SELECT count(*) FROM (SELECT device_id FROM meeting_attendance.attendances WHERE meeting_id = %(m)s "
                "AND status <> 'VOIDED' GROUP BY device_id HAVING count(*) > 1) e)", {"m": meeting}).fetchone()
            assert counts is not None and doubled is not None  # aggregates always answer one row
            (attendances, users, guests, accepted), (duplicates,) = counts, doubled
            facts[run] = {"check_ins": attendances, "users": users, "guests": guests, "accepted_scans": accepted,
                          "duplicates": duplicates, "lost": attendances - accepted}
    check_invariants(context.database_url)
    facts["invariants"] = "tenet invariants check passed after the runs"
    if any(isinstance(v, dict) and (v["duplicates"] or v["lost"]) for v in facts.values()):
        raise SystemExit(f"check-ins duplicated or lost: {facts}")
    return facts
