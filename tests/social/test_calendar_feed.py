"""The calendar feed (SOC-INV-18): an ICS document icalendar parses, its token reset, an old or forged token
answered 404 and not counted."""

from __future__ import annotations

import pytest
from icalendar import Calendar
from sqlalchemy import text


class TestCalendarFeed:
    @staticmethod
    async def _feed_hits(db, token: str) -> int:
        async with db.read_only() as session:
            return (await session.execute(text("SELECT coalesce(sum(hits), 0) FROM kernel.rate_limit_counter "
                                               "WHERE bucket = :b"), {"b": f"social-calendar-feed:{token[5:27]}"})
                    ).scalar_one()

    @pytest.mark.invariant("SOC-INV-18")
    async def test_the_feed_parses_with_icalendar_and_reset_kills_the_old_token(self, api, ann, bob, client, db):
        item = await api.item(ann, recurrence_rule="FREQ=WEEKLY;BYDAY=MO;COUNT=10")
        await api.item(bob, title="Bob's")
        feed = await api.ok(api.get(ann, "/me/calendar-feed"))
        assert feed["url"].endswith(feed["token"]) and feed["token"].startswith("scal_")
        response = await client.get("/api/v1/social/me/calendar.ics", params={"token": feed["token"]})
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/calendar")
        calendar = Calendar.from_ical(response.content)
        events = [c for c in calendar.walk("VEVENT")]
        assert [str(e["uid"]) for e in events] == [f"{item['id']}@tenet"]
        assert sorted(events[0]["rrule"].to_ical().split(b";")) == sorted(b"FREQ=WEEKLY;BYDAY=MO;COUNT=10".split(b";"))
        assert events[0]["dtstart"].dt.tzinfo is not None and calendar.walk("VTIMEZONE")
        reset = await api.ok(api.post(ann, "/me/calendar-feed/reset"))
        assert reset["token"] != feed["token"]
        # The old token still verifies; its feed is gone, so it is not counted (issue 24: nothing written for it).
        counted = await self._feed_hits(db, feed["token"])
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": feed["token"]})).status_code == 404
        assert await self._feed_hits(db, feed["token"]) == counted == 1
        forged = feed["token"][:-1] + ("A" if feed["token"][-1] != "A" else "B")
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": forged})).status_code == 404
        assert (await client.get("/api/v1/social/me/calendar.ics", params={"token": reset["token"]})
                ).status_code == 200
