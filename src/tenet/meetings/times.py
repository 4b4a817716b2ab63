"""Time model of spec 001 (§时间模型层): instants in UTC plus an IANA zone for local rendering; statuses that
depend on the clock are computed, never stored (MA-INV-03); durations are elapsed time (D-03, D-14)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from tenet.kernel.recurrence import SUPPORTED_FROM, SUPPORTED_UNTIL
from tenet.kernel.zones import load_zone
from tenet.meetings import errors


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The zone, or TIMEZONE_INVALID. Only IANA names (kernel.zones: not `right/`, `posix/`, `localtime`), and of
    those only `Area/City` and `UTC`: legacy names such as EST are abbreviations, ambiguous (MA-INV-02)."""
    if not name or ("/" not in name and name not in ("UTC", "Etc/UTC")):
        raise errors.TimezoneInvalid(timezone=name[:64])
    try:
        return load_zone(name)
    except ValueError:
        raise errors.TimezoneInvalid(timezone=name[:64]) from None


def local(instant: datetime, zone_name: str) -> str:
    return instant.astimezone(zone(zone_name)).isoformat()


def clock_status(status: str, start: datetime, end: datetime, now: datetime) -> str:
    if status == "CANCELLED":
        return "CANCELLED"
    if now < start:
        return "SCHEDULED"
    return "IN_PROGRESS" if now < end else "COMPLETED"


def window(start: datetime, end: datetime, opens_minutes: int, closes_at: datetime | None) -> tuple[datetime, datetime]:
    """The check-in window, half-open [opens, closes) (D-14)."""
    return start - timedelta(minutes=opens_minutes), closes_at or end


RANGE_TEXT = f"between {SUPPORTED_FROM:%Y-%m-%d} and {SUPPORTED_UNTIL:%Y-%m-%d} (UTC)"


def in_range(moment: datetime, *, end: bool = False) -> bool:
    """An aware instant in the supported range (kernel.recurrence), compared as an instant: nothing converted, so
    nothing overflows. `end`: an exclusive end, which may be the range's end itself."""
    return SUPPORTED_FROM <= moment < SUPPORTED_UNTIL or (end and moment == SUPPORTED_UNTIL)


def check_range(*instants: datetime | None) -> None:
    """Meetings lie in the supported range (MEETING_TIME_INVALID, reason out_of_range): a year-9999 meeting
    overflows the check-in window and the local rendering, and PostgreSQL stores years psycopg cannot read."""
    if any(moment is not None and not in_range(moment) for moment in instants):
        raise errors.MeetingTimeInvalid(f"Meetings lie {RANGE_TEXT}", reason="out_of_range")


def check_times(start: datetime, end: datetime, opens_minutes: int, closes_at: datetime | None) -> None:
    """MA-INV-02 before the database says it (MEETING_TIME_INVALID with the reason)."""
    check_range(start, end, closes_at)
    if end <= start:
        raise errors.MeetingTimeInvalid("The meeting must end after it starts", reason="end_not_after_start")
    if end - start > timedelta(days=7):
        raise errors.MeetingTimeInvalid("A meeting lasts at most 7 days", reason="too_long")
    opens, _ = window(start, end, opens_minutes, None)
    if closes_at is not None and closes_at <= opens:
        raise errors.MeetingTimeInvalid("Check-in must close after it opens", reason="window_closes_before_opening")
