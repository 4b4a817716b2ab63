"""Who sees and does what (RSV-INV-21): agents see their assigned hotels only, API clients their hotel_ids,
administrators everything; every route answers 404 for another hotel's rows and 403 without the permission.
Also the order list and the hotel and staff routes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.iam import service as iam_service
from tenet.kernel.audit import Actor
from tests.reservations.conftest import body, item
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _h1(rsv, world) -> dict:
    """An H1 task in each interesting shape: a READY task with operations, and its order."""
    (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="AC1")])))["items"]
    await rsv.confirm_ok(world.agent, result["task_id"])
    executed = (await rsv.execute(world.agent, result["task_id"])).json()
    return {"task": result["task_id"], "order": result["order_id"], "batch": None,
            "operation": executed["operations"][0]["id"]}


def _routes(ids: dict) -> list[tuple[str, str, dict | None]]:
    t, o, op = ids["task"], ids["order"], ids["operation"]
    return [
        ("GET", f"/tasks/{t}", None), ("GET", f"/tasks/{t}/operations", None), ("GET", f"/orders/{o}", None),
        ("PUT", f"/tasks/{t}/card/draft", {"payload": {}, "expected_version": 1}),
        ("POST", f"/tasks/{t}/confirm", {"payload": {}, "expected_version": 1}),
        ("POST", f"/tasks/{t}/move", {"order_id": o, "expected_version": 1}),
        ("POST", f"/tasks/{t}/convert", {"task_card_type": "NEW_BOOKING", "expected_version": 1}),
        ("POST", f"/tasks/{t}/abandon", {"reason": "x", "expected_version": 1}),
        ("POST", f"/tasks/{t}/execute", None), ("POST", f"/operations/{op}/retry", {"expected_attempt_count": 1}),
        ("POST", f"/orders/{o}/end", {}), ("POST", f"/orders/{o}/logic-delete", {"reason": "x"}),
        ("GET", "/audit-logs?order_id=" + o, None), ("GET", "/orders?hotel_id=H1", None),
    ]


async def _call(rsv, who, method: str, path: str, payload) -> int:
    url = f"/api/v1/reservations{path}"
    response = await rsv.client.request(method, url, json=payload, headers=rsv.headers(who))
    return response.status_code, response.json().get("code") if response.content else None


class TestHotelScope:
    @pytest.mark.invariant("RSV-INV-21")
    async def test_another_hotels_rows_are_not_found_on_every_route(self, rsv, world, db):
        ids = await _h1(rsv, world)
        for who in (world.agent2, world.stranger):
            for method, path, payload in _routes(ids):
                status, found = await _call(rsv, who, method, path, payload)
                assert status == 404, (who, method, path, status, found)
        await rules_hold(db, "RSV-")

    async def test_without_the_role_every_route_is_forbidden(self, rsv, world):
        ids = await _h1(rsv, world)
        for method, path, payload in _routes(ids):
            assert await _call(rsv, world.employee, method, path, payload) == (403, "PERMISSION_DENIED"), path

    async def test_api_clients_read_their_hotels_and_write_nothing(self, rsv, world):
        ids = await _h1(rsv, world)
        for method, path, payload in _routes(ids):
            status, _ = await _call(rsv, world.reader1, method, path, payload)
            expected = 200 if method == "GET" and "audit" not in path else 403
            assert status == expected, (method, path, status)
        task = await rsv.task(world.reader1, ids["task"])
        assert not any(task[flag] for flag in ("can_edit", "can_confirm", "can_execute", "can_move", "can_abandon"))
        # The ingest client may post for its hotels and read its batches, not the queue.
        assert (await _call(rsv, world.ingest1, "GET", f"/tasks/{ids['task']}", None))[0] == 403

    async def test_administrators_see_every_hotel(self, rsv, world):
        (h2,) = (await rsv.ingest_ok(world.ingest2, body("H2", [item(cn="ADM")])))["items"]
        assert (await rsv.get(world.admin, f"/tasks/{h2['task_id']}")).status_code == 200
        hotels = (await rsv.get(world.admin, "/hotels")).json()["items"]
        assert [h["hotel_id"] for h in hotels] == ["H1", "H2"]
        mine = (await rsv.get(world.agent, "/hotels")).json()["items"]
        assert [(h["hotel_id"], h["assigned"]) for h in mine] == [("H1", True)]
        assert (await rsv.get(world.stranger, "/hotels")).json()["items"] == []

    async def test_staff_are_assigned_and_removed_by_hotel_managers(self, rsv, world, db):
        (h2,) = (await rsv.ingest_ok(world.ingest2, body("H2", [item(cn="ST1")])))["items"]
        assert (await rsv.get(world.stranger, f"/tasks/{h2['task_id']}")).status_code == 404
        refused = await rsv.client.put(f"/api/v1/reservations/hotels/H2/staff/{world.stranger.id}",
                                       headers=rsv.headers(world.agent))
        assert refused.status_code == 403
        granted = await rsv.client.put(f"/api/v1/reservations/hotels/H2/staff/{world.stranger.id}",
                                       headers=rsv.headers(world.admin))
        assert granted.status_code == 204
        assert (await rsv.get(world.stranger, f"/tasks/{h2['task_id']}")).status_code == 200
        staff = (await rsv.get(world.admin, "/hotels/H2/staff")).json()["items"]
        assert {s["user_id"] for s in staff} == {str(world.agent2.id), str(world.stranger.id)}
        revoked = await rsv.client.delete(f"/api/v1/reservations/hotels/H2/staff/{world.stranger.id}",
                                          headers=rsv.headers(world.admin))
        assert revoked.status_code == 204
        again = await rsv.client.delete(f"/api/v1/reservations/hotels/H2/staff/{world.stranger.id}",
                                        headers=rsv.headers(world.admin))
        assert (again.status_code, code(again)) == (404, "HOTEL_STAFF_NOT_FOUND")
        unknown = await rsv.client.put(f"/api/v1/reservations/hotels/NOPE/staff/{world.stranger.id}",
                                       headers=rsv.headers(world.admin))
        assert (unknown.status_code, code(unknown)) == (404, "HOTEL_NOT_FOUND")

    @pytest.mark.invariant("RSV-INV-21")
    async def test_a_deleted_account_loses_its_assignments(self, rsv, world, db, clock):
        async with db.unit_of_work() as session:
            await iam_service.delete_user(session, user_id=world.agent.id, now=clock.now(),
                                          actor=Actor.user(world.admin.id))
        async with db.read_only() as session:
            left = (await session.execute(text("SELECT count(*) FROM reservation.hotel_staff WHERE user_id = :u"),
                                          {"u": world.agent.id})).scalar_one()
            audit = (await session.execute(text(
                "SELECT reason FROM reservation.workflow_reservation_audit_log WHERE action = "
                "'reservation.hotel.staff_revoked'"))).scalars().all()
        assert (left, audit) == (0, ["ACCOUNT_DELETED"])
        await rules_hold(db, "RSV-")

    @pytest.mark.parametrize("path", [
        "/orders?hotel_id=H%00", "/orders?hotel_id=H1&business_key=a%00b", "/audit-logs?hotel_id=H%00",
        "/audit-logs?hotel_id=H1&action=a%00", "/hotels/H%00/staff", "/task-card-definitions/X%00",
        "/orders/99999999999999999999", "/tasks/0", "/orders?hotel_id=H1&cursor=%00"])
    async def test_odd_text_and_forged_ids_are_refused_never_a_500(self, rsv, world, path):
        response = await rsv.client.get(f"/api/v1/reservations{path}", headers=rsv.headers(world.admin))
        assert response.status_code in (400, 404, 422), (path, response.status_code, response.text)

    async def test_hotels_are_registered_once(self, rsv, world):
        created = await rsv.post(world.admin, "/hotels", {"hotel_id": "H9", "display_name": "Harbour"})
        assert created.status_code == 201
        again = await rsv.post(world.admin, "/hotels", {"hotel_id": "H9"})
        assert (again.status_code, code(again)) == (409, "HOTEL_ALREADY_EXISTS")
        assert (await rsv.post(world.agent, "/hotels", {"hotel_id": "H8"})).status_code == 403


class TestOrderList:
    async def test_lists_by_status_newest_activity_first_with_counts_and_pages(self, rsv, world, clock):
        results = []
        for n in range(5):
            clock.advance(timedelta(seconds=60))
            (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn=f"L{n}")])))["items"]
            results.append(result)
        (temporary,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item("new")])))["items"]
        page = (await rsv.get(world.agent, "/orders", hotel_id="H1", limit=2)).json()
        assert len(page["items"]) == 2 and page["next_cursor"]
        walked = page["items"]
        while page["next_cursor"]:
            page = (await rsv.get(world.agent, "/orders", hotel_id="H1", limit=2, cursor=page["next_cursor"])).json()
            walked += page["items"]
        assert len(walked) == 6 and len({o["id"] for o in walked}) == 6
        assert [(o["updated_at"], int(o["id"])) for o in walked] == sorted(
            ((o["updated_at"], int(o["id"])) for o in walked), reverse=True)
        assert walked[0]["task_counts"]["pending_confirm"] == 1 and walked[0]["next_task_id"]
        only_temporary = (await rsv.get(world.agent, "/orders", hotel_id="H1", status="TEMPORARY")).json()["items"]
        assert [o["id"] for o in only_temporary] == [temporary["order_id"]]
        by_key = (await rsv.get(world.agent, "/orders", hotel_id="H1", business_key=" l3 ")).json()["items"]
        assert [o["id"] for o in by_key] == [results[3]["order_id"]]
        unknown = await rsv.get(world.agent, "/orders", hotel_id="H2")
        assert (unknown.status_code, code(unknown)) == (404, "HOTEL_NOT_FOUND")
        bad = await rsv.get(world.agent, "/orders", hotel_id="H1", cursor="nonsense")
        assert (bad.status_code, code(bad)) == (400, "INVALID_CURSOR")

    @pytest.mark.invariant("RSV-INV-09")
    async def test_an_order_closes_only_without_open_tasks_and_closed_is_final(self, rsv, world, db):
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CL1")])))["items"]
        refused = await rsv.post(world.agent, f"/orders/{result['order_id']}/end", {})
        assert (refused.status_code, code(refused), refused.json()["open_task_ids"]) == (
            409, "ORDER_HAS_UNFINISHED_TASKS", [result["task_id"]])
        await rsv.post(world.agent, f"/tasks/{result['task_id']}/abandon", {"reason": "test"}, version=1)
        bad_reason = await rsv.post(world.agent, f"/orders/{result['order_id']}/logic-delete",
                                    {"reason": "see https://files.example/x"})
        assert bad_reason.status_code == 422
        deleted = await rsv.post(world.agent, f"/orders/{result['order_id']}/logic-delete", {"reason": "duplicate"})
        assert deleted.status_code == 200 and deleted.json()["order_status"] == "LOGIC_DELETED"
        ended = await rsv.post(world.agent, f"/orders/{result['order_id']}/end", {})
        assert (ended.status_code, code(ended)) == (409, "ORDER_NOT_OPEN")
        # A new batch about the key makes a new ACTIVE order; the deleted one never takes a task again.
        (later,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CL1")])))["items"]
        assert later["order_id"] != result["order_id"]
        await rules_hold(db, "RSV-")

    async def test_an_active_order_is_created_once_per_key(self, rsv, world):
        created = await rsv.post(world.agent, "/orders", {"hotel_id": "H1", "order_key_type": "GROUP_CODE",
                                                          "order_business_key": "grp 1"})
        assert created.status_code == 201 and created.json()["order_business_key"] == "GRP1"
        again = await rsv.post(world.agent, "/orders", {"hotel_id": "H1", "order_key_type": "GROUP_CODE",
                                                        "order_business_key": "GRP1"})
        assert (again.status_code, code(again), again.json()["order_id"]) == (
            409, "ORDER_KEY_ALREADY_ACTIVE", created.json()["id"])
        other = await rsv.post(world.agent, "/orders", {"hotel_id": "H2", "order_key_type": "GROUP_CODE",
                                                        "order_business_key": "GRP1"})
        assert (other.status_code, code(other)) == (404, "HOTEL_NOT_FOUND")
