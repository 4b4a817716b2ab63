"""Every action a desk page shows is one the API allows that caller (issue 19), as a table: tasks in each state
(free, blocked, READY, EXECUTING with a failed operation, COMPLETED, FAILED, a manual review on a temporary order),
for an agent of the hotel and an administrator; the card page's actions equal the `can_*` flags GET /tasks/{id}
answers the same caller, and an action it does not show is refused when forged. Someone without the desk's
permission gets the 403 page."""

from __future__ import annotations

import re

import pytest

from tests.reservations.conftest import confirmable, make_world
from tests.web.desk_support import ReservationApi, agent_browser, body, csrf, item, signed_in

DESK = "/console/desk"
# The element a card page shows for each action, and the API flag that allows it.
SHOWN = {"edit": 'id="save-draft"', "confirm": 'id="confirm"', "execute": 'id="execute-task"',
         "move": 'id="move"', "convert": 'id="convert"', "abandon": 'id="abandon"', "retry": 'class="retry"'}
FORGED = {"confirm": "/confirm", "execute": "/execute", "convert": "/convert", "abandon": "/abandon",
          "move": "/move", "edit": "/draft"}


@pytest.fixture
async def world(db, users, clock):
    return await make_world(db, users, clock)


@pytest.fixture
def rsv(client, app, clock) -> ReservationApi:
    return ReservationApi(client, app, clock)


async def _states(rsv, world) -> dict[str, str]:
    """Tasks in each state the desk distinguishes, by name."""
    answer = await rsv.ingest_ok(world.ingest1, body("H1", [
        item(cn="CNF-A"), item(cn="CNF-A"), item(cn="CNF-B"), item(cn="CNF-C"), item(cn="CNF-D"), item("review")]))
    free, blocked, ready, executing, done, review = (i["task_id"] for i in answer["items"])
    await rsv.confirm_ok(world.agent, ready)
    task = await rsv.task(world.agent, executing)
    await rsv.confirm_ok(world.agent, executing, confirmable(task, opera_simulation_outcome="FAIL_WRITE_ALWAYS"))
    assert (await rsv.execute(world.agent, executing)).status_code == 200
    await rsv.confirm_ok(world.agent, done)
    assert (await rsv.execute(world.agent, done)).status_code == 200
    failed = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CNF-E")])))["items"][0]["task_id"]
    version = (await rsv.task(world.agent, failed))["version"]
    assert (await rsv.post(world.agent, f"/tasks/{failed}/abandon", {"reason": "dup"},
                           version=version)).status_code == 200
    return {"free": free, "blocked": blocked, "ready": ready, "executing": executing, "completed": done,
            "failed": failed, "review": review}


def _allowed(task: dict, operations: list[dict]) -> set[str]:
    flags = {name for name in ("edit", "confirm", "execute", "move", "convert", "abandon") if task[f"can_{name}"]}
    return flags | ({"retry"} if any(op["can_retry"] for op in operations) else set())


@pytest.mark.invariant("RSV-INV-14")
@pytest.mark.parametrize("who", ["agent", "admin"])
async def test_every_action_a_card_shows_is_allowed_by_the_api_for_that_caller(app, rsv, world, who):
    tasks = await _states(rsv, world)
    target = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CNF-TARGET")])))["items"][0]["order_id"]
    caller = getattr(world, who)
    table = {}
    async with agent_browser(app) as browser:
        await signed_in(browser, caller.email)
        for state, task_id in tasks.items():
            page = await browser.get(f"{DESK}/tasks/{task_id}")
            assert page.status_code == 200, (state, page.text[:300])
            shown = {name for name, marker in SHOWN.items() if marker in page.text}
            actions = set(re.findall(r'<form method="post" action="([^"]+)"', page.text))
            assert not any(word in a for a in actions for word in ("complete", "skip")), actions
            api_task = await rsv.task(caller, task_id)
            operations = (await rsv.get(caller, f"/tasks/{task_id}/operations")).json()["items"]
            table[state] = (shown, _allowed(api_task, operations))
        assert all(shown == allowed for shown, allowed in table.values()), table
        assert table["blocked"][0] == {"move", "abandon"} and table["completed"][0] == set()
        assert "retry" in table["executing"][0] and "convert" in table["review"][0]
        token = csrf((await browser.get(DESK)).text)
        for state, (shown, _) in table.items():  # what a page does not show is refused when forged
            task = await rsv.task(caller, tasks[state])
            for name in set(FORGED) - shown:
                forged = await browser.post(f"{DESK}/tasks/{tasks[state]}{FORGED[name]}", data={
                    "csrf_token": token, "version": str(task["version"]), "reason": "forged",
                    "task_card_type": "CANCEL_BOOKING", "order_id": target})
                assert forged.status_code in (409, 412, 422), (state, name, forged.status_code)
            after = await rsv.task(caller, tasks[state])
            assert after["version"] == task["version"] and after["task_status"] == task["task_status"], state


async def test_someone_without_the_desks_permission_gets_the_403_page(client, world):
    await signed_in(client, world.employee.email)
    page = await client.get(DESK)
    assert page.status_code == 403 and 'data-code="PERMISSION_DENIED"' in page.text
    home = await client.get("/console")
    assert 'href="/console/desk"' not in home.text  # and the navigation does not offer it
