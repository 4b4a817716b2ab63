"""Task commands: drafts and confirmation against the card contract, versions (If-Match / expected_version),
the queue (`blocked` and the can_* flags), conversion of manual reviews, abandoning, and moves."""

from __future__ import annotations

import pytest

from tests.reservations.conftest import body, confirmable, item
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _one(rsv, world, *items: str, message: int | None = None) -> list[dict]:
    return (await rsv.ingest_ok(world.ingest1, body("H1", list(items), message=message)))["items"]


class TestDrafts:
    @pytest.mark.invariant("RSV-INV-17")
    async def test_a_draft_with_the_current_version_saves_and_bumps_it(self, rsv, world, db):
        (result,) = await _one(rsv, world, item(cn="D1"))
        task = await rsv.task(world.agent, result["task_id"])
        saved = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {"room_type": "TWIN"}},
                              version=task["version"])
        assert saved.status_code == 200, saved.text
        assert saved.json()["card"]["draft_payload"] == {"room_type": "TWIN"}
        assert saved.headers["etag"] == f'"{task["version"] + 1}"'
        stale = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {"room_type": "KING"}},
                              version=task["version"])
        assert (stale.status_code, code(stale), stale.json()["current_version"]) == (
            412, "PRECONDITION_FAILED", task["version"] + 1)
        by_body = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft",
                                {"payload": {"room_type": "KING"}, "expected_version": task["version"]})
        assert (by_body.status_code, code(by_body)) == (409, "VERSION_CONFLICT")
        missing = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {}})
        assert (missing.status_code, code(missing)) == (428, "PRECONDITION_REQUIRED")
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-16")
    async def test_a_draft_names_every_bad_field_and_never_echoes_a_value(self, rsv, world):
        (result,) = await _one(rsv, world, item("new"))
        task = await rsv.task(world.agent, result["task_id"])
        bad = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {
            "adults": "two", "arrival_date": "2026-13-01", "room_type": "x" * 40, "secret_field": "ada@example.com",
            "number_of_rooms": 0}}, version=task["version"])
        assert (bad.status_code, code(bad)) == (422, "TASK_CARD_PAYLOAD_INVALID")
        assert sorted((e["field"], e["code"]) for e in bad.json()["errors"]) == [
            ("adults", "WRONG_TYPE"), ("arrival_date", "BAD_FORMAT"), ("number_of_rooms", "OUT_OF_RANGE"),
            ("room_type", "TOO_LONG"), ("secret_field", "UNKNOWN_FIELD")]
        assert "ada@example.com" not in bad.text
        # A partial draft is fine; confirmation is where the required fields are asked for.
        partial = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {"adults": 2}},
                                version=task["version"])
        assert partial.status_code == 200

    async def test_a_lone_surrogate_in_a_field_name_is_named_not_a_500(self, rsv, world):
        """The unknown field's name is echoed in `errors[].field`; a lone surrogate in it (a legal JSON escape,
        not UTF-8) is answered as U+FFFD, and a draft that holds one or two in a value is refused, not stored."""
        (result,) = await _one(rsv, world, item("new"))
        task = await rsv.task(world.agent, result["task_id"])
        bad = await rsv.client.put(
            f"/api/v1/reservations/tasks/{task['id']}/card/draft",
            content=b'{"payload": {"\\ud800": 1, "guest_name": "Ada \\udfff", "special_requests": "\\ud83d"}}',
            headers=rsv.headers(world.agent, **{"If-Match": f'"{task["version"]}"',
                                                "Content-Type": "application/json"}))
        assert (bad.status_code, code(bad)) == (422, "TASK_CARD_PAYLOAD_INVALID")
        bad.content.decode("utf-8")  # strict: well-formed UTF-8
        assert sorted((e["field"], e["code"]) for e in bad.json()["errors"]) == [
            ("guest_name", "BAD_FORMAT"), ("special_requests", "BAD_FORMAT"), ("\ufffd", "UNKNOWN_FIELD")]
        assert (await rsv.task(world.agent, task["id"]))["version"] == task["version"]

    async def test_a_notification_has_no_draft(self, rsv, world):
        (result,) = await _one(rsv, world, item("note"))
        task = await rsv.task(world.agent, result["task_id"])
        refused = await rsv.put(world.agent, f"/tasks/{task['id']}/card/draft", {"payload": {}},
                                version=task["version"])
        assert (refused.status_code, code(refused)) == (409, "TASK_NOT_EDITABLE")
        assert task["can_edit"] is False and task["can_confirm"] is False


