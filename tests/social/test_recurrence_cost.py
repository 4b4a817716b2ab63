"""Recurrence read at the window (issue 24, item 2): a series that began long ago costs the periods of the window,
not of the years since its start, on every path that expands it (the occurrence list, the todo extraction, the
reminder job), and heavy work (expansions, the ICS feed) runs off the event loop, so `/healthz` answers meanwhile.

Cost is counted in periods dateutil walks (tests/support/recurrence.py), never timed; "off the loop" is proven by
pausing the work until another request has been answered (tests/support/loop.py).
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest
from dateutil import rrule as dateutil_rrule
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.loop import answered_while_paused, pausing
from tests.support.recurrence import counting_dateutil_periods
from tests.support.rows import counting_rows_read

from tenet.kernel import recurrence as kernel_recurrence
from tenet.social import automations, errors, recurrence

# The probe's items: daily from 2 January 1900, at 09:00 in London (GMT in winter since 1900, BST in summer).
OLD_DAILY = {"start_at": "1900-01-02T09:00:00+00:00", "end_at": "1900-01-02T10:00:00+00:00",
             "timezone": "Europe/London", "recurrence_rule": "FREQ=DAILY"}
# A windowed expansion starts two days before the window's start (kernel.recurrence: any zone's offset change is
# less) and stops at the first occurrence after its end: a daily window of n days walks at most n + 4 periods.
SLACK = 4


async def _old_items(api, owner, count: int, **fields) -> list[str]:
    return [(await api.item(owner, title=f"Old {n}", **{**OLD_DAILY, **fields}))["id"] for n in range(count)]


class TestReadAtTheWindow:
    @pytest.mark.invariant("SOC-INV-10")
    async def test_extracting_todos_of_fifty_century_old_daily_items_walks_the_window_only(self, api, ann):
        """The probe: 50 daily items from 1900 made this request walk 50 x 46,000 days (15-20 s)."""
        ids = await _old_items(api, ann, 50)
        with counting_dateutil_periods() as walked:
            extracted = await api.ok(api.post(ann, "/todos/extract", {
                "schedule_item_ids": ids, "from": "2026-01-10T00:00:00Z", "to": "2026-01-13T00:00:00Z"}))
        assert len(extracted["created_ids"]) == 150
        assert {t["due_at"] for t in extracted["items"]} == {
            "2026-01-10T09:00:00Z", "2026-01-11T09:00:00Z", "2026-01-12T09:00:00Z"}
        assert walked.periods <= 50 * (3 + SLACK), walked.periods

    async def test_the_occurrences_of_a_daily_item_from_1900_in_2199_walk_the_window_only(self, api, ann):
        [item_id] = await _old_items(api, ann, 1)
        with counting_dateutil_periods() as walked:
            page = await api.ok(api.get(ann, f"/schedule-items/{item_id}/occurrences",
                                        **{"from": "2199-12-01T00:00:00Z", "to": "2200-01-01T00:00:00Z"}))
        assert len(page["items"]) == 31 and page["items"][0]["start_at"] == "2199-12-01T09:00:00Z"
        assert walked.periods <= 31 + SLACK, walked.periods

    async def test_a_count_series_is_read_at_the_window_too(self, api, ann):
        """COUNT cannot be jumped over without knowing the occurrences before: the last one is stored
        (series_end_at), so the rule is read as the UNTIL rule with the same occurrences."""
        item = await api.item(ann, start_at="1900-01-01T09:00:00Z", end_at="1900-01-01T10:00:00Z", timezone="UTC",
                              recurrence_rule="FREQ=DAILY;COUNT=1000;BYMONTHDAY=1")
        assert item["series_end_at"] == "1983-04-01T10:00:00Z"  # the 1,000th first of a month
        with counting_dateutil_periods() as walked:
            page = await api.ok(api.get(ann, f"/schedule-items/{item['id']}/occurrences",
                                        **{"from": "1983-03-01T00:00:00Z", "to": "1983-06-01T00:00:00Z"}))
        assert [o["start_at"] for o in page["items"]] == ["1983-03-01T09:00:00Z", "1983-04-01T09:00:00Z"]
        assert walked.periods <= 92 + SLACK, walked.periods

    async def test_reminders_over_many_century_old_items_walk_their_window_only(self, api, ann, clock, db):
        """The probe's worker run over 150 such items took 71 s."""
        await _old_items(api, ann, 150)
        job = await api.ok(api.post(ann, "/automations", {
            "name": "Remind", "job_type": "schedule_reminder", "schedule_type": "daily", "schedule_time": "09:00",
            "params": {"hours_ahead": 24}}), 201)
        clock.advance(timedelta(hours=1))  # the run looks at (10:00, 10:00 tomorrow]: tomorrow's 09:00
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        with counting_dateutil_periods() as walked:
            await automations.drain(db, clock=clock, default_timezone="UTC", lease_seconds=120,
                                    retry_base_seconds=60)
        reminders = (await api.ok(api.get(ann, "/inbox", message_type="schedule_reminder", limit=200)))["items"]
        assert len(reminders) == 150
        assert walked.periods <= 150 * (1 + SLACK), walked.periods


