"""Issue 24 item 12: a Python `$` matches before a trailing newline, so shapes checked with `^...$` let a newline
through. The rotating code, a meeting id and a series rule part each refuse one (tests/kernel/test_regex_anchors.py
keeps every pattern of src honest)."""

from __future__ import annotations

from datetime import datetime

import pytest

from tenet.meetings.codes import CheckInCodes
from tests.conftest import TEST_SECRET
from tests.support.outcomes import code


@pytest.mark.invariant("MA-INV-14")
async def test_a_rotating_code_with_a_trailing_newline_is_not_valid(ma, manager, users, clock):
    meeting = await ma.create_ok(manager, rotating_online_code=True)
    clock.set(datetime.fromisoformat(meeting["start_time"]))
    genuine = CheckInCodes(TEST_SECRET, 30).code(meeting["id"], clock.now())
    refused = await ma.check_in(await users.make(), meeting["id"], mode="online", code=genuine + "\n")
    assert (refused.status_code, code(refused)) == (403, "CHECK_IN_CODE_INVALID")
    assert (await ma.check_in(await users.make(), meeting["id"], mode="online", code=genuine)).status_code == 201


async def test_a_series_rule_part_with_a_newline_is_refused_not_a_500(ma, manager):
    response = await ma.call("POST", "/series", manager, json={
        "title": "S", "start_date": "2026-03-02", "start_local_time": "09:00", "duration_minutes": 30,
        "rrule": "FREQ=WEEKLY;BYDAY=MO\n;COUNT=2"})
    assert (response.status_code, code(response)) == (422, "RECURRENCE_INVALID")
