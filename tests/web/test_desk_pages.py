"""The reservation desk over plain HTTP (issue 19): the hotels page with open tasks by state and the switcher,
administrators registering hotels and assigning agents; a hotel's queue (statuses, search, cursors, the waiting
tasks oldest first, the live fragment); an order with its tasks, `blocked` and why; ending and logic-deleting.
Hotel scoping as the API: another hotel's queue, order or task is the 404 page, also by editing the URL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.reservations.conftest import make_world
from tests.web.desk_support import ReservationApi, body, csrf, form_of, item, signed_in

DESK = "/console/desk"


@pytest.fixture
async def world(db, users, clock):
    return await make_world(db, users, clock)


@pytest.fixture
def rsv(client, app, clock) -> ReservationApi:
    return ReservationApi(client, app, clock)


async def _batch(rsv, world, *items: str, hotel: str = "H1") -> dict:
    who = world.ingest1 if hotel == "H1" else world.ingest2
    return await rsv.ingest_ok(who, body(hotel, list(items)))


async def test_the_hotels_page_shows_the_agents_hotels_with_open_tasks_by_state(client, rsv, world):
    await _batch(rsv, world, item(cn="CNF-1"), item(cn="CNF-1"), item(cn="CNF-2"))
    await _batch(rsv, world, item(cn="CNF-9"), hotel="H2")
    await signed_in(client, world.agent.email)
    page = await client.get(DESK)
    assert page.status_code == 200, page.text
    assert 'data-hotel="H1"' in page.text and 'data-hotel="H2"' not in page.text
    row = page.text[page.text.index('data-hotel="H1"'):]
    assert '<td class="count-pending">3</td>' in row[:row.index("</tr>")]
    assert "Register a hotel" not in page.text  # an agent does not manage hotels
    assert 'href="/console/desk"' in page.text  # the console's navigation leads to the desk


async def test_the_switcher_keeps_the_hotel_and_refuses_an_invisible_one(client, world):
    await signed_in(client, world.agent.email)
    page = await client.get(DESK)
    chosen = await client.post(f"{DESK}/hotel", data={"csrf_token": csrf(page.text), "hotel_id": "H1"})
    assert chosen.status_code == 303 and chosen.headers["location"] == f"{DESK}/hotels/H1/orders"
    assert "tenet_desk_hotel=H1" in chosen.headers["set-cookie"]
    again = await client.get(DESK)
    assert "(current)" in again.text
    refused = await client.post(f"{DESK}/hotel", data={"csrf_token": csrf(page.text), "hotel_id": "H2"})
    assert refused.status_code == 404 and 'data-code="HOTEL_NOT_FOUND"' in refused.text


async def test_an_administrator_registers_a_hotel_and_assigns_an_agent(client, world, users):
    newcomer = await users.make(display_name="Nina Newcomer")
    await signed_in(client, world.admin.email)
    page = await client.get(DESK)
    registered = await client.post(f"{DESK}/hotels", data={"csrf_token": csrf(page.text), "hotel_id": "H7",
                                                           "display_name": "Seaside"})
    assert registered.status_code == 303, registered.text
    again = await client.post(f"{DESK}/hotels", data={"csrf_token": csrf(page.text), "hotel_id": "H7"})
    assert again.status_code == 409 and 'data-code="HOTEL_ALREADY_EXISTS"' in again.text
    found = await client.get(DESK, params={"staff": "H7", "people": "Nina"})
    assert "Nina Newcomer" in found.text
    assigned = await client.post(f"{DESK}/hotels/H7/staff", data={"csrf_token": csrf(page.text),
                                                                  "user_id": str(newcomer.id)})
    assert assigned.status_code == 303
    listed = await client.get(DESK, params={"staff": "H7"})
    assert f'data-user="{newcomer.id}"' in listed.text
    removed = await client.post(f"{DESK}/hotels/H7/staff/remove", data={"csrf_token": csrf(page.text),
                                                                        "user_id": str(newcomer.id)})
    assert removed.status_code == 303
    assert f'data-user="{newcomer.id}"' not in (await client.get(DESK, params={"staff": "H7"})).text


async def test_an_agent_cannot_register_hotels_even_by_a_forged_form(client, world):
    await signed_in(client, world.agent.email)
    page = await client.get(DESK)
    forged = await client.post(f"{DESK}/hotels", data={"csrf_token": csrf(page.text), "hotel_id": "H8"})
    assert forged.status_code == 403 and 'data-code="PERMISSION_DENIED"' in forged.text


async def test_the_queue_lists_orders_by_status_with_search_and_waiting_tasks_oldest_first(client, rsv, world, clock):
    first = await _batch(rsv, world, item(cn="CNF-OLD"))
    clock.advance(timedelta(minutes=5))
    await _batch(rsv, world, item(cn="CNF-NEW"), item(gc="GRP-5"))
    await signed_in(client, world.agent.email)
    queue = await client.get(f"{DESK}/hotels/H1/orders")
    assert queue.status_code == 200, queue.text
    waiting = queue.text[queue.text.index('id="waiting"'):queue.text.index('id="orders"')]
    first_task = first["items"][0]["task_id"]
    assert waiting.index(f'data-task="{first_task}"') < waiting.index("data-task=", waiting.index(
        f'data-task="{first_task}"') + 5)  # the oldest waiting task comes first
    assert queue.text.count('data-order="') == 3
    searched = await client.get(f"{DESK}/hotels/H1/orders", params={"q": "grp-5"})
    assert searched.text.count('data-order="') == 1 and "GRP-5" in searched.text
    ended = await client.get(f"{DESK}/hotels/H1/orders", params={"status": "ENDED"})
    assert ended.text.count('data-order="') == 0
    live = await client.get(f"{DESK}/hotels/H1/orders/live", headers={"HX-Request": "true"})
    assert live.status_code == 200 and live.text.lstrip().startswith('<div id="queue"')
    assert 'hx-trigger="every 3s"' in live.text


async def test_new_tasks_appear_in_the_live_fragment(client, rsv, world):
    await signed_in(client, world.agent.email)
    before = await client.get(f"{DESK}/hotels/H1/orders/live")
    assert "Nothing is waiting." in before.text
    answer = await _batch(rsv, world, item(cn="CNF-LIVE"))
    after = await client.get(f"{DESK}/hotels/H1/orders/live")
    assert f'data-task="{answer["items"][0]["task_id"]}"' in after.text


async def test_the_queue_pages_on_with_the_apis_cursor(client, rsv, world, clock):
    for n in range(52):
        await _batch(rsv, world, item(cn=f"CNF-P{n}"))
        clock.advance(timedelta(seconds=1))
    await signed_in(client, world.agent.email)
    first = await client.get(f"{DESK}/hotels/H1/orders")
    assert first.text.count('data-order="') == 50 and 'id="next-page"' in first.text
    link = first.text[first.text.index('id="next-page" href="') + 21:]
    second = await client.get(link[:link.index('"')].replace("&amp;", "&"))
    assert second.text.count('data-order="') == 2


@pytest.mark.invariant("RSV-INV-21")
@pytest.mark.parametrize("path", ["/hotels/H2/orders", "/hotels/H2/orders/live", "/orders/{order}", "/tasks/{task}"])
async def test_another_hotels_rows_are_the_404_page_also_by_url(client, rsv, world, path):
    answer = await _batch(rsv, world, item(cn="CNF-H2"), hotel="H2")
    order, task = answer["items"][0]["order_id"], answer["items"][0]["task_id"]
    await signed_in(client, world.agent.email)
    response = await client.get(DESK + path.format(order=order, task=task))
    assert response.status_code == 404 and "data-code=" in response.text


@pytest.mark.invariant("RSV-INV-21")
async def test_another_hotels_order_and_task_cannot_be_changed_by_a_forged_form(client, rsv, world):
    answer = await _batch(rsv, world, item(cn="CNF-H2"), hotel="H2")
    order, task = answer["items"][0]["order_id"], answer["items"][0]["task_id"]
    await signed_in(client, world.agent.email)
    token = csrf((await client.get(DESK)).text)
    for path, data in ((f"/orders/{order}/end", {"version": "1"}), (f"/tasks/{task}/confirm", {"version": "1"}),
                       (f"/tasks/{task}/draft", {"version": "1"}), (f"/tasks/{task}/abandon", {"version": "1",
                                                                                              "reason": "x"})):
        response = await client.post(DESK + path, data={"csrf_token": token, **data})
        assert response.status_code == 404, (path, response.status_code)
    api_task = await rsv.task(world.agent2, task)
    assert api_task["task_status"] == "PENDING_CONFIRM" and api_task["version"] == 1


async def test_the_order_page_shows_tasks_in_queue_order_with_blocked_and_why(client, rsv, world):
    answer = await _batch(rsv, world, item(cn="CNF-Q"), item(cn="CNF-Q"))
    first, second = (i["task_id"] for i in answer["items"])
    order = answer["items"][0]["order_id"]
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/orders/{order}")
    assert page.status_code == 200, page.text
    assert page.text.index(f'data-task="{first}"') < page.text.index(f'data-task="{second}"')
    second_row = page.text[page.text.index(f'data-task="{second}"'):]
    second_row = second_row[:second_row.index("</tr>")]
    assert 'data-blocked="true"' in second_row and f'/console/desk/tasks/{first}"' in second_row
    assert '<td class="may">move abandon</td>' in second_row  # the API's flags: a blocked task is not confirmed
    assert 'id="end-order"' not in page.text  # open tasks: nothing to close


async def test_an_order_without_open_tasks_is_ended_and_a_temporary_one_logic_deleted(client, rsv, world):
    active = await _batch(rsv, world, item(cn="CNF-END"))
    temporary = await _batch(rsv, world, item("review"))
    await signed_in(client, world.agent.email)
    for answer in (active, temporary):
        task = await rsv.task(world.agent, answer["items"][0]["task_id"])
        abandoned = await rsv.post(world.agent, f"/tasks/{task['id']}/abandon", {"reason": "duplicate"},
                                   version=task["version"])
        assert abandoned.status_code == 200, abandoned.text
    order = active["items"][0]["order_id"]
    page = await client.get(f"{DESK}/orders/{order}")
    assert 'id="end-order"' in page.text and 'id="logic-delete-order"' not in page.text
    ended = await client.post(f"{DESK}/orders/{order}/end", data=form_of(page.text, "end-order"))
    assert ended.status_code == 303
    assert (await rsv.order(world.agent, order))["order_status"] == "ENDED"
    temp_order = temporary["items"][0]["order_id"]
    page = await client.get(f"{DESK}/orders/{temp_order}")
    assert 'id="logic-delete-order"' in page.text
    no_reason = await client.post(f"{DESK}/orders/{temp_order}/logic-delete",
                                  data={**form_of(page.text, "logic-delete-order"), "reason": ""})
    assert no_reason.status_code == 422 and 'data-code="VALIDATION_FAILED"' in no_reason.text
    deleted = await client.post(f"{DESK}/orders/{temp_order}/logic-delete",
                                data={**form_of(page.text, "logic-delete-order"), "reason": "Sent by mistake"})
    assert deleted.status_code == 303
    shown = await client.get(f"{DESK}/orders/{temp_order}")
    assert 'data-status="LOGIC_DELETED"' in shown.text and "Sent by mistake" in shown.text


async def test_the_queue_reads_as_many_statements_for_many_orders_as_for_one(client, rsv, world, db, monkeypatch):
    """One round of queries whatever the hotel holds: session, settings, waiting tasks, orders."""
    from tests.web.test_console_http import _CountingReads

    await _batch(rsv, world, item(cn="CNF-ONE"))
    await signed_in(client, world.agent.email)
    counting = _CountingReads(db.reads)
    monkeypatch.setattr(db, "reads", counting)
    counts = {}
    for name in ("one", "many"):
        if name == "many":
            monkeypatch.setattr(db, "reads", counting.inner)
            for start in range(0, 100, 20):
                await _batch(rsv, world, *(item(cn=f"CNF-M{start + i}") for i in range(20)))
            monkeypatch.setattr(db, "reads", counting)
        counting.count = 0
        page = await client.get(f"{DESK}/hotels/H1/orders")
        assert page.status_code == 200
        counts[name] = counting.count
    assert counts["one"] == counts["many"] == 4
    assert page.text.count('data-order="') == 50 and page.text.count("<tr data-task=") == 20
