"""agenda_read: `GET /api/v1/meeting-attendance/meetings/{id}/agenda` as a required attendee (the full view) of a
meeting with 5 sections x 6 items, every item with its upload tasks and a file, plus 3 meeting-level files.

What Tenet does for it (src/tenet/meetings/agenda/queries.py agenda): verify the JWT, load the principal, then one
statement (`AGENDA_SQL`: the caller's identity for the meeting, the live sections and items in order, each item's
files and tasks as JSON, the meeting files, whether anything changed after the end) and the nested JSON. The
baseline runs the same two statements and answers the rows.
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
from tenet.meetings.agenda import queries

DESCRIPTION = "GET a meeting's agenda (5 sections x 6 items, tasks and files) as an attendee: one statement"
SECTIONS, ITEMS = 5, 6


@dataclass(frozen=True)
class Context:
    meeting_id: str
    user_id: uuid.UUID
    token: str


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    people = await _agenda.people(client, database_url, 4)
    token = people.manager_token
    me = people.attendees[0]
    meeting_id = await _agenda.meeting(client, token, [a.id for a in people.attendees], "Board meeting")
    item_ids = await _agenda.items(client, token, meeting_id, SECTIONS, ITEMS)
    await _agenda.gather(4, [_agenda.call(client, token, "POST", f"/agenda/items/{item}/upload-tasks",
                                          json={"assignee_user_ids": [str(a.id) for a in people.attendees[:3]]})
                             for item in item_ids])
    await _agenda.gather(4, [_agenda.upload(client, token, item, f"slides {n}.pdf")
                             for n, item in enumerate(item_ids)])
    for n in range(3):
        body = (f'--{_agenda.BOUNDARY}\r\nContent-Disposition: form-data; name="category"\r\n\r\nMINUTES\r\n'
                f'--{_agenda.BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="minutes {n}.pdf"\r\n'
                f"Content-Type: application/pdf\r\n\r\n").encode() + _agenda.PDF + \
            f"\r\n--{_agenda.BOUNDARY}--\r\n".encode()
        await _agenda.call(client, token, "POST", f"/meetings/{meeting_id}/attachments", content=body,
                           headers={"Content-Type": f"multipart/form-data; boundary={_agenda.BOUNDARY}"})
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        await connection.execute("ANALYZE")
        await connection.commit()
    check_invariants(database_url)
    return Context(meeting_id=meeting_id, user_id=me.id, token=await sign_in(client, me))


def wrk_request(context: Context) -> Request:
    return Request(path=f"{_agenda.BASE}/meetings/{context.meeting_id}/agenda",
                   headers={"Authorization": f"Bearer {context.token}"})


def baseline_sql(context: Context) -> list[Statement]:
    return [Statement(PRINCIPAL_SQL, principal_params(context.user_id, context.token)),
            Statement(queries.AGENDA_SQL, {"id": context.meeting_id, "caller": context.user_id, "manager": False})]


def check(client: httpx.Client, service: str, context: Context) -> None:
    if service != "tenet":
        return
    agenda = client.get(wrk_request(context).path, headers=wrk_request(context).headers).json()
    items = [i for s in agenda["sections"] for i in s["items"]]
    if agenda["view"] != "full" or len(items) != SECTIONS * ITEMS or len(agenda["meeting_attachments"]) != 3 \
            or any(len(i["attachments"]) != 1 or len(i["upload_tasks"]) != 1 for i in items):
        raise SystemExit("tenet's agenda is not the loaded one")


def describe(context: Context) -> dict[str, object]:
    return {"sections": SECTIONS, "items": SECTIONS * ITEMS, "item_files": SECTIONS * ITEMS, "meeting_files": 3}
