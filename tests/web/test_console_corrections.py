"""Excuse and undo from the live board (issue 18): the API's commands with a reason, refusals in words next to the
reason, 412 for a stale form, and neither link nor a forged form for a role without meeting:attendance:manage."""

from __future__ import annotations

import re

import pytest

from tenet.iam.permissions import Role
from tests.web.test_console_http import BASE, _meeting, csrf_of, page_csrf, sign_in


@pytest.fixture
async def manager(users):
    return await users.make(roles=[Role.MEETING_MANAGER], display_name="Mona Manager")


@pytest.fixture
async def employee(users):
    return await users.make(roles=[Role.EMPLOYEE], display_name="Emil Employee")


async def _board_row(client, manager, meeting_id: str) -> dict:
    rows = (await client.get(f"{BASE}/meetings/{meeting_id}/attendances", headers=manager.headers)).json()["items"]
    return rows[0]


async def test_a_manager_excuses_then_undoes_with_a_reason(client, manager, employee, clock):
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(employee.id)])
    mid = meeting["id"]
    await sign_in(client, manager.email)
    board = await client.get(f"/console/meetings/{mid}/board")
    link = re.search(r'class="correct" href="([^"]+)"', board.text).group(1).replace("&amp;", "&")
    assert link == f"/console/meetings/{mid}/correction?user_id={employee.id}"
    form = await client.get(link)
    assert form.status_code == 200 and "Emil Employee" in form.text
    data = {"csrf_token": csrf_of(form.text), "user_id": str(employee.id), "status": "EXCUSED"}
    missing = await client.post(f"/console/meetings/{mid}/correction", data={**data, "note": " "})
    assert missing.status_code == 422 and 'data-code="ATTENDANCE_NOTE_REQUIRED"' in missing.text
    assert 'aria-describedby="correction-error"' in missing.text
    excused = await client.post(f"/console/meetings/{mid}/correction", data={**data, "note": "At the dentist"})
    assert excused.status_code == 303, excused.text
    row = await _board_row(client, manager, mid)
    assert (row["status"], row["note"]) == ("EXCUSED", "At the dentist")

    board = await client.get(f"/console/meetings/{mid}/board")
    assert re.search(r'id="count-excused"><strong>1<', board.text)
    link = re.search(r'class="correct" href="([^"]+)"', board.text).group(1)
    assert link.endswith(f"attendance_id={row['id']}")
    form = await client.get(link)
    undo = {"csrf_token": csrf_of(form.text), "attendance_id": row["id"], "status": "ABSENT",
            "version": re.search(r'name="version" value="(\d+)"', form.text).group(1), "note": "Came after all"}
    stale = await client.post(f"/console/meetings/{mid}/correction", data={**undo, "version": "999"})
    assert stale.status_code == 412 and 'data-code="PRECONDITION_FAILED"' in stale.text
    undone = await client.post(f"/console/meetings/{mid}/correction", data=undo)
    assert undone.status_code == 303, undone.text
    row = await _board_row(client, manager, mid)
    assert (row["id"], row["status"]) == (None, "ABSENT")


async def test_a_leader_gets_no_link_and_a_forged_correction_is_refused(client, users, manager, employee, clock):
    leader = await users.make(roles=[Role.LEADER], display_name="Lea Leader")
    meeting = await _meeting(client, manager, clock, required_attendee_ids=[str(employee.id)],
                             organizer_id=str(leader.id))
    mid = meeting["id"]
    await sign_in(client, leader.email)
    board = await client.get(f"/console/meetings/{mid}/board")  # the organizer sees the board
    assert board.status_code == 200 and 'class="correct"' not in board.text
    assert (await client.get(f"/console/meetings/{mid}/correction", params={"user_id": str(employee.id)})
            ).status_code == 403
    forged = await client.post(f"/console/meetings/{mid}/correction", data={
        "csrf_token": await page_csrf(client), "user_id": str(employee.id), "status": "EXCUSED", "note": "x"})
    assert forged.status_code == 403
    assert (await _board_row(client, manager, mid))["status"] == "ABSENT"
