"""Two agents confirm one task at the same moment through the desk, on real parallel connections (committed data):
one confirm wins, the other page shows "changed by someone else" and nothing is written twice (RSV-INV-17)."""

from __future__ import annotations

import asyncio

import pytest

from tenet.iam.permissions import Role
from tests.reservations.conftest import assign, make_world
from tests.support.rows import scalar
from tests.web.desk_support import ReservationApi, agent_browser, body, form_of, item, signed_in

DESK = "/console/desk"


@pytest.fixture
def app(settings, committed_db, clock):
    from tenet.app import create_app

    return create_app(settings, database=committed_db, clock=clock, run_background_tasks=False)


@pytest.fixture
def users(app, committed_db, clock):
    from tests.support.users import UserFactory

    return UserFactory(app, committed_db, clock)


@pytest.mark.invariant("RSV-INV-17")
async def test_two_agents_confirming_at_once_one_wins_and_the_other_sees_the_conflict(app, client, committed_db,
                                                                                      users, clock):
    world = await make_world(committed_db, users, clock)
    colleague = await users.make(roles=[Role.RESERVATION_AGENT], display_name="Cora Colleague")
    await assign(committed_db, colleague, "H1", clock)
    rsv = ReservationApi(client, app, clock)
    fields = {"guest_name": "Ada", "arrival_date": "2026-03-01", "departure_date": "2026-03-03",
              "room_type": "KING", "adults": 2}
    task = (await rsv.ingest_ok(world.ingest1, body("H1", [item("new", cn="CNF-RACE", fields=fields)])))[
        "items"][0]["task_id"]
    async with agent_browser(app) as first, agent_browser(app) as second:
        await signed_in(first, world.agent.email)
        await signed_in(second, colleague.email)
        forms = [form_of((await b.get(f"{DESK}/tasks/{task}")).text, "card-form") for b in (first, second)]
        answers = await asyncio.gather(*(b.post(f"{DESK}/tasks/{task}/confirm", data=f)
                                         for b, f in zip((first, second), forms, strict=True)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses[0] == 303 and statuses[1] in (409, 412), statuses
    loser = next(a for a in answers if a.status_code != 303)
    assert "Changed by someone else" in loser.text
    confirmed = await scalar(committed_db, "SELECT count(*) FROM reservation.workflow_reservation_audit_log "
                                           "WHERE task_id = :t AND action = 'reservation.task.confirmed'", t=int(task))
    assert confirmed == 1
