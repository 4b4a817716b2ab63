"""Bounded RFC 5545 expansion: the same occurrences as dateutil inside the supported range, a bounded cost for
rules that (almost) never match, and every refusal made before the first step."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tenet.kernel.recurrence import SUPPORTED_UNTIL, expand
from tests.support.recurrence import ONE_BOUNDED_WALK, counting_dateutil_periods

PARIS = ZoneInfo("Europe/Paris")
RULES = [
    "FREQ=DAILY", "FREQ=DAILY;INTERVAL=3", "FREQ=WEEKLY;BYDAY=MO,WE", "FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,TU",
    "FREQ=MONTHLY;BYDAY=-1FR", "FREQ=MONTHLY;BYMONTHDAY=-1,31", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO", "FREQ=YEARLY;BYWEEKNO=1,-1;BYDAY=SU;WKST=SU", "FREQ=YEARLY;BYYEARDAY=60,366",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR", "FREQ=YEARLY;BYDAY=20MO",
    "FREQ=DAILY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29", "FREQ=MONTHLY;INTERVAL=5;BYDAY=2TU,-2TH",
]
# Rules with no occurrence at all, or none after the first few, that make dateutil walk to the year 9999.
PATHOLOGICAL = [
    "FREQ=DAILY;COUNT=5;BYMONTH=2;BYMONTHDAY=30", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31", "FREQ=DAILY;UNTIL=99991231T000000;BYMONTH=6;BYMONTHDAY=31",
    "FREQ=WEEKLY;BYMONTH=11;BYMONTHDAY=31", "FREQ=DAILY;BYYEARDAY=366;BYMONTH=2",
    "FREQ=DAILY;BYWEEKNO=34;BYMONTHDAY=-28,12;BYSETPOS=2", "FREQ=DAILY;BYMONTH=1;BYWEEKNO=30",
]


def _dateutil(rule: str, start: datetime, n: int) -> list[datetime]:
    end = SUPPORTED_UNTIL if start.tzinfo else SUPPORTED_UNTIL.replace(tzinfo=None)
    return list(itertools.takewhile(lambda d: d < end, itertools.islice(rrulestr(rule, dtstart=start), n)))


class TestSameAsDateutil:
    @settings(max_examples=150, deadline=None)
    @given(rule=st.sampled_from(RULES), day=st.datetimes(min_value=datetime(1900, 1, 1),
                                                         max_value=datetime(2199, 12, 1)))
    def test_a_naive_start_gives_dateutil_s_occurrences(self, rule, day):
        start = day.replace(microsecond=0)
        assert list(itertools.islice(expand(rule, start), 60)) == _dateutil(rule, start, 60)

    @settings(max_examples=100, deadline=None)
    @given(rule=st.sampled_from(RULES), day=st.datetimes(min_value=datetime(1950, 1, 1),
                                                         max_value=datetime(2150, 1, 1)),
           until=st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(2300, 1, 1)))
    def test_an_aware_start_keeps_its_wall_time_and_until_is_an_instant(self, rule, day, until):
        start = day.replace(microsecond=0, tzinfo=PARIS)
        text = f"{rule};UNTIL={until:%Y%m%dT%H%M%S}Z"
        ours = list(itertools.islice(expand(text, start), 60))
        assert ours == _dateutil(text, start, 60)
        assert [o.utcoffset() for o in ours] == [o.replace(tzinfo=PARIS).utcoffset() for o in ours]

    def test_count_counts_from_the_start_and_a_local_until_is_inclusive(self):
        start = datetime(2026, 3, 2, 9, 0)
        assert len(list(expand("FREQ=WEEKLY;BYDAY=MO,FR;COUNT=5", start))) == 5
        assert list(expand("FREQ=DAILY;UNTIL=20260304T090000", start))[-1] == datetime(2026, 3, 4, 9, 0)
        assert list(expand("RRULE:FREQ=DAILY;UNTIL=20260304", start))[-1] == datetime(2026, 3, 3, 9, 0)


class TestBounded:
    @pytest.mark.parametrize("rule", PATHOLOGICAL)
    def test_a_rule_that_never_matches_stops_promptly(self, rule):
        with counting_dateutil_periods() as walked:
            assert list(expand(rule, datetime(1900, 1, 1))) == []
        assert 0 < walked.periods <= ONE_BOUNDED_WALK, walked.periods

    def test_the_count_sees_an_unbounded_walk(self):
        """The measure itself can fail: dateutil alone, on one of those rules, walks far more than the bound."""
        with counting_dateutil_periods() as walked:
            assert list(rrulestr(PATHOLOGICAL[2], dtstart=datetime(2026, 1, 1))) == []
        assert walked.periods > 5 * ONE_BOUNDED_WALK, walked.periods

    def test_nothing_at_or_after_the_supported_end_is_yielded(self):
        last = list(expand("FREQ=DAILY", datetime(2199, 12, 30, 12, 0, tzinfo=UTC)))
        assert last == [datetime(2199, 12, 30, 12, 0, tzinfo=UTC), datetime(2199, 12, 31, 12, 0, tzinfo=UTC)]
        stop = datetime(2026, 1, 3, tzinfo=UTC)
        assert len(list(expand("FREQ=DAILY", datetime(2026, 1, 1, tzinfo=PARIS), stop=stop))) == 3

    def test_the_last_of_count_does_not_look_for_another(self):
        # Feb 29 on a Thursday: 2024, 2052, 2080, ... dateutil looks for the next one after COUNT is reached.
        rule = "FREQ=DAILY;COUNT=1;BYMONTH=2;BYMONTHDAY=29;BYDAY=TH"
        with counting_dateutil_periods() as walked:
            found = list(expand(rule, datetime(2024, 2, 29)))
        assert found == [datetime(2024, 2, 29)]
        assert walked.periods <= 1, walked.periods  # the next match would be 28 years (10,000 periods) away


class TestRefused:
    @pytest.mark.parametrize(("rule", "start"), [
        ("FREQ=SECONDLY", datetime(2026, 1, 1)), ("FREQ=HOURLY;COUNT=3", datetime(2026, 1, 1)),
        ("FREQ=YEARLY;BYEASTER=0", datetime(2026, 1, 1)), ("FREQ=DAILY;COUNT=3;UNTIL=20260301", datetime(2026, 1, 1)),
        ("FREQ=DAILY;INTERVAL=0", datetime(2026, 1, 1)), ("FREQ=DAILY;INTERVAL=-1", datetime(2026, 1, 1)),
        ("FREQ=MONTHLY;BYDAY=53MO", datetime(2026, 1, 1)), ("FREQ=YEARLY;BYMONTH=13;BYDAY=-5SA", datetime(2026, 1, 1)),
        ("FREQ=YEARLY;BYMONTHDAY=0", datetime(2026, 1, 1)), ("FREQ=DAILY;WKST=XX", datetime(2026, 1, 1)),
        ("FREQ=DAILY;UNTIL=20260301T000000Z", datetime(2026, 1, 1)),
        ("FREQ=DAILY;UNTIL=20260301", datetime(2026, 1, 1, tzinfo=UTC)),
        ("FREQ=DAILY;FREQ=WEEKLY", datetime(2026, 1, 1)), ("FREQ=DAILY;COUNT", datetime(2026, 1, 1)),
        ("FREQ=DAILY;FOO=1", datetime(2026, 1, 1)), ("FREQ=DAILY", datetime(1899, 12, 31)),
        ("FREQ=DAILY", datetime(2200, 1, 1)), ("FREQ=DAILY", datetime(9999, 12, 31, tzinfo=UTC)),
    ])
    def test_before_the_first_step(self, rule, start):
        with pytest.raises(ValueError):
            expand(rule, start)

    @settings(max_examples=400, deadline=None)
    @given(freq=st.sampled_from(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"]),
           parts=st.dictionaries(
               st.sampled_from(["INTERVAL", "COUNT", "BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY",
                                "BYSETPOS", "WKST", "UNTIL"]),
               st.one_of(st.integers(-400, 400).map(str),
                         st.lists(st.integers(-60, 60), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
                         st.sampled_from(["MO", "2TU", "-1FR", "5SU", "-5SA", "53MO", "-53SU", "0MO", "+3WE", "SU",
                                          "20300101T000000", "21991231T235959", "99991231T000000"])),
               max_size=4),
           day=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2199, 12, 31)))
    def test_a_rule_read_is_expanded_without_error_in_a_bounded_walk(self, freq, parts, day):
        rule = ";".join([f"FREQ={freq}"] + [f"{k}={v}" for k, v in parts.items()])
        try:
            occurrences = expand(rule, day)
        except ValueError:
            return
        with counting_dateutil_periods() as walked:
            found = list(itertools.islice(occurrences, 2000))
        assert walked.periods <= ONE_BOUNDED_WALK, (rule, walked.periods)
        assert found == sorted(found) and all(o < datetime(2200, 1, 1) for o in found)
        if found:
            assert found[0] >= day.replace(microsecond=0) - timedelta(seconds=1)


class TestTruncated:
    @pytest.mark.parametrize(("rule", "stop", "truncated"), [
        ("FREQ=DAILY;COUNT=5", None, False),
        ("FREQ=DAILY;UNTIL=20260110T000000Z", None, False),
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", None, False),
        ("FREQ=DAILY;COUNT=5", datetime(2026, 1, 3, tzinfo=UTC), True),
        ("FREQ=DAILY;UNTIL=20260103T000000Z", datetime(2026, 1, 3, tzinfo=UTC), True),
        ("FREQ=DAILY;UNTIL=20260102T120000Z", datetime(2026, 1, 3, tzinfo=UTC), False),
        ("FREQ=YEARLY", None, True),
    ])
    def test_it_tells_whether_the_rule_went_on_past_the_bound(self, rule, stop, truncated):
        occurrences = expand(rule, datetime(2026, 1, 1, tzinfo=UTC), stop=stop)
        list(occurrences)
        assert occurrences.truncated is truncated


# Rules whose meaning leans on DTSTART (the parts dateutil takes from it, the first week cut at DTSTART for
# BYSETPOS), and random ones as in TestRefused.
WINDOW_RULES = [
    *RULES, "FREQ=DAILY", "FREQ=WEEKLY", "FREQ=MONTHLY", "FREQ=YEARLY", "FREQ=YEARLY;BYMONTH=3,10",
    "FREQ=MONTHLY;INTERVAL=5", "FREQ=WEEKLY;INTERVAL=3;WKST=SU", "FREQ=WEEKLY;INTERVAL=2;WKST=TH",
    "FREQ=DAILY;BYHOUR=8,20;BYMINUTE=15", "FREQ=WEEKLY;BYDAY=MO,FR;BYSETPOS=1",
    "FREQ=YEARLY;INTERVAL=3;BYWEEKNO=1;BYDAY=MO,SU;BYSETPOS=-1", "FREQ=DAILY;INTERVAL=10;BYSECOND=0,30",
    "FREQ=MONTHLY;INTERVAL=7;BYSETPOS=2;BYDAY=SA,SU", "FREQ=YEARLY;INTERVAL=4",
]
ZONES = [None, "UTC", "Europe/Paris", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia",
         "Pacific/Kwajalein", "America/Sao_Paulo", "Asia/Kathmandu", "America/St_Johns", "Antarctica/Troll"]
random_rules = st.builds(
    lambda freq, parts: ";".join([f"FREQ={freq}"] + [f"{k}={v}" for k, v in parts.items()]),
    st.sampled_from(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"]),
    st.dictionaries(
        st.sampled_from(["INTERVAL", "COUNT", "BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY", "BYSETPOS",
                         "WKST", "UNTIL", "BYHOUR", "BYMINUTE"]),
        st.one_of(st.integers(1, 40).map(str),
                  st.lists(st.integers(-60, 60), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
                  st.sampled_from(["MO", "2TU", "-1FR", "5SU", "-5SA", "+3WE", "SU,TH", "FR", "WE",
                                   "20300101T000000", "21991231T235959", "20300101T000000Z", "20991231T120000Z"])),
        max_size=4))


def _from(occurrences, after: datetime, stop: datetime | None):
    """The walk from DTSTART, filtered: what the window-started expansion must give."""
    for occurrence in occurrences:
        instant = occurrence if occurrence.tzinfo else occurrence.replace(tzinfo=UTC)
        if stop is not None and instant >= stop:
            return
        if instant >= after:
            yield occurrence


class TestStartedAtTheWindow:
    @settings(max_examples=300, deadline=None)
    @given(rule=st.one_of(st.sampled_from(WINDOW_RULES), random_rules), zone=st.sampled_from(ZONES),
           day=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2199, 12, 31)),
           ahead=st.timedeltas(min_value=timedelta(days=-400), max_value=timedelta(days=25_000)),
           span=st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=800)))
    @example(rule="FREQ=WEEKLY;BYDAY=MO,FR;BYSETPOS=1", zone=None, day=datetime(2026, 3, 4, 9),
             ahead=timedelta(days=30), span=None)  # DTSTART's week is cut at DTSTART: Friday is its first
    @example(rule="FREQ=YEARLY", zone="Europe/Paris", day=datetime(2024, 2, 29, 2, 30), ahead=timedelta(days=1500),
             span=None)  # Feb 29 only, at a wall time that some years does not exist
    @example(rule="FREQ=MONTHLY", zone="America/New_York", day=datetime(2026, 1, 31, 1, 30),
             ahead=timedelta(days=280), span=timedelta(days=40))  # the 31st only; 01:30 twice in November
    @example(rule="FREQ=DAILY", zone="Pacific/Apia", day=datetime(2011, 12, 1, 12), ahead=timedelta(days=28, hours=11),
             span=timedelta(days=3))  # Samoa skipped 30 December 2011
    def test_it_gives_exactly_the_walk_from_dtstart_s_occurrences(self, rule, zone, day, ahead, span):
        start = day.replace(microsecond=0, tzinfo=None if zone is None else ZoneInfo(zone))
        after = (start if zone else start.replace(tzinfo=UTC)).astimezone(UTC) + ahead
        stop = None if span is None else after + span
        try:
            windowed = expand(rule, start, after=after, stop=stop)
        except ValueError:
            with pytest.raises(ValueError):
                expand(rule, start)
            return
        expected = list(itertools.islice(_from(expand(rule, start), after, stop), 40))
        assert list(itertools.islice(windowed, 40)) == expected

    @pytest.mark.parametrize(("rule", "start", "periods"), [
        ("FREQ=DAILY", datetime(1900, 1, 2, 9, 0, tzinfo=ZoneInfo("Europe/London")), 7 + 3),
        ("FREQ=DAILY;INTERVAL=3", datetime(1900, 1, 2, 9, 0), 3 + 2),
        ("FREQ=WEEKLY;BYDAY=TU,TH", datetime(1900, 1, 2, 9, 0, tzinfo=ZoneInfo("America/New_York")), 2 + 1),
        ("FREQ=MONTHLY;BYMONTHDAY=-1", datetime(1900, 1, 31, 9, 0, tzinfo=PARIS), 1 + 1),
        ("FREQ=YEARLY", datetime(1900, 1, 2, 9, 0, tzinfo=PARIS), 1 + 1),
    ])
    def test_a_window_two_centuries_after_the_start_walks_from_the_window(self, rule, start, periods):
        """The walk from DTSTART to December 2199 was 110,000 days for a daily rule."""
        after, stop = datetime(2199, 12, 20, tzinfo=UTC), datetime(2199, 12, 27, tzinfo=UTC)
        with counting_dateutil_periods() as walked:
            found = list(expand(rule, start, after=after, stop=stop))
        assert found == list(_from(expand(rule, start), after, stop))
        assert walked.periods <= periods, walked.periods

    def test_a_count_rule_is_walked_from_dtstart(self):
        """Which occurrences a COUNT keeps depends on every earlier one: it is not moved (callers that know its last
        occurrence read it as an UNTIL rule)."""
        start, after = datetime(1900, 1, 1, 9, 0), datetime(1902, 9, 20, tzinfo=UTC)
        with counting_dateutil_periods() as walked:
            found = list(expand("FREQ=DAILY;COUNT=1000", start, after=after))
        assert found == list(_from(expand("FREQ=DAILY;COUNT=1000", start), after, None)) and len(found) == 8
        assert walked.periods == 1000
