"""Issue 24 item 12: a Python `$` matches before a trailing newline. A schedule item's rule part carrying one passed
the Python shape check and broke the table's CHECK (a 500); it is refused as the rule it is."""

from __future__ import annotations

import pytest
from tests.support.outcomes import code

ITEM = {"title": "x", "start_at": "2026-03-02T17:00:00Z", "end_at": "2026-03-02T18:00:00Z",
        "timezone": "America/Los_Angeles"}


@pytest.mark.parametrize("rule", ["UNTIL=20261231T235959Z\n;FREQ=DAILY", "FREQ=WEEKLY;BYDAY=MO\n;COUNT=2"])
async def test_a_rule_part_with_a_newline_is_refused_not_a_500(api, ann, rule):
    response = await api.post(ann, "/schedule-items", {**ITEM, "recurrence_rule": rule})
    assert (response.status_code, code(response)) == (422, "RECURRENCE_RULE_INVALID")
