"""The cost of a recurrence expansion as a count, not a time: the periods (days, weeks, months, years) dateutil
examines. A CPU-time bound flakes on a slow or busy machine; this count is the same on every machine.

dateutil's `rrule` walks period by period and asks its `_iterinfo` for each period's day set (one call of
`ydayset`, `mdayset`, `wdayset` or `ddayset` per period, by frequency), so counting those calls counts the walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dateutil import rrule as dateutil_rrule

# tenet.kernel.recurrence walks from the start moved 7,600 years ahead to dateutil's last year, 9999: from a start
# in the supported range (1900 onward) that is at most the years 1900..2399 moved, 500 years of 366 days. Without
# the bound, a daily rule that never matches walks from 2026 to 9999: about 2.9 million periods.
ONE_BOUNDED_WALK = 500 * 366
_DAY_SETS = ("ydayset", "mdayset", "wdayset", "ddayset")


@dataclass
class PeriodCount:
    periods: int = 0


@contextmanager
def counting_dateutil_periods() -> Iterator[PeriodCount]:
    """Count every period any dateutil expansion examines inside the block."""
    count = PeriodCount()
    originals = {name: getattr(dateutil_rrule._iterinfo, name) for name in _DAY_SETS}

    def counting(original):
        def day_set(self, *args):
            count.periods += 1
            return original(self, *args)
        return day_set

    for name, original in originals.items():
        setattr(dateutil_rrule._iterinfo, name, counting(original))
    try:
        yield count
    finally:
        for name, original in originals.items():
            setattr(dateutil_rrule._iterinfo, name, original)