SERIES_RULES = ["FREQ=DAILY;COUNT=40", "FREQ=WEEKLY;BYDAY=MO,TH;COUNT=25", "FREQ=MONTHLY;BYMONTHDAY=31;COUNT=12",
                "FREQ=MONTHLY;BYDAY=-1FR;COUNT=1000", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=30",
                "FREQ=DAILY;INTERVAL=3;BYDAY=SA,SU;COUNT=200", "FREQ=WEEKLY;INTERVAL=2;COUNT=7",
                "FREQ=DAILY;UNTIL=20300101T000000Z", "FREQ=MONTHLY;BYMONTHDAY=-1;UNTIL=21990615T000000Z",
                "FREQ=YEARLY;UNTIL=21991231T235959Z",
                "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=TH;UNTIL=21000101T000000Z"]


class TestSameOccurrences:
    @settings(max_examples=120, deadline=None)
    @given(rule=st.sampled_from(SERIES_RULES),
           zone=st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo"]),
           day=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2199, 1, 1)),
           length=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)),
           ahead=st.timedeltas(min_value=timedelta(days=-30), max_value=timedelta(days=4000)),
           span=st.timedeltas(min_value=timedelta(hours=1), max_value=timedelta(days=400)))
    def test_a_series_read_at_the_window_is_the_walk_from_its_start(self, rule, zone, day, length, ahead, span):
        """series_end_at is the end of the walk's last occurrence, and the occurrences in a window are the walk's,
        a COUNT rule read through series_end_at included."""
        # The start is an occurrence (RFC 5545 counts DTSTART as one): the rule's first from the drawn day.
        first = next(kernel_recurrence.expand(rule, day.replace(microsecond=0, tzinfo=ZoneInfo(zone))), None)
        if first is None:
            return
        start = first.astimezone(UTC)
        try:
            series = recurrence.check_series(start_at=start, end_at=start + length, timezone=zone,
                                             recurrence_rule=rule)
        except (errors.RecurrenceRuleInvalid, errors.ScheduleItemInvalid):
            return  # the drawn UNTIL is before the first occurrence, or the end lies past the supported range
        walked = deque(kernel_recurrence.expand(rule, start.astimezone(ZoneInfo(zone))), maxlen=1)
        assert series.series_end_at == walked[0].astimezone(UTC) + length
        window_from = min(start + ahead, kernel_recurrence.SUPPORTED_UNTIL - timedelta(days=1))
        window_to = min(window_from + span, kernel_recurrence.SUPPORTED_UNTIL)
        expected = list(_overlapping(rule, start, length, zone, window_from, window_to))
        for series_end_at in (series.series_end_at, None):
            found = recurrence.occurrences(start_at=start, end_at=start + length, timezone=zone,
                                           recurrence_rule=series.rule, series_end_at=series_end_at,
                                           window_from=window_from, window_to=window_to)
            assert [o.start_at for o in found] == expected


def _overlapping(rule: str, start: datetime, length: timedelta, zone: str, window_from: datetime,
                 window_to: datetime):
    """The occurrences overlapping the window, found by the walk from the start."""
    for local in kernel_recurrence.expand(rule, start.astimezone(ZoneInfo(zone))):
        begins = local.astimezone(UTC)
        if begins >= window_to:
            return
        if begins + length > window_from or (length == timedelta(0) and begins >= window_from):
            yield begins


