"""RFC 5545 recurrence rules expanded inside the supported range of dates, at a bounded cost.

dateutil's `rrule` looks for the next occurrence up to the year 9999: a rule that never matches
(`FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30`) or has no occurrence left walks about 2.9 million daily periods before it
gives up, seconds of CPU for one request. Its loop checks UNTIL and COUNT only when a candidate matches, so
neither bounds that walk; the only stop it always reaches is `datetime.MAXYEAR`.

`expand` moves that stop next to ours. It runs dateutil on the start moved `SHIFT_YEARS` (19 Gregorian cycles of
400 years) ahead and moves every occurrence back. A 400-year cycle is exactly 146,097 days = 20,871 weeks, so
weekdays, leap years, ISO week numbers and month lengths repeat identically and the rule yields the same
dates; only `BYEASTER` (not in RFC 5545, and not periodic over 400 years) would differ, and is refused. The
year 9999 of the shifted walk is the year 2399, so no expansion walks more than about 500 years from a start
in the supported range (about 0.2 s for the worst daily rule), and nothing at or after `SUPPORTED_UNTIL`
is ever yielded. COUNT and UNTIL are applied here, on the real occurrences, so the walk also stops right
after the last one instead of looking for a next candidate.

Sub-daily frequencies are refused: a walk of SECONDLY periods costs 86,400 times a daily one.

An expansion asked for the occurrences `after` an instant starts there, not at DTSTART (a daily series from 1900 read
in 2026 walked 46,000 days). DTSTART moves forward by whole periods (FREQ x INTERVAL), to the first day of the last
period that begins at least two days before `after` (wall time in the start's zone: no zone's offset has changed
by that much), so the rule keeps its phase; the parts dateutil would otherwise take from DTSTART (the time of day,
WEEKLY's weekday, MONTHLY's day of the month, YEARLY's month and day) are written out first, so moving the start
changes no occurrence (tests/kernel/test_recurrence.py compares it with the walk from DTSTART for random rules,
starts, zones and windows). The walk then costs the periods from there to the first occurrence past the caller's
window (dateutil only stops on a match): for a rule that matches no more, still at most the bounded walk. A rule
with COUNT is not moved (which occurrences count depends on all the earlier ones): it walks from DTSTART, at most
the bounded walk; callers that know the last occurrence read it as the UNTIL rule with the same occurrences.

The expansion is wall-clock arithmetic, as RFC 5545 asks: with an aware start the rule repeats its wall time
in the start's zone (each occurrence gets that tzinfo, fold 0, like dateutil's own), with a naive start
occurrences are naive. UNTIL must then be a UTC time (aware start) or a local one (naive start), as
dateutil requires.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from dateutil.rrule import rrule, rrulestr

# The project's supported range of instants: everything dated (items, todos, series) lies in it, and every sum
# of an instant and a bounded duration stays inside Python's datetime range.
SUPPORTED_FROM = datetime(1900, 1, 1, tzinfo=UTC)
SUPPORTED_UNTIL = datetime(2200, 1, 1, tzinfo=UTC)
FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
SHIFT_YEARS = 19 * 400
_REFUSED_PARTS = {"BYEASTER": "BYEASTER is not part of RFC 5545", "DTSTART": "DTSTART is not a rule part"}
# RFC 5545 §3.3.10 value ranges (dateutil fails lazily, in the middle of an expansion, on some values outside them).
_RANGES = {"BYMONTH": (1, 12, False), "BYMONTHDAY": (1, 31, True), "BYYEARDAY": (1, 366, True),
           "BYWEEKNO": (1, 53, True), "BYSETPOS": (1, 366, True), "BYHOUR": (0, 23, False),
           "BYMINUTE": (0, 59, False), "BYSECOND": (0, 60, False)}
_WEEKDAY = re.compile(r"^([+-]?)(\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)\Z")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# More than any time zone's offset has ever changed at once (at most a day: Samoa and Kwajalein crossing the date
# line): an occurrence at or after an instant starts on a local day at most this long before the instant's.
_ZONE_MARGIN = timedelta(days=2)


def _until(value: str) -> datetime:
    """An UNTIL value: a date (`YYYYMMDD`, its midnight), a local date-time or a UTC one (`...Z`)."""
    try:
        if len(value) == 8:
            return datetime.strptime(value, "%Y%m%d")
        if len(value) == 15:
            return datetime.strptime(value, "%Y%m%dT%H%M%S")
        if len(value) == 16 and value.endswith("Z"):
            return datetime.strptime(value[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        pass
    raise ValueError(f"UNTIL={value[:20]} is not a date, a local date-time or a UTC date-time")


def _parts(rule: str) -> list[tuple[str, str]]:
    text = rule.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    parts = []
    for part in text.split(";"):
        name, sep, value = part.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{part[:40]!r} is not a NAME=VALUE rule part")
        parts.append((name.strip().upper(), value.strip()))
    return parts


def _check_values(values: dict[str, str]) -> None:
    for name, (low, high, signed) in _RANGES.items():
        for item in values[name].split(",") if name in values else ():
            digits = item[1:] if signed and item[:1] in "+-" else item
            if not digits.isdigit() or not low <= int(digits) <= high:
                raise ValueError(f"{name} values lie in {'±' if signed else ''}{low}..{high}")
    # An ordinal weekday counts within the month for MONTHLY (and YEARLY with BYMONTH), within the year otherwise.
    within_month = values["FREQ"] == "MONTHLY" or "BYMONTH" in values
    for item in values["BYDAY"].split(",") if "BYDAY" in values else ():
        match = _WEEKDAY.match(item)
        if match is None or (match.group(2) is not None and not
                             1 <= int(match.group(2)) <= (5 if within_month else 53)):
            raise ValueError("BYDAY values are weekdays (MO..SU), optionally numbered (1..5 within a month, 1..53 "
                             "within a year, negative from the end)")
    if values.get("WKST", "MO") not in ("MO", "TU", "WE", "TH", "FR", "SA", "SU"):
        raise ValueError("WKST is a weekday (MO..SU)")


def expand(rule: str, start: datetime, *, after: datetime | None = None, stop: datetime | None = None
           ) -> Occurrences:
    """The occurrences of `rule` (an RRULE value, optionally prefixed `RRULE:`) from DTSTART `start`, in order,
    at or after `after` and before `stop` (both aware; `stop` by default and at most `SUPPORTED_UNTIL`; a naive
    start's occurrences are compared with them as UTC wall times): exactly those of the walk from DTSTART, found
    from `after` on (see the module's docstring). The rule is read at once: a ValueError says why it cannot be
    expanded (unreadable, sub-daily, BYEASTER, COUNT with UNTIL, a value outside RFC 5545's ranges, UNTIL of the
    wrong kind, or a start outside the supported range). Once read, iterating does not raise
    (tests/kernel/test_recurrence.py fuzzes it); after it, `truncated` says whether the rule went on past the
    bound."""
    bound = SUPPORTED_UNTIL if stop is None else min(stop, SUPPORTED_UNTIL)
    aware = start.tzinfo is not None
    if not (SUPPORTED_FROM <= (start if aware else start.replace(tzinfo=UTC)) < SUPPORTED_UNTIL):
        raise ValueError("the start lies outside the supported range (1900-01-01 to 2200-01-01)")
    parts = _parts(rule)
    names = [name for name, _ in parts]
    if len(set(names)) != len(names):
        raise ValueError("a rule part is repeated")
    values = dict(parts)
    if values.get("FREQ") not in FREQUENCIES:
        raise ValueError("FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY")
    for name, reason in _REFUSED_PARTS.items():
        if name in values:
            raise ValueError(reason)
    if "COUNT" in values and "UNTIL" in values:
        raise ValueError("COUNT and UNTIL cannot both be given (RFC 5545)")
    _check_values(values)
    count = None
    if "COUNT" in values:
        if not values["COUNT"].isdigit() or int(values["COUNT"]) < 1:
            raise ValueError("COUNT must be a positive integer")
        count = int(values["COUNT"])
    if "INTERVAL" in values and not (values["INTERVAL"].isdigit() and int(values["INTERVAL"]) >= 1):
        raise ValueError("INTERVAL must be a positive integer")
    until = _until(values["UNTIL"]) if "UNTIL" in values else None
    if until is not None and (until.tzinfo is not None) != aware:
        raise ValueError("UNTIL must be a UTC date-time when the start has a time zone, a local one otherwise")
    pattern = ";".join(f"{name}={value}" for name, value in parts if name not in ("COUNT", "UNTIL"))
    wall = start.replace(tzinfo=None)
    parsed = _parse(pattern, wall)
    if after is not None:
        # Compared as instants (UTC), or as UTC wall times for a naive start, like the bound.
        after = min(after, bound).astimezone(UTC)
        if count is None:
            local = after.astimezone(start.tzinfo) if aware else after
            moved = _period_start(values, wall.date(), local.date() - _ZONE_MARGIN)
            if moved is not None:
                parsed = _parse(";".join([pattern, *_implicit_parts(values, wall)]), datetime.combine(moved, time(0)))
    if not aware:
        bound = bound.astimezone(UTC).replace(tzinfo=None)
        after = None if after is None else after.replace(tzinfo=None)
    return Occurrences(parsed, tz=start.tzinfo, count=count, until=until, bound=bound, after=after)


def _parse(pattern: str, wall: datetime) -> rrule:
    try:
        parsed = rrulestr(pattern, dtstart=wall.replace(year=wall.year + SHIFT_YEARS))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(str(exc)[:200] or "not an RRULE") from None
    if not isinstance(parsed, rrule):
        raise ValueError("one RRULE only")
    return parsed


def _implicit_parts(values: dict[str, str], start: datetime) -> list[str]:
    """The parts dateutil takes from DTSTART when the rule leaves them out (rrule.__init__, RFC 5545 §3.3.10),
    written out, so the rule means the same from a later start."""
    parts = [f"{name}={value}" for name, value in (("BYHOUR", start.hour), ("BYMINUTE", start.minute),
                                                   ("BYSECOND", start.second)) if name not in values]
    if not {"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"} & values.keys():
        if values["FREQ"] == "WEEKLY":
            parts.append(f"BYDAY={_WEEKDAYS[start.weekday()]}")
        elif values["FREQ"] == "MONTHLY":
            parts.append(f"BYMONTHDAY={start.day}")
        elif values["FREQ"] == "YEARLY":
            parts += ([] if "BYMONTH" in values else [f"BYMONTH={start.month}"]) + [f"BYMONTHDAY={start.day}"]
    return parts


def _period_start(values: dict[str, str], start: date, target: date) -> date | None:
    """The first day of the last period that begins on or before `target` and lies a whole number of INTERVALs
    after DTSTART's period (dateutil's periods: days, weeks from WKST, months, years), or None when that is
    DTSTART's own period. dateutil's first period begins at DTSTART itself; every later one is whole."""
    interval = int(values.get("INTERVAL", "1"))
    freq = values["FREQ"]
    if freq == "DAILY":
        first, elapsed = start, (target - start).days
    elif freq == "WEEKLY":
        week_start = _WEEKDAYS.index(values["WKST"]) if "WKST" in values else calendar.firstweekday()
        first = start - timedelta(days=(start.weekday() - week_start) % 7)
        elapsed = (target - first).days // 7
    elif freq == "MONTHLY":
        first, elapsed = start.replace(day=1), (target.year - start.year) * 12 + target.month - start.month
    else:
        first, elapsed = start.replace(month=1, day=1), target.year - start.year
    periods = elapsed // interval * interval
    if periods <= 0:
        return None
    if freq == "DAILY":
        return first + timedelta(days=periods)
    if freq == "WEEKLY":
        return first + timedelta(weeks=periods)
    if freq == "MONTHLY":
        month = first.month - 1 + periods
        return date(first.year + month // 12, month % 12 + 1, 1)
    return date(first.year + periods, 1, 1)


class Occurrences(Iterator[datetime]):
    """The occurrences in order; once exhausted, `truncated` is True when the walk stopped at the bound while
    the rule had more occurrences (it ended neither by COUNT, nor by UNTIL, nor by running out of matches)."""

    def __init__(self, parsed: rrule, *, tz: tzinfo | None, count: int | None, until: datetime | None,
                 bound: datetime, after: datetime | None) -> None:
        self.truncated = False
        self._steps = self._walk(parsed, tz, count, until, bound, after)

    def __next__(self) -> datetime:
        return next(self._steps)

    def _walk(self, parsed: rrule, tz: tzinfo | None, count: int | None, until: datetime | None,
              bound: datetime, after: datetime | None) -> Iterator[datetime]:
        for counted, shifted in enumerate(parsed, start=1):
            occurrence = shifted.replace(year=shifted.year - SHIFT_YEARS, tzinfo=tz)
            if until is not None and occurrence > until:
                return
            if occurrence >= bound:
                self.truncated = True
                return
            if after is None or occurrence >= after:
                yield occurrence
            if counted == count:  # not one more step: the next candidate may be centuries away
                return