class TestConfirm:
    @pytest.mark.invariant("RSV-INV-16")
    async def test_confirm_writes_the_payload_who_and_when_and_makes_the_task_ready(self, rsv, world, db, clock):
        (result,) = await _one(rsv, world, item("new", fields={"guest_name": "Ada", "adults": 2,
                                                               "arrival_date": "2026-02-01"}))
        task = await rsv.task(world.agent, result["task_id"])
        assert task["card"]["prefill"] == {"guest_name": "Ada", "adults": 2, "arrival_date": "2026-02-01"}
        confirmed = await rsv.confirm_ok(world.agent, task["id"], confirmable(task, confirmation_number=" cnf 9 "))
        card = confirmed["card"]
        assert confirmed["task_status"] == "READY" and confirmed["can_execute"] is True
        assert card["confirmed_payload"]["confirmation_number"] == "CNF9"   # keys are normalised
        assert card["confirmed_payload"]["number_of_rooms"] == 1             # defaults filled in
        assert card["confirmed_payload"]["opera_simulation_outcome"] == "SUCCEED"
        assert (card["confirmed_by"], card["confirmed_at"]) == (str(world.agent.id), "2026-01-05T09:00:00Z")
        again = await rsv.confirm(world.agent, task["id"])
        assert (again.status_code, code(again)) == (409, "TASK_NOT_EDITABLE")
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-16")
    async def test_confirm_checks_required_fields_and_rules(self, rsv, world):
        (result,) = await _one(rsv, world, item("new"))
        task = await rsv.task(world.agent, result["task_id"])
        refused = await rsv.post(world.agent, f"/tasks/{task['id']}/confirm", {"payload": {
            "guest_name": "Ada", "arrival_date": "2026-02-05", "departure_date": "2026-02-01", "room_type": "KING",
            "adults": 2}}, version=task["version"])
        assert (refused.status_code, code(refused)) == (422, "TASK_CARD_PAYLOAD_INVALID")
        assert [(e["field"], e["code"]) for e in refused.json()["errors"]] == [("departure_date", "DATE_ORDER")]
        empty = await rsv.post(world.agent, f"/tasks/{task['id']}/confirm", {"payload": {}}, version=task["version"])
        assert {e["field"] for e in empty.json()["errors"]} == {"guest_name", "arrival_date", "departure_date",
                                                                  "room_type", "adults"}
        assert (await rsv.task(world.agent, task["id"]))["task_status"] == "PENDING_CONFIRM"

    @pytest.mark.invariant("RSV-INV-10")
    async def test_the_queue_blocks_later_tasks_until_earlier_ones_finish(self, rsv, world, db):
        first, _note, second = await _one(rsv, world, item(cn="Q1"), item("note", cn="Q1"), item("cancel", cn="Q1"))
        order = await rsv.order(world.agent, first["order_id"])
        flags = [(t["blocked"], t["blocked_reason"], t["can_confirm"]) for t in order["tasks"]]
        assert flags == [(False, None, True), (False, None, False), (True, "EARLIER_TASK", False)]
        assert order["tasks"][2]["blocking_task_id"] == first["task_id"]
        assert order["next_task_id"] == first["task_id"]
        blocked = await rsv.confirm(world.agent, second["task_id"])
        assert (blocked.status_code, code(blocked), blocked.json()["blocked_reason"]) == (
            409, "TASK_BLOCKED", "EARLIER_TASK")
        draft = await rsv.put(world.agent, f"/tasks/{second['task_id']}/card/draft", {"payload": {}}, version=1)
        assert code(draft) == "TASK_BLOCKED"  # a blocked task can only be viewed
        # FAILED counts as finished for the queue: abandoning the first releases the second.
        abandon = await rsv.post(world.agent, f"/tasks/{first['task_id']}/abandon", {"reason": "duplicate mail"},
                                 version=1)
        assert abandon.status_code == 200 and abandon.json()["task_status"] == "FAILED"
        assert (await rsv.task(world.agent, second["task_id"]))["blocked"] is False
        await rsv.confirm_ok(world.agent, second["task_id"])
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-11")
    async def test_a_child_waits_for_its_parent_to_complete_not_just_to_finish(self, rsv, world, db):
        # The parent in an earlier batch on another order: only the parent rule holds the child back.
        (parent,) = await _one(rsv, world, item(cn="P1", event=1), message=900)
        (child,) = await _one(rsv, world, item(cn="P2", parent=1, wait=True), message=900)
        assert child["order_id"] == parent["order_id"]
        await rsv.post(world.agent, f"/tasks/{parent['task_id']}/abandon", {"reason": "wrong booking"}, version=1)
        task = await rsv.task(world.agent, child["task_id"])
        assert (task["blocked"], task["blocked_reason"], task["blocking_task_id"]) == (True, "PARENT",
                                                                                         parent["task_id"])
        refused = await rsv.confirm(world.agent, child["task_id"])
        assert code(refused) == "TASK_BLOCKED" and refused.json()["blocked_reason"] == "PARENT"
        await rules_hold(db, "RSV-")


