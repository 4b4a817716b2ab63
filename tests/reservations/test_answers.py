"""A command's answer is the GET of the same thing: every reservation route that creates or changes something
answers the body (and ETag) its GET gives right after, because the route re-reads it through the GET's query
function on the command's unit of work. Lists stand for the GET where a resource has no route of its own (a
hotel, a hotel's staff); an ingest's items are the batch's."""

from __future__ import annotations

from typing import Any

import httpx

from tests.reservations.conftest import ReservationApi, body, confirmable, item


async def _same(rsv: ReservationApi, who, answer: httpx.Response, path: str, status: int = 200) -> dict[str, Any]:
    """The command's answer equals GET `path` (body and ETag) for the same caller."""
    assert answer.status_code == status, answer.text
    read = await rsv.get(who, path)
    assert read.status_code == 200, read.text
    assert answer.json() == read.json()
    assert answer.headers.get("etag") == read.headers.get("etag")
    return answer.json()


async def _execution_is_the_gets(rsv: ReservationApi, who, answer: httpx.Response) -> dict[str, Any]:
    """execute and retry answer {task, operations}: GET /tasks/{id} and GET /tasks/{id}/operations."""
    assert answer.status_code == 200, answer.text
    task_id = answer.json()["task"]["id"]
    task = await rsv.get(who, f"/tasks/{task_id}")
    operations = await rsv.get(who, f"/tasks/{task_id}/operations")
    assert answer.json() == {"task": task.json(), "operations": operations.json()["items"]}
    assert answer.headers["etag"] == task.headers["etag"]
    return answer.json()


async def _one(rsv: ReservationApi, world, raw_item: str) -> dict[str, Any]:
    (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [raw_item])))["items"]
    return result


class TestTasks:
    async def test_draft_confirm_execute_answer_the_get(self, rsv, world):
        result = await _one(rsv, world, item(cn="AN1"))
        path = f"/tasks/{result['task_id']}"
        task = await rsv.task(world.agent, result["task_id"])
        drafted = await _same(rsv, world.agent, await rsv.put(
            world.agent, f"{path}/card/draft", {"payload": {"room_type": "TWIN"}}, version=task["version"]), path)
        confirmed = await _same(rsv, world.agent, await rsv.post(
            world.agent, f"{path}/confirm", {"payload": confirmable(task)}, version=drafted["version"]), path)
        assert confirmed["task_status"] == "READY"
        executed = await _execution_is_the_gets(rsv, world.agent, await rsv.post(
            world.agent, f"{path}/execute", version=confirmed["version"]))
        assert executed["task"]["task_status"] == "COMPLETED"

    async def test_a_failed_execution_and_its_retry_answer_the_gets(self, rsv, world):
        result = await _one(rsv, world, item(cn="AN2"))
        task = await rsv.task(world.agent, result["task_id"])
        await rsv.confirm_ok(world.agent, task["id"], confirmable(task, opera_simulation_outcome="FAIL_WRITE_ONCE"))
        failed = await _execution_is_the_gets(rsv, world.agent, await rsv.execute(world.agent, task["id"]))
        write = next(o for o in failed["operations"] if o["operation_status"] == "FAILED")
        retried = await _execution_is_the_gets(rsv, world.agent, await rsv.post(
            world.agent, f"/operations/{write['id']}/retry", version=write["attempt_count"]))
        assert retried["task"]["task_status"] == "COMPLETED"

    async def test_convert_move_and_abandon_answer_the_get(self, rsv, world):
        review = await _one(rsv, world, item("review"))
        path = f"/tasks/{review['task_id']}"
        converted = await _same(rsv, world.agent, await rsv.post(
            world.agent, f"{path}/convert", {"task_card_type": "CANCEL_BOOKING"}, version=1), path)
        target = await _one(rsv, world, item(cn="AN3"))
        moved = await _same(rsv, world.agent, await rsv.post(
            world.agent, f"{path}/move", {"order_id": target["order_id"]}, version=converted["version"]), path)
        assert moved["order_id"] == target["order_id"]
        abandoned = await _same(rsv, world.agent, await rsv.post(
            world.agent, f"/tasks/{target['task_id']}/abandon", {"reason": "duplicate"}, version=1),
            f"/tasks/{target['task_id']}")
        assert abandoned["task_status"] == "FAILED"


class TestOrders:
    async def test_create_end_and_logic_delete_answer_the_get(self, rsv, world):
        created = await rsv.post(world.agent, "/orders", {"hotel_id": "H1", "order_key_type": "CONFIRMATION_NUMBER",
                                                          "order_business_key": "AN-ORDER-1"})
        order = await _same(rsv, world.agent, created, f"/orders/{created.json()['id']}", 201)
        ended = await _same(rsv, world.agent, await rsv.post(world.agent, f"/orders/{order['id']}/end", {}),
                            f"/orders/{order['id']}")
        assert ended["order_status"] == "ENDED"
        other = await rsv.post(world.agent, "/orders", {"hotel_id": "H1", "order_key_type": "GROUP_CODE",
                                                        "order_business_key": "AN-GROUP"})
        deleted = await _same(rsv, world.agent, await rsv.post(
            world.agent, f"/orders/{other.json()['id']}/logic-delete", {"reason": "made by mistake"}),
            f"/orders/{other.json()['id']}")
        assert deleted["order_status"] == "LOGIC_DELETED"


class TestIngestAndHotels:
    async def test_an_ingest_answers_the_batch_its_get_reads(self, rsv, world):
        answer = await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="AN4"), item("new"), item("note")],
                                                         request_id="answers-1"))
        read = (await rsv.get(world.ingest1, f"/ai-batches/{answer['batch_id']}")).json()
        assert read["items"] == answer["items"]
        assert {key: read[key] for key in answer if key in read} == {key: answer[key] for key in answer if key in read}

    async def test_a_registered_hotel_and_an_assignment_answer_the_lists(self, rsv, world):
        registered = await rsv.post(world.admin, "/hotels", {"hotel_id": "H-ANSWERS", "display_name": "Answers"})
        assert registered.status_code == 201, registered.text
        listed = [row for row in (await rsv.get(world.admin, "/hotels", limit=100)).json()["items"]
                  if row["hotel_id"] == "H-ANSWERS"]
        assert listed == [registered.json()]
        assigned = await rsv.client.put(f"/api/v1/reservations/hotels/H-ANSWERS/staff/{world.stranger.id}",
                                        headers=rsv.headers(world.admin))
        assert (assigned.status_code, assigned.content) == (204, b"")
        staff = (await rsv.get(world.admin, "/hotels/H-ANSWERS/staff")).json()["items"]
        assert [row["user_id"] for row in staff] == [str(world.stranger.id)]