class TestDigest:
    async def test_the_digest_reads_the_todos_it_lists_not_every_pending_one(self, api, ann, clock, db, engine):
        """It loaded every pending todo due before the horizon (the overdue ones since ever) to count them: a
        loop whose length the owner decides. The counts come from the database; only the listed rows travel."""
        for n in range(30):
            await api.ok(api.post(ann, "/todos", {"title": f"Late {n}", "due_at": "2025-12-01T00:00:00Z"}), 201)
            await api.ok(api.post(ann, "/todos", {"title": f"Soon {n}", "due_at": "2026-01-05T20:00:00Z"}), 201)
        job = await api.ok(api.post(ann, "/automations", {
            "name": "Digest", "job_type": "todo_digest", "schedule_type": "daily", "schedule_time": "09:00",
            "params": {"max_items": 5}}), 201)
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        with counting_rows_read(engine, "social.todos") as read:
            await automations.drain(db, clock=clock, default_timezone="UTC", lease_seconds=120,
                                    retry_base_seconds=60)
        [digest] = (await api.ok(api.get(ann, "/inbox", message_type="todo_digest")))["items"]
        assert (digest["content"]["pending_count"], digest["content"]["overdue_count"]) == (30, 30)
        listed = [t["title"] for t in digest["content"]["todos"]]
        assert len(listed) == 5 and all(title.startswith("Late ") for title in listed), listed  # by due_at, id
        assert read.rows == 5, read.rows


async def _healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    return response


class TestOffTheEventLoop:
    async def test_the_todo_extraction_expands_off_the_loop(self, api, ann, client):
        ids = await _old_items(api, ann, 2)
        with pausing(dateutil_rrule._iterinfo, "ddayset") as pause:
            response, _ = await answered_while_paused(pause, api.post(ann, "/todos/extract", {
                "schedule_item_ids": ids, "from": "2026-01-10T00:00:00Z", "to": "2026-01-11T00:00:00Z"}),
                lambda: _healthz(client))
        assert response.status_code == 200 and len(response.json()["created_ids"]) == 2

    async def test_the_occurrence_list_expands_off_the_loop(self, api, ann, client):
        [item_id] = await _old_items(api, ann, 1)
        with pausing(dateutil_rrule._iterinfo, "ddayset") as pause:
            response, _ = await answered_while_paused(pause, api.get(
                ann, f"/schedule-items/{item_id}/occurrences",
                **{"from": "2026-01-10T00:00:00Z", "to": "2026-01-11T00:00:00Z"}), lambda: _healthz(client))
        assert response.status_code == 200 and len(response.json()["items"]) == 1

    @pytest.mark.parametrize("rule", ["FREQ=DAILY;UNTIL=21991231T000000Z", "FREQ=DAILY;COUNT=1000"])
    async def test_an_item_write_checks_its_rule_off_the_loop(self, api, ann, client, rule):
        """A write walks the rule to its last occurrence (series_end_at)."""
        with pausing(dateutil_rrule._iterinfo, "ddayset") as pause:
            response, _ = await answered_while_paused(pause, api.post(ann, "/schedule-items", {
                "title": "x", **OLD_DAILY, "recurrence_rule": rule}), lambda: _healthz(client))
        assert response.status_code == 201, response.text

    async def test_the_reminder_job_expands_off_the_loop(self, api, ann, client, clock, db):
        await _old_items(api, ann, 1)
        job = await api.ok(api.post(ann, "/automations", {
            "name": "Remind", "job_type": "schedule_reminder", "schedule_type": "daily", "schedule_time": "09:00",
            "params": {"hours_ahead": 24}}), 201)
        clock.advance(timedelta(hours=1))  # the run looks at (10:00, 10:00 tomorrow]: tomorrow's 09:00
        await api.ok(api.post(ann, f"/automations/{job['id']}/run-now"), 202)
        with pausing(dateutil_rrule._iterinfo, "ddayset") as pause:
            await answered_while_paused(pause, automations.drain(
                db, clock=clock, default_timezone="UTC", lease_seconds=120, retry_base_seconds=60),
                lambda: _healthz(client))
        assert len((await api.ok(api.get(ann, "/inbox", message_type="schedule_reminder")))["items"]) == 1

    async def test_the_calendar_feed_is_built_off_the_loop(self, api, ann, client):
        """Up to 2,000 events rendered by icalendar: over a second of CPU for a full feed."""
        await _old_items(api, ann, 1)
        token = (await api.ok(api.get(ann, "/me/calendar-feed")))["token"]
        with pausing(icalendar.Event, "add") as pause:
            response, _ = await answered_while_paused(
                pause, client.get("/api/v1/social/me/calendar.ics", params={"token": token}),
                lambda: _healthz(client))
        assert response.status_code == 200
        assert [str(e["uid"]) for e in icalendar.Calendar.from_ical(response.content).walk("VEVENT")] != []

