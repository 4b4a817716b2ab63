"""Time zones and RFC 5545 recurrence rules of schedule items (SOC-INV-10, D-12, D-18).

An item's first occurrence is [start_at, end_at]; a rule repeats it in the item's IANA zone by wall-clock
arithmetic (kernel.recurrence: dateutil's rrule on an aware `ZoneInfo` start), so a weekly 09:00 meeting stays
at 09:00 local on both sides of a DST change. A wall time that does not exist (02:30 on the spring-forward
night) is read with the offset before the gap, one that occurs twice (01:30 on the fall-back night) at its first
occurrence (`fold=0`), as RFC 5545 says.

Accepted rules (D-12): FREQ DAILY/WEEKLY/MONTHLY/YEARLY (nothing sub-daily: no BYHOUR/BYMINUTE/BYSECOND),
not both COUNT and UNTIL, COUNT <= 1000, INTERVAL <= 365, UNTIL as a UTC date-time (`...Z`, what RFC 5545
requires when DTSTART has a TZID), at most 500 characters, and the rule must produce the start itself as its
first occurrence (RFC 5545 counts DTSTART as the first instance, dateutil does not: requiring the match makes
our expansion and every calendar client agree). Expansion stops at the end of the supported range
(2200-01-01, kernel.recurrence): a rule with no occurrence before it is refused, and `series_end_at` of a
COUNT or UNTIL rule whose occurrences would run past it is the end of the last one before it.

Reads expand from the window, not from the item's start (kernel.recurrence `after`): a daily item from 1900 read
in 2026 costs the window's days, not 46,000. A COUNT rule cannot be moved without its earlier occurrences, but its
last one is stored (`series_end_at` minus the duration, computed by `check_series` on every write of the start,
end, zone or rule, and trusted by the window queries already): reads take it as the UNTIL rule with exactly the
same occurrences. Expansion is CPU work: callers that run it in a request or a job run it in a worker thread.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tenet.kernel import recurrence as kernel_recurrence
from tenet.kernel.recurrence import SUPPORTED_FROM, SUPPORTED_UNTIL
from tenet.kernel.zones import load_zone
from tenet.social import errors

MAX_COUNT = 1000
MAX_INTERVAL = 365
MAX_OCCURRENCES_PER_WINDOW = 1000
# Items, windows and todos' due dates lie in [SUPPORTED_FROM, SUPPORTED_UNTIL) (1900-01-01 to 2200-01-01 UTC,
# kernel.recurrence): far enough for any calendar, and every expansion and sum of a duration stays inside
# Python's datetime range.
RANGE_TEXT = f"between {SUPPORTED_FROM:%Y-%m-%d} and {SUPPORTED_UNTIL:%Y-%m-%d} (UTC)"


def in_range(moment: datetime) -> bool:
    """An aware instant inside the supported range (compared as instants: no conversion that could overflow)."""
    return moment.tzinfo is not None and SUPPORTED_FROM <= moment < SUPPORTED_UNTIL
_ALLOWED_PARTS = {"FREQ", "INTERVAL", "COUNT", "UNTIL", "BYDAY", "BYMONTHDAY", "BYMONTH", "BYYEARDAY", "BYWEEKNO",
                  "BYSETPOS", "WKST"}
_PART = re.compile(r"^[A-Z]+=[A-Za-z0-9,+-]+\Z")
_UNTIL = re.compile(r"^\d{8}T\d{6}Z\Z")


def zone(name: str) -> ZoneInfo:
    """An IANA zone (kernel.zones: not `right/`, `posix/`, `localtime` or `Factory`), or TIMEZONE_INVALID."""
    try:
        return load_zone(name)
    except ValueError:
        raise errors.TimezoneInvalid(timezone=name[:64]) from None


def _invalid(reason: str) -> errors.RecurrenceRuleInvalid:
    return errors.RecurrenceRuleInvalid(f"The recurrence rule is not valid: {reason}", reason=reason)


def normalize_rule(raw: str) -> str:
    """The rule as stored: without an `RRULE:` prefix, upper case, FREQ first, the other parts in the order
    given. Shape problems answer 422 RECURRENCE_RULE_INVALID with a `reason`."""
    value = raw.strip()
    if value.upper().startswith("RRULE:"):
        value = value[6:]
    value = value.upper()
    if not value or len(value) > 500:
        raise _invalid("a rule has 1 to 500 characters")
    parts = value.split(";")
    if any(not _PART.match(p) for p in parts):
        raise _invalid("each part is NAME=VALUE, separated by ;")
    names = [p.split("=", 1)[0] for p in parts]
    if len(set(names)) != len(names):
        raise _invalid("a part is repeated")
    unknown = set(names) - _ALLOWED_PARTS
    if unknown:
        raise _invalid(f"unsupported parts {', '.join(sorted(unknown))} (no sub-daily repetition)")
    values = dict(p.split("=", 1) for p in parts)
    if values.get("FREQ") not in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY"):
        raise _invalid("FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY")
    if "COUNT" in values and "UNTIL" in values:
        raise _invalid("COUNT and UNTIL cannot both be given")
    if "COUNT" in values and not (values["COUNT"].isdigit() and 1 <= int(values["COUNT"]) <= MAX_COUNT):
        raise _invalid(f"COUNT must be between 1 and {MAX_COUNT}")
    if "INTERVAL" in values and not (values["INTERVAL"].isdigit() and 1 <= int(values["INTERVAL"]) <= MAX_INTERVAL):
        raise _invalid(f"INTERVAL must be between 1 and {MAX_INTERVAL}")
    if "UNTIL" in values and not _UNTIL.match(values["UNTIL"]):
        raise _invalid("UNTIL must be a UTC date-time such as 20261231T235959Z")
    ordered = [f"FREQ={values['FREQ']}"] + [p for p in parts if not p.startswith("FREQ=")]
    return ";".join(ordered)


def expand(rule: str, start: datetime, tz: ZoneInfo, *, after: datetime | None = None) -> Iterator[datetime]:
    """The rule's occurrences as local times in `tz` (those at or after `after`, found from there), bounded to the
    supported range (kernel.recurrence: a rule that never matches costs a bounded walk, not a search to the year
    9999)."""
    try:
        return kernel_recurrence.expand(rule, start.astimezone(tz), after=after)
    except ValueError as exc:
        raise _invalid(str(exc)[:200] or "not an RRULE") from None


def _until(rule: str) -> datetime | None:
    until = next((p[6:] for p in rule.split(";") if p.startswith("UNTIL=")), None)
    return None if until is None else datetime.strptime(until, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def _last(rule: str, start: datetime, tz: ZoneInfo) -> datetime | None:
    """The last occurrence before UNTIL, COUNT or the end of the supported range (what every query can reach).
    An UNTIL rule's is looked for in the year before its end first (a daily rule to 2199 from 1900 walked 110,000
    days); a COUNT rule, or an UNTIL one without an occurrence that year, is walked from the start (bounded)."""
    until = _until(rule)
    if until is not None:
        tail = deque(expand(rule, start, tz, after=min(until, SUPPORTED_UNTIL) - timedelta(days=366)), maxlen=1)
        if tail:
            return tail[0]
    rest = deque(expand(rule, start, tz), maxlen=1)
    return rest[0] if rest else None


def reading_rule(rule: str, *, start_at: datetime, end_at: datetime, series_end_at: datetime | None) -> str:
    """The rule as reads expand it: a COUNT rule as the UNTIL rule ending at its stored last occurrence (the same
    occurrences, and one a window can start at); any other rule, or a COUNT one without a stored end, as it is."""
    if series_end_at is None or not any(p.startswith("COUNT=") for p in rule.split(";")):
        return rule
    last = (series_end_at - (end_at - start_at)).astimezone(UTC)
    return ";".join([*(p for p in rule.split(";") if not p.startswith("COUNT=")), f"UNTIL={last:%Y%m%dT%H%M%SZ}"])


@dataclass(frozen=True)
class Series:
    rule: str | None
    series_end_at: datetime | None


def check_series(*, start_at: datetime, end_at: datetime, timezone: str, recurrence_rule: str | None) -> Series:
    """Validate an item's shape (SOC-INV-10) and compute what is stored: the normalised rule and the end of
    the last occurrence (None: the series never ends)."""
    tz = zone(timezone)
    if start_at.tzinfo is None or end_at.tzinfo is None:
        raise errors.ScheduleItemInvalid("start_at and end_at need a time zone offset")
    if not (in_range(start_at) and in_range(end_at)):
        raise errors.ScheduleItemInvalid(f"items lie {RANGE_TEXT}")
    if end_at < start_at:
        raise errors.ScheduleItemInvalid("end_at must not be before start_at")
    if end_at - start_at > timedelta(days=366):
        raise errors.ScheduleItemInvalid("an occurrence lasts at most 366 days")
    if recurrence_rule is None:
        return Series(None, end_at)
    rule_text = normalize_rule(recurrence_rule)
    found = expand(rule_text, start_at, tz)
    first = next(found, None)
    if first is None:
        raise _invalid(f"the rule produces no occurrence before {SUPPORTED_UNTIL.year}")
    if first.astimezone(UTC) != start_at.astimezone(UTC):
        raise _invalid("the start must be the rule's first occurrence (RFC 5545 counts DTSTART as one)")
    if "COUNT=" not in rule_text and "UNTIL=" not in rule_text:
        return Series(rule_text, None)
    last = _last(rule_text, start_at, tz) or first
    return Series(rule_text, last.astimezone(UTC) + (end_at - start_at))


@dataclass(frozen=True)
class Occurrence:
    start_at: datetime
    end_at: datetime
    local_start: datetime
    local_end: datetime


def occurrences(*, start_at: datetime, end_at: datetime, timezone: str, recurrence_rule: str | None,
                series_end_at: datetime | None, window_from: datetime, window_to: datetime,
                limit: int = MAX_OCCURRENCES_PER_WINDOW) -> list[Occurrence]:
    """The occurrences overlapping [window_from, window_to): start < to and end > from (a zero-length one
    counts when from <= start < to), in order, at most `limit`. The expansion starts at the first one that can
    overlap (start >= from - duration), so it walks the window's periods and the item's age costs nothing; it is
    CPU work, for a worker thread."""
    tz = ZoneInfo(timezone)
    duration = end_at - start_at

    def overlaps(start: datetime) -> bool:
        end = start + duration
        return start < window_to and (end > window_from or (duration == timedelta(0) and start >= window_from))

    def occurrence(local: datetime) -> Occurrence:
        start = local.astimezone(UTC)
        local_end = (start + duration).astimezone(tz)
        return Occurrence(start, start + duration, start.astimezone(tz), local_end)

    if recurrence_rule is None:
        return [occurrence(start_at.astimezone(tz))] if overlaps(start_at) else []
    found: list[Occurrence] = []
    rule = reading_rule(recurrence_rule, start_at=start_at, end_at=end_at, series_end_at=series_end_at)
    for local in expand(rule, start_at, tz, after=window_from - duration):
        if local.astimezone(UTC) >= window_to or len(found) >= limit:
            break
        if overlaps(local.astimezone(UTC)):
            found.append(occurrence(local))
    return found
