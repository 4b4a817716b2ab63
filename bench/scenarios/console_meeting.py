"""console_meeting: the manager's console page of a meeting with 300 required attendees, 240 of them checked in
(`GET /console/meetings/{id}`, HTML, signed in by a console session), against the JSON routes that answer what the
page shows, in the same run (issue 18).

The "baseline" here is not a bare SQL service: it is Tenet's own JSON API. The page reads, through the queries the
API routes call, the meeting (`GET /api/v1/meeting-attendance/meetings/{id}`), its first 200 required attendees
(`GET .../meetings/{id}/required-attendees?limit=200`) and the board's first 200 attendances
(`GET .../meetings/{id}/attendances?limit=200`), plus the session and the viewer's settings: five statements. A
client of the API needs those three requests for the same picture, so the table shows each route alone and their
sum of per-request service time beside the page's.

wrk sends one kind of request per run, so the scenario measures with the harness's own `_measure` on one Tenet
(`measure`): the page, then each JSON route, each with its warm-up, at the same concurrency.

Data: 300 accounts registered through the API, the meeting created through it with all of them required and
started 10 minutes ago; 240 check-ins written in SQL (an attendance with its ACCEPTED scan each, as a check-in
leaves them), then `tenet invariants check`.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg

from bench import report, wrk
from bench.cli import RATE_ENV, SERVICE_ENV, _measure, _settings_env
from bench.loading import check_invariants, register_users, sign_in
from bench.scenario import Request
from bench.services import BenchDatabase, ServiceProcess, log, start_tenet
from tenet.db.database import libpq_url

DESCRIPTION = "GET the manager's console page of a meeting (300 required, 240 present) vs the JSON routes it shows"
ATTENDEES, PRESENT = 300, 240
BASE = "/api/v1/meeting-attendance"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')

CHECK_INS_SQL = """
    WITH picked AS (
        SELECT r.meeting_id, r.user_id, m.start_time, row_number() OVER (ORDER BY r.user_id) AS n
          FROM meeting_attendance.meeting_required_attendees r
          JOIN meeting_attendance.meetings m ON m.id = r.meeting_id
         WHERE m.id = %(meeting)s),
    a AS (
        INSERT INTO meeting_attendance.attendances (id, meeting_id, subject_type, user_id, status, status_source,
               mode, device_id, checked_in_at, created_at, updated_at, version)
        SELECT gen_random_uuid(), meeting_id, 'USER', user_id, 'PRESENT', 'CHECK_IN', 'offline',
               'bench-' || replace(user_id::text, '-', ''), start_time, start_time, start_time, 1
          FROM picked WHERE n <= %(present)s
        RETURNING id, meeting_id, user_id, checked_in_at, device_id)
    INSERT INTO meeting_attendance.checkin_scans (meeting_id, occurred_at, channel, mode, user_id, attendance_id,
           device_id, outcome)
    SELECT meeting_id, checked_in_at, 'USER', 'offline', user_id, id, device_id, 'ACCEPTED' FROM a"""


async def _console_cookie(client: httpx.AsyncClient, email: str, password: str) -> str:
    """A console session for the manager: the sign-in form's token, then the form."""
    form = await client.get("/console/sign-in")
    found = _CSRF.search(form.text)
    if found is None:
        raise SystemExit(f"the console's sign-in form has no CSRF token: {form.text[:300]}")
    answer = await client.post("/console/sign-in", data={"csrf_token": found.group(1), "email": email,
                                                         "password": password, "next": "/console"})
    secret = answer.cookies.get("tenet_session")
    if answer.status_code != 303 or not secret:
        raise SystemExit(f"the console's sign-in answered {answer.status_code}: {answer.text[:300]}")
    return f"tenet_anon={client.cookies.get('tenet_anon')}; tenet_session={secret}"


