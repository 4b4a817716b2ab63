"""The standby router's pure parts: WAL positions as clients carry them, and the lag told from sampled history.
(The routing itself runs against a real primary and standby in tests/ops/test_read_replica.py.)"""

from __future__ import annotations

import math
from collections import deque

import pytest

from tenet.kernel.replica import ReplicaReads, format_lsn, parse_lsn


@pytest.mark.parametrize("text, position", [("0/0", 0), ("0/3000148", 0x3000148), ("16/B374D848", 0x16B374D848),
                                            ("FFFFFFFF/FFFFFFFF", 2**64 - 1)])
def test_a_wal_position_reads_and_writes_back_the_same(text, position):
    assert parse_lsn(text) == position and format_lsn(position) == text


@pytest.mark.parametrize("text", ["", "16", "16/", "/B3", "1/2/3", "G/0", "123456789/0", "16/B374D848 trailing"])
def test_anything_else_is_not_a_wal_position(text):
    with pytest.raises(ValueError):
        parse_lsn(text)


def _router_with_history(samples: list[tuple[float, int]]) -> ReplicaReads:
    router = ReplicaReads.__new__(ReplicaReads)  # the lag needs only the history
    router._history = deque(samples)
    return router


def test_a_standby_that_replayed_the_newest_sample_lags_nothing():
    router = _router_with_history([(10.0, 100), (11.0, 200), (12.0, 300)])
    assert router._lag(300, now=50.0) == 0.0  # an idle primary does not make a caught-up standby lag


def test_the_lag_is_the_age_of_the_oldest_sample_the_standby_has_not_replayed():
    router = _router_with_history([(10.0, 100), (11.0, 200), (12.0, 300)])
    assert router._lag(150, now=13.5) == pytest.approx(2.5)  # the primary passed 150 by 11.0
    assert router._lag(250, now=13.5) == pytest.approx(1.5)


def test_a_standby_behind_every_sample_kept_lags_an_unknown_time_past_the_bound():
    router = _router_with_history([(10.0, 100), (11.0, 200)])
    assert math.isinf(router._lag(50, now=11.5))
