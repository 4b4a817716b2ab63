"""The widened pass (tests/support/widefuzz.py) over the routes no domain's fuzz file claims (the probes and
/metrics), and the proof that every operation of the OpenAPI document is widened by one file or another."""

from __future__ import annotations

import pytest

from tests.support import widefuzz
from tests.support.fuzz import World

pytestmark = pytest.mark.live_server


def test_every_operation_of_the_document_is_widened_by_exactly_one_file():
    claimed = [op.label for name in widefuzz.DOMAINS for op in widefuzz.operations(name)]
    rest = [op.label for op in widefuzz.operations(None)]
    everything = [result.ok().label for result in widefuzz._schema().get_all_operations()]
    assert sorted(claimed + rest) == sorted(everything)


@pytest.mark.parametrize("operation", widefuzz.operations(None), ids=lambda operation: operation.label)
def test_the_other_routes_with_widened_values_never_answer_5xx(operation, live_server, live_admin_token):
    world = World(headers={"Authorization": f"Bearer {live_admin_token}"})
    tally = widefuzz.wide_fuzz(operation, base_url=live_server.url, world=world)
    assert tally.broken == [], tally.broken