async def _setup(base_url: str, database_url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        (manager,) = await register_users(client, 1, prefix="manager")
        async with await psycopg.AsyncConnection.connect(database_url) as connection:
            await connection.execute("INSERT INTO iam.user_role (user_id, role_name, granted_at) "
                                     "VALUES (%s, 'MeetingManager', now())", (manager.id,))
            await connection.commit()
        token = await sign_in(client, manager)
        people = await register_users(client, ATTENDEES, prefix="attendee")
        start = datetime.now(UTC) - timedelta(minutes=10)
        response = await client.post(f"{BASE}/meetings", headers={"Authorization": f"Bearer {token}"}, json={
            "title": "All hands", "timezone": "UTC", "location": "Main hall", "start_time": start.isoformat(),
            "end_time": (start + timedelta(hours=2)).isoformat(),
            "required_attendee_ids": [str(p.id) for p in people]})
        if response.status_code != 201:
            raise SystemExit(f"creating the meeting answered {response.status_code}: {response.text[:300]}")
        meeting_id = str(response.json()["id"])
        async with await psycopg.AsyncConnection.connect(database_url) as connection:
            await connection.execute(CHECK_INS_SQL, {"meeting": meeting_id, "present": PRESENT})
            await connection.commit()
            await connection.execute("ANALYZE")
            await connection.commit()
        check_invariants(database_url)
        cookie = await _console_cookie(client, manager.email, manager.password)
    return {"meeting_id": meeting_id, "token": token, "cookie": cookie}


def requests(context: dict[str, Any]) -> dict[str, Request]:
    meeting, bearer = context["meeting_id"], {"Authorization": f"Bearer {context['token']}"}
    return {
        "page": Request(path=f"/console/meetings/{meeting}", headers={"Cookie": context["cookie"]}),
        "meeting": Request(path=f"{BASE}/meetings/{meeting}", headers=bearer),
        "required_attendees": Request(path=f"{BASE}/meetings/{meeting}/required-attendees?limit=200",
                                      headers=bearer),
        "attendances": Request(path=f"{BASE}/meetings/{meeting}/attendances?limit=200", headers=bearer),
    }


def _check(service: ServiceProcess, name: str, request: Request) -> None:
    answer = httpx.get(service.base_url + request.path, headers=request.headers, timeout=30)
    if answer.status_code != 200:
        raise SystemExit(f"{name} answered {answer.status_code}: {answer.text[:500]}")
    if name == "page" and (f"{PRESENT}" not in answer.text or 'id="board"' not in answer.text):
        raise SystemExit("the console page does not show the board with the loaded check-ins")
    if name == "attendances" and len(answer.json()["items"]) != 200:
        raise SystemExit(f"the attendances route answered {len(answer.json()['items'])} rows, not 200")


def measure(args: Any) -> dict[str, Any]:
    tool = wrk.ensure_wrk()
    database = BenchDatabase.create()
    tenet: ServiceProcess | None = None
    results: dict[str, Any] = {}
    try:
        log(f"starting Tenet ({args.workers} workers) in {database.data_dir}")
        tenet = start_tenet(database, workers=args.workers, extra_env=_settings_env({**SERVICE_ENV, **RATE_ENV}))
        tenet.wait_ready()
        database.join_embedded()
        assert database.url is not None
        context = asyncio.run(_setup(tenet.base_url, libpq_url(database.url)))
        for name, request in requests(context).items():
            _check(tenet, name, request)
            script = wrk.write_script(request, database.data_dir / f"{name}.lua")
            result, used, _waits = _measure(tool, tenet, database, request, args, script)
            results[name] = {"path": request.path, **result.to_dict(), "cpu": used}
    finally:
        if tenet is not None:
            tenet.stop()
        database.close()
    return {"scenario": "console_meeting", "description": DESCRIPTION, "attendees": ATTENDEES, "present": PRESENT,
            "parameters": {"workers": args.workers, "concurrency": args.concurrency, "duration_s": args.duration,
                           "warmup_s": args.warmup}, "runs": results}


def table(results: dict[str, Any]) -> str:
    p = results["parameters"]
    lines = [f"## console_meeting: {DESCRIPTION}", "",
             f"{p['workers']} API processes, {p['concurrency']} connections, {p['duration_s']} s each after "
             f"{p['warmup_s']} s of warm-up; one Tenet, one database, one run.", "",
             "| Request | req/s | P50 ms | P99 ms | non-2xx | service CPU ms/req | PostgreSQL CPU ms/req |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    service_sum, pg_sum = 0.0, 0.0
    for name, run in results["runs"].items():
        cpu = run["cpu"]
        if name != "page":
            service_sum += cpu["service_ms_per_request"] or 0.0
            pg_sum += cpu["postgresql_ms_per_request"] or 0.0
        lines.append(f"| {name} (`{run['path']}`) | {run['requests_per_s']:,.1f} | {run['latency_ms']['p50']:.2f} | "
                     f"{run['latency_ms']['p99']:.2f} | {run['non_2xx']} | "
                     f"{report.fmt(cpu['service_ms_per_request'])} | {report.fmt(cpu['postgresql_ms_per_request'])} |")
    # A client of the API needs all three answers for the page's picture: one after the other, as many pictures per
    # second as 1 / (the sum of each route's seconds per request).
    json_runs = [run for name, run in results["runs"].items() if name != "page"]
    pictures = 1 / sum(1 / run["requests_per_s"] for run in json_runs) if all(
        run["requests_per_s"] for run in json_runs) else 0.0
    lines.append(f"| the three JSON routes together (sum; pictures/s) | {pictures:,.1f} | | | | {service_sum:.2f} | "
                 f"{pg_sum:.2f} |")
    return "\n".join(lines) + "\n"