class TestConvertAndAbandon:
    async def test_a_manual_review_becomes_a_typed_task(self, rsv, world, db):
        (result,) = await _one(rsv, world, item("review"))
        task = await rsv.task(world.agent, result["task_id"])
        assert (task["manual_review"], task["manual_reason_code"], task["can_convert"]) == (True, "AMBIGUOUS", True)
        converted = await rsv.post(world.agent, f"/tasks/{task['id']}/convert", {"task_card_type": "CANCEL_BOOKING"},
                                   version=task["version"])
        assert converted.status_code == 200, converted.text
        assert (converted.json()["system_task_type"], converted.json()["task_card_type"]) == (
            "CANCEL_BOOKING", "CANCEL_BOOKING")
        again = await rsv.post(world.agent, f"/tasks/{task['id']}/convert", {"task_card_type": "NEW_BOOKING"},
                               version=converted.json()["version"])
        assert code(again) == "TASK_NOT_CONVERTIBLE"
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-12")
    async def test_abandon_needs_a_clean_reason_and_is_final(self, rsv, world, db):
        (result,) = await _one(rsv, world, item(cn="AB1"))
        with_email = await rsv.post(world.agent, f"/tasks/{result['task_id']}/abandon",
                                    {"reason": "ask ada@example.com"}, version=1)
        assert (with_email.status_code, code(with_email)) == (422, "VALIDATION_FAILED")
        done = await rsv.post(world.agent, f"/tasks/{result['task_id']}/abandon", {"reason": "spam"}, version=1)
        assert done.json()["task_status"] == "FAILED" and done.json()["last_failure_reason"] == "spam"
        again = await rsv.post(world.agent, f"/tasks/{result['task_id']}/abandon", {"reason": "spam"},
                               version=done.json()["version"])
        assert (again.status_code, code(again)) == (409, "TASK_ALREADY_FINISHED")
        assert code(await rsv.confirm(world.agent, result["task_id"])) == "TASK_NOT_EDITABLE"
        await rules_hold(db, "RSV-")


class TestMove:
    @pytest.mark.invariant("RSV-INV-18")
    async def test_a_task_moves_to_the_end_of_another_queue_and_an_emptied_temporary_order_closes(self, rsv, world,
                                                                                                    db):
        (target_task,) = await _one(rsv, world, item(cn="MV1"))
        (misfiled,) = await _one(rsv, world, item("review"))
        task = await rsv.task(world.agent, misfiled["task_id"])
        moved = await rsv.post(world.agent, f"/tasks/{task['id']}/move", {"order_id": target_task["order_id"]},
                               version=task["version"])
        assert moved.status_code == 200, moved.text
        assert (moved.json()["order_id"], moved.json()["execution_order"], moved.json()["blocked"]) == (
            target_task["order_id"], 2, True)
        source = await rsv.order(world.agent, misfiled["order_id"])
        assert (source["order_status"], source["logic_deleted_reason"]) == ("LOGIC_DELETED", "EMPTIED_BY_MOVE")
        await rules_hold(db, "RSV-")

    async def test_only_a_waiting_task_moves_and_only_to_an_open_order_of_its_hotel(self, rsv, world, db):
        (ready,) = await _one(rsv, world, item(cn="MV2"))
        (other,) = await _one(rsv, world, item(cn="MV3"))
        confirmed = await rsv.confirm_ok(world.agent, ready["task_id"])
        refused = await rsv.post(world.agent, f"/tasks/{ready['task_id']}/move", {"order_id": other["order_id"]},
                                 version=confirmed["version"])
        assert (refused.status_code, code(refused)) == (409, "TASK_NOT_MOVABLE")
        (foreign,) = (await rsv.ingest_ok(world.ingest2, body("H2", [item(cn="MV4")])))["items"]
        cross = await rsv.post(world.admin, f"/tasks/{other['task_id']}/move", {"order_id": foreign["order_id"]},
                               version=1)
        assert (cross.status_code, code(cross)) == (409, "TASK_MOVE_CROSS_HOTEL")
        invisible = await rsv.post(world.agent, f"/tasks/{other['task_id']}/move", {"order_id": foreign["order_id"]},
                                   version=1)
        assert (invisible.status_code, code(invisible)) == (404, "ORDER_NOT_FOUND")
        created = await rsv.post(world.agent, "/orders", {"hotel_id": "H1", "order_key_type": "CONFIRMATION_NUMBER",
                                                          "order_business_key": "MV5"})
        assert created.status_code == 201, created.text
        ended = await rsv.post(world.agent, f"/orders/{created.json()['id']}/end", {})
        assert ended.json()["order_status"] == "ENDED"
        closed = await rsv.post(world.agent, f"/tasks/{other['task_id']}/move", {"order_id": created.json()["id"]},
                                version=1)
        assert (closed.status_code, code(closed)) == (409, "ORDER_NOT_ACCEPTING_TASKS")
        await rules_hold(db, "RSV-")
