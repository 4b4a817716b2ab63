"""series_report: `GET /api/v1/meeting-attendance/reports/series/{id}` for a weekly series of 52 held meetings
with 300 required attendees, 80 % of whom checked in to each (issue 10, "Performance").

What Tenet does for it (src/tenet/meetings/reports.py series_report): verify the JWT and load the principal,
then one statement on the read path (`SERIES_SQL`: the series, each started occurrence's figures and each
attendee's over 52 x 300 = 15,600 required rows joined to their live attendances), and the JSON of 52 meeting
rows and 300 attendee rows. The baseline runs the same two statements and answers their rows as JSON.

Data: the series is created through the API (its 52 meetings, their 15,600 attendee rows and 104 QR codes),
starting 53 weeks ago; the check-ins are written in SQL (an attendance with its ACCEPTED scan each, as a
check-in leaves them; 12,480 of them through the API would take minutes), then `tenet invariants check`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from bench.loading import check_invariants, register_users, sign_in
from bench.scenario import Request, Statement
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.meetings.reports import SERIES_SQL

DESCRIPTION = "GET the report of a weekly series: 52 held meetings x 300 required attendees, 80 % present"
ATTENDEES = 300
WEEKS = 52
BASE = "/api/v1/meeting-attendance"


@dataclass(frozen=True)
class Context:
    series_id: uuid.UUID
    manager_id: uuid.UUID
    token: str
    now: datetime


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (manager,) = await register_users(client, 1, prefix="manager")
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await connection.execute("INSERT INTO iam.user_role (user_id, role_name, granted_at) "
                                 "VALUES (%s, 'MeetingManager', now())", (manager.id,))
        await connection.commit()
    token = await sign_in(client, manager)
    people = await register_users(client, ATTENDEES, prefix="attendee")
    first = (datetime.now(UTC) - timedelta(weeks=WEEKS + 1)).date()
    response = await client.post(f"{BASE}/series", headers={"Authorization": f"Bearer {token}"}, timeout=120, json={
        "title": "Weekly all-hands", "timezone": "UTC", "start_date": first.isoformat(), "start_local_time": "09:00",
        "duration_minutes": 60, "rrule": f"FREQ=WEEKLY;COUNT={WEEKS}",
        "required_attendee_ids": [str(p.id) for p in people]})
    if response.status_code != 201:
        raise SystemExit(f"creating the series answered {response.status_code}: {response.text[:300]}")
    series_id = uuid.UUID(response.json()["series"]["id"])
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        # Four in five attendees of every meeting check in, one in eight of them late (the trigger decides).
        await connection.execute("""
            WITH picked AS (
                SELECT r.meeting_id, r.user_id, m.start_time,
                       row_number() OVER (PARTITION BY r.meeting_id ORDER BY r.user_id) AS n
                  FROM meeting_attendance.meeting_required_attendees r
                  JOIN meeting_attendance.meetings m ON m.id = r.meeting_id
                 WHERE m.series_id = %(series)s),
            a AS (
                INSERT INTO meeting_attendance.attendances (id, meeting_id, subject_type, user_id, status,
                       status_source, mode, device_id, checked_in_at, created_at, updated_at, version)
                SELECT gen_random_uuid(), meeting_id, 'USER', user_id, 'PRESENT', 'CHECK_IN', 'offline',
                       'bench-' || replace(user_id::text, '-', ''),
                       start_time + CASE WHEN n %% 8 = 0 THEN interval '10 minutes' ELSE interval '0' END,
                       start_time, start_time, 1
                  FROM picked WHERE n %% 5 <> 0
                RETURNING id, meeting_id, user_id, checked_in_at, device_id)
            INSERT INTO meeting_attendance.checkin_scans (meeting_id, occurred_at, channel, mode, user_id,
                   attendance_id, device_id, outcome)
            SELECT meeting_id, checked_in_at, 'USER', 'offline', user_id, id, device_id, 'ACCEPTED' FROM a""",
                                 {"series": series_id})
        await connection.commit()
        # Statistics as autovacuum would have them on a database that holds a year of meetings (the plans of both
        # sides depend on them; fresh tables without them get nested loops over 15,600 rows).
        await connection.execute("ANALYZE")
        await connection.commit()
    check_invariants(database_url)
    return Context(series_id=series_id, manager_id=manager.id, token=token, now=datetime.now(UTC))


def wrk_request(context: Context) -> Request:
    return Request(path=f"{BASE}/reports/series/{context.series_id}",
                   headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: Context) -> list[Statement]:
    return [Statement(PRINCIPAL_SQL, principal_params(context.manager_id, context.token)),
            Statement(SERIES_SQL, {"series_id": context.series_id, "now": context.now})]


def check(client: httpx.Client, service: str, context: Context) -> None:
    if service != "tenet":
        return
    report = client.get(wrk_request(context).path, headers=wrk_request(context).headers).json()
    expected = {"meetings_counted": WEEKS, "attendees": ATTENDEES}
    found = {"meetings_counted": report["meetings_counted"], "attendees": len(report["attendees"])}
    if found != expected or report["meetings"][0]["present"] + report["meetings"][0]["late"] != ATTENDEES * 4 // 5:
        raise SystemExit(f"tenet's series report is not the loaded data: {found}")


def describe(context: Context) -> dict[str, object]:
    return {"meetings": WEEKS, "required_attendees": ATTENDEES, "required_rows": WEEKS * ATTENDEES,
            "check_ins": WEEKS * ATTENDEES * 4 // 5}
