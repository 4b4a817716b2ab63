"""Time zones and recurrence of schedule items (SOC-INV-10, D-12): IANA names only, and expansion bounded to the
supported range, so a rule that never (or rarely) matches answers promptly on every path that expands it."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from tests.support.outcomes import code
from tests.support.recurrence import ONE_BOUNDED_WALK, counting_dateutil_periods

ITEM = {"title": "x", "start_at": "2026-03-02T17:00:00Z", "end_at": "2026-03-02T18:00:00Z",
        "timezone": "America/Los_Angeles"}


async def _walked(awaitable):
    """The answer and the periods dateutil walked for it: a denial-of-service regression walked millions (2 to 3 s
    of CPU per request); a bounded expansion walks at most ONE_BOUNDED_WALK (tests/support/recurrence.py)."""
    with counting_dateutil_periods() as walked:
        result = await awaitable
    return result, walked.periods


class TestBoundedExpansion:
    @pytest.mark.invariant("SOC-INV-10")
    @pytest.mark.parametrize("rule", [
        "FREQ=DAILY;COUNT=5;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=DAILY;UNTIL=99991231T000000Z;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=WEEKLY;BYMONTH=11;BYMONTHDAY=31",
        "FREQ=SECONDLY",
        "FREQ=MONTHLY;BYDAY=53MO",
        "FREQ=DAILY;INTERVAL=0",
    ])
    async def test_a_rule_without_an_occurrence_is_refused_promptly(self, api, ann, rule):
        response, walked = await _walked(api.post(ann, "/schedule-items", {**ITEM, "recurrence_rule": rule}))
        assert response.status_code == 422 and code(response) == "RECURRENCE_RULE_INVALID", response.text
        assert walked <= ONE_BOUNDED_WALK, walked

    async def test_a_far_until_ends_the_series_within_the_supported_range(self, api, ann):
        # Monday 2 March 2026 09:00 in Los Angeles, then every 2 March that is a Monday, until 9999.
        rule = "FREQ=DAILY;UNTIL=99991231T235959Z;BYMONTH=3;BYMONTHDAY=2;BYDAY=MO"
        response, walked = await _walked(api.post(ann, "/schedule-items", {**ITEM, "recurrence_rule": rule}))
        assert response.status_code == 201, response.text
        assert walked <= ONE_BOUNDED_WALK, walked
        assert response.json()["series_end_at"] == "2195-03-02T18:00:00Z"

    async def test_reads_of_a_stored_rule_that_never_matches_answer_promptly(self, api, ann, db):
        """A rule stored before validation refused it (or written by hand): the occurrence list and the todo
        extraction expand it within the bound."""
        item = await api.item(ann, recurrence_rule="FREQ=DAILY;COUNT=3")
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE social.schedule_items SET recurrence_rule = :r, series_end_at = NULL "
                                       "WHERE id = :id"),
                                  {"r": "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "id": item["id"]})
        response, walked = await _walked(api.get(ann, f"/schedule-items/{item['id']}/occurrences",
                                           **{"from": "2026-04-01T00:00:00Z", "to": "2026-05-01T00:00:00Z"}))
        assert response.status_code == 200 and response.json()["items"] == [] and walked <= ONE_BOUNDED_WALK, walked
        response, walked = await _walked(api.post(ann, "/todos/extract", {"schedule_item_ids": [item["id"]]}))
        assert response.status_code == 200 and response.json()["items"] == [] and walked <= ONE_BOUNDED_WALK, walked


class TestZones:
    @pytest.mark.invariant("SOC-INV-10")
    @pytest.mark.parametrize("zone", ["right/UTC", "posix/Asia/Shanghai", "localtime", "Factory"])
    async def test_names_zoneinfo_loads_that_are_no_iana_zone_are_refused(self, api, ann, zone):
        response = await api.post(ann, "/schedule-items", {**ITEM, "timezone": zone})
        assert response.status_code == 422 and code(response) == "TIMEZONE_INVALID", response.text
        settings = await api.patch(ann, "/me/settings", {"preferences": {"timezone": zone}})
        assert settings.status_code == 422 and code(settings) == "VALIDATION_FAILED", settings.text

    @pytest.mark.parametrize("zone", ["Asia/Shanghai", "UTC", "America/Argentina/Buenos_Aires"])
    async def test_iana_names_are_accepted(self, api, ann, zone):
        item = await api.ok(api.post(ann, "/schedule-items", {**ITEM, "timezone": zone}), 201)
        assert item["timezone"] == zone
        settings = await api.ok(api.patch(ann, "/me/settings", {"preferences": {"timezone": zone}}))
        assert settings["settings"]["preferences"]["timezone"] == zone


class TestSupportedRange:
    @pytest.mark.invariant("SOC-INV-10")
    @pytest.mark.parametrize("times", [
        {"end_at": "2200-06-01T00:00:00Z"},
        {"start_at": "2199-12-31T23:00:00Z", "end_at": "2200-01-01T01:00:00Z"},
        {"start_at": "0001-01-01T00:00:00+05:00", "end_at": "0001-01-01T01:00:00+05:00"},
        {"start_at": "9999-12-31T22:00:00-05:00", "end_at": "9999-12-31T23:00:00-05:00"},
        {"start_at": "1899-12-31T23:00:00Z"},
    ])
    async def test_an_item_outside_the_supported_range_is_422(self, api, ann, times):
        response = await api.post(ann, "/schedule-items", {**ITEM, **times})
        assert response.status_code == 422 and code(response) == "SCHEDULE_ITEM_INVALID", response.text
        item = await api.ok(api.post(ann, "/schedule-items", ITEM), 201)
        patched = await api.patch(ann, f"/schedule-items/{item['id']}", times)
        assert patched.status_code == 422 and code(patched) == "SCHEDULE_ITEM_INVALID", patched.text

    @pytest.mark.parametrize("window", [
        {"from": "2199-12-01T00:00:00Z", "to": "2200-01-02T00:00:00Z"},
        {"from": "1899-12-31T00:00:00Z", "to": "1900-01-02T00:00:00Z"},
    ])
    async def test_a_window_outside_the_supported_range_is_422(self, api, ann, window):
        item = await api.ok(api.post(ann, "/schedule-items", {**ITEM, "recurrence_rule": "FREQ=DAILY"}), 201)
        for path in ("/schedule-items", f"/schedule-items/{item['id']}/occurrences"):
            response = await api.get(ann, path, **window)
            assert response.status_code == 422 and code(response) == "SCHEDULE_WINDOW_INVALID", response.text

    async def test_the_last_day_of_the_range_is_reachable(self, api, ann):
        item = await api.ok(api.post(ann, "/schedule-items", {**ITEM, "recurrence_rule": "FREQ=DAILY"}), 201)
        page = await api.ok(api.get(ann, f"/schedule-items/{item['id']}/occurrences",
                                    **{"from": "2199-12-30T00:00:00Z", "to": "2200-01-01T00:00:00Z"}))
        assert [o["start_at"] for o in page["items"]] == ["2199-12-30T17:00:00Z", "2199-12-31T17:00:00Z"]
