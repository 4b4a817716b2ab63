"""The time model (spec layer 7): the event's zone by the spec's order with Graph's real meaning, Windows names
through icalendar's CLDR table, custom zones falling through; Graph's UTC renderings read as instants; a weekly
09:00 Los Angeles series keeps 09:00 local across the DST change (the emulator expands it as Exchange does)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from tenet.kernel.settings import section
from tenet.meetings.outlook import times
from tenet.meetings.outlook.graph import GraphClient
from tenet.meetings.settings import MeetingSettings
from tests.meetings.outlook.conftest import assert_read_only

DEFAULT = "America/Los_Angeles"


@pytest.mark.parametrize(("name", "expected"), [
    ("Pacific Standard Time", "America/Los_Angeles"), ("W. Europe Standard Time", "Europe/Berlin"),
    ("China Standard Time", "Asia/Shanghai"), ("Europe/Paris", "Europe/Paris"), ("UTC", "Etc/UTC"),
    ("tzone://Microsoft/Custom", None), ("Not A Zone", None), ("", None), (None, None), ("right/UTC", None),
])
def test_zone_names_map_through_the_maintained_table(name, expected):
    assert times.iana(name) == expected


def test_the_event_zone_follows_the_spec_s_order():
    series = {"recurrence": {"range": {"recurrenceTimeZone": "Tokyo Standard Time"}},
              "originalStartTimeZone": "Pacific Standard Time", "start": {"timeZone": "UTC"}}
    assert times.event_zone(series, default=DEFAULT) == "Asia/Tokyo"
    single = {"originalStartTimeZone": "GMT Standard Time", "start": {"timeZone": "UTC"}}
    assert times.event_zone(single, default=DEFAULT) == "Europe/London"
    custom = {"originalStartTimeZone": "tzone://Microsoft/Custom", "start": {"timeZone": "Tokyo Standard Time"}}
    assert times.event_zone(custom, default=DEFAULT) == DEFAULT  # start.timeZone is the rendering zone: ignored
    occurrence = {"type": "occurrence"}
    assert times.event_zone(occurrence, master=series, default=DEFAULT) == "Asia/Tokyo"


def test_graph_renderings_are_read_as_instants():
    assert times.instant({"dateTime": "2026-03-09T16:00:00.0000000", "timeZone": "UTC"}) == datetime(
        2026, 3, 9, 16, 0, tzinfo=UTC)
    assert times.instant({"dateTime": "2026-03-09T09:00:00.0000000", "timeZone": "Pacific Standard Time"}) == datetime(
        2026, 3, 9, 16, 0, tzinfo=UTC)
    assert times.instant({"dateTime": "garbage", "timeZone": "UTC"}) is None and times.instant(None) is None


async def test_a_weekly_nine_o_clock_series_stays_at_nine_across_dst(graph, settings):
    box = graph.add_mailbox("room@contoso.com")
    series = box.create_series("Weekly", "2026-03-02T09:00", "2026-03-02T10:00", zone="Pacific Standard Time",
                               pattern={"type": "weekly", "interval": 1, "daysOfWeek": ["monday"]},
                               until=date(2026, 3, 23))
    master_id = box.id_of(series, immutable=True)
    async with GraphClient(section(settings, MeetingSettings)) as client:
        master = await client.event(box.id, master_id)
        page = await client.get(f"/users/{box.id}/events/{master_id}/instances",
                                params={"startDateTime": "2026-03-01T00:00:00Z", "endDateTime": "2026-03-31T00:00:00Z"})
    zone = ZoneInfo(times.event_zone(master, default="UTC"))
    starts = [times.instant(o["start"]) for o in page.body["value"]]
    local = [s.astimezone(zone).strftime("%a %H:%M") for s in starts if s is not None]
    assert local == ["Mon 09:00"] * 4
    # 2026-03-08 is the change: the UTC instants move by an hour, the local time does not.
    assert [s.hour for s in starts if s is not None] == [17, 16, 16, 16]
    assert_read_only(graph)
