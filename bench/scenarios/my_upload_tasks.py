"""my_upload_tasks: `GET /api/v1/meeting-attendance/me/upload-tasks?status=PENDING&limit=50` for an employee with 40
pending upload tasks among about 4,500 tasks of 500 agenda items in 20 meetings (issue 11; the design's
`my_upload_tasks`).

What Tenet does for it (src/tenet/meetings/agenda/api.py my_tasks, queries.py my_tasks): verify the JWT, load
the principal on the read path, then one statement (`MY_TASKS_SQL`: the caller's live tasks of that status, soonest
due first, on `ix_meeting_agenda_item_upload_tasks_assignee`, joined to item, section and meeting by primary key;
limit + 1 rows) and the page as JSON. The baseline runs the same two statements and answers the rows.

Data, all through the API: 20 meetings of 10 attendees, one section of 25 items each; nine attendees are asked for
material on every item, the measured one on 40 of them (two due dates, the rest undated).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
import psycopg

from bench.loading import check_invariants, sign_in
from bench.scenario import Request, Statement
from bench.scenarios import _agenda
from bench.scenarios._sql import PRINCIPAL_SQL, principal_params
from tenet.kernel.pagination import PageParams
from tenet.meetings.agenda import queries

DESCRIPTION = "GET my upload tasks (40 pending of ~4,500 tasks): one read-path statement"
MEETINGS, ITEMS_PER_MEETING, PENDING = 20, 25, 40


@dataclass(frozen=True)
class Context:
    user_id: uuid.UUID
    token: str
    tasks: int


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    people = await _agenda.people(client, database_url, 10)
    me, others = people.attendees[0], people.attendees[1:]
    token = people.manager_token
    everyone = [a.id for a in people.attendees]
    assigned_to_me = 0
    for m in range(MEETINGS):
        meeting_id = await _agenda.meeting(client, token, everyone, f"Meeting {m + 1}")
        item_ids = await _agenda.items(client, token, meeting_id, 1, ITEMS_PER_MEETING)
        calls = []
        for item_id in item_ids:
            who = [str(o.id) for o in others]
            body: dict = {"assignee_user_ids": who}
            if assigned_to_me < PENDING:
                who.append(str(me.id))
                assigned_to_me += 1
                if assigned_to_me % 3 == 0:
                    body["due_at"] = f"2030-0{1 + assigned_to_me % 9}-01T00:00:00+00:00"
            calls.append(_agenda.call(client, token, "POST", f"/agenda/items/{item_id}/upload-tasks", json=body))
        await _agenda.gather(8, calls)
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        counted = await (await connection.execute(
            "SELECT count(*) FROM meeting_attendance.meeting_agenda_item_upload_tasks")).fetchone()
        assert counted is not None
        tasks = counted[0]
        await connection.execute("ANALYZE")
        await connection.commit()
    check_invariants(database_url)
    return Context(user_id=me.id, token=await sign_in(client, me), tasks=tasks)


PATH = f"{_agenda.BASE}/me/upload-tasks?status=PENDING&limit=50"


def wrk_request(context: Context) -> Request:
    return Request(path=PATH, headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: Context) -> list[Statement]:
    page = PageParams(limit=50)
    after, params = queries.MY_TASKS_KEYSET.after(page)
    sql = queries.MY_TASKS_SQL.format(after=after, order=queries.MY_TASKS_KEYSET.order_by)
    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token)),
            Statement(sql, {"caller": context.user_id, "statuses": ["PENDING"],
                            "limit": queries.MY_TASKS_KEYSET.fetch_limit(page), **params})]


def check(client: httpx.Client, service: str, context: Context) -> None:
    if service != "tenet":
        return
    page = client.get(PATH, headers={"Authorization": f"Bearer {context.token}"}).json()
    if len(page["items"]) != PENDING or page["next_cursor"] is not None:
        raise SystemExit(f"tenet lists {len(page['items'])} pending tasks, not {PENDING}")


def describe(context: Context) -> dict[str, object]:
    return {"tasks": context.tasks, "pending_of_caller": PENDING, "meetings": MEETINGS,
            "items": MEETINGS * ITEMS_PER_MEETING}
