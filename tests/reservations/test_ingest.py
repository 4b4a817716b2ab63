"""Ingest (POST /ai-batches): the batch key, replay, raw JSON kept byte for byte, the AI contract mapping,
adapter contract errors, and which order each item joins."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import text

from tests.reservations.conftest import BASE, body, item
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


async def _rows(db, sql: str, **params) -> list[dict]:
    async with db.read_only() as session:
        return [dict(r._mapping) for r in await session.execute(text(sql), params)]


class TestBatchKey:
    @pytest.mark.invariant("RSV-INV-02")
    async def test_the_same_batch_again_replays_the_first_answer(self, rsv, world, db):
        raw = body("H1", [item(cn="CNF1"), item("new")], request_id="r-1")
        first = await rsv.ingest(world.ingest1, raw)
        again = await rsv.ingest(world.ingest1, raw)
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["replayed"] is False and again.json()["replayed"] is True
        assert {**first.json(), "replayed": True} == again.json()
        assert again.headers["location"] == f"{BASE}/ai-batches/{first.json()['batch_id']}"
        assert len(await _rows(db, "SELECT id FROM reservation.workflow_reservation_ai_batch")) == 1
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-02")
    async def test_a_request_id_reused_with_another_body_is_a_stable_409(self, rsv, world):
        first = await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CNF1")], request_id="r-2"))
        for _ in range(2):
            reused = await rsv.ingest(world.ingest1, body("H1", [item(cn="CNF2")], request_id="r-2"))
            assert (reused.status_code, code(reused)) == (409, "AI_BATCH_REQUEST_ID_REUSED")
            assert reused.json()["batch_id"] == first["batch_id"]

    @pytest.mark.invariant("RSV-INV-02")
    async def test_without_a_request_id_the_bytes_name_the_batch(self, rsv, world):
        raw = body("H1", [item(cn="CNF1")], message=77)
        assert (await rsv.ingest(world.ingest1, raw)).status_code == 201
        assert (await rsv.ingest(world.ingest1, raw)).json()["replayed"] is True
        spaced = raw.replace(b'"ai_task_results":', b'"ai_task_results" : ')
        assert (await rsv.ingest(world.ingest1, spaced)).status_code == 201

    async def test_an_idempotency_key_header_still_works(self, rsv, world):
        raw = body("H1", [item(cn="CNF1")])
        first = await rsv.ingest(world.ingest1, raw, **{"Idempotency-Key": "k-1"})
        second = await rsv.ingest(world.ingest1, raw, **{"Idempotency-Key": "k-1"})
        assert (first.status_code, second.status_code) == (201, 201)
        assert second.headers.get("idempotent-replayed") == "true"
        assert second.json() == first.json()


class TestRawJson:
    @pytest.mark.invariant("RSV-INV-03")
    async def test_items_are_kept_exactly_as_sent(self, rsv, world, db):
        odd = ('{ "z_unknown": {"nested": [1, 2.50, -0, 1e2, 12345678901234567890123]},\r\n\t"result_type":'
               '"normal_task", "ai_task_type" :"UPDATE_BOOKING", "case_keys": {"confirmation_number": "CNF\\u0031"},'
               ' "extracted_fields": {"rate": 1.50, "name": "Jos\\u00e9 \u5f20", "b": 1, "a": 2}}')
        raw = body("H1", [odd, item(cn="CNF9")])
        answer = await rsv.ingest_ok(world.ingest1, raw)
        (batch,) = await _rows(db, "SELECT request_body, request_payload_sha256 FROM "
                                   "reservation.workflow_reservation_ai_batch")
        assert bytes(batch["request_body"]) == raw
        assert batch["request_payload_sha256"] == hashlib.sha256(raw).hexdigest()
        (stored,) = await _rows(db, "SELECT ai_payload_json, item_payload_sha256, extracted_fields_json, "
                                    "confirmation_number FROM reservation.workflow_reservation_ai_transition "
                                    "WHERE array_index = 1")
        assert stored["ai_payload_json"] == odd
        assert stored["item_payload_sha256"] == hashlib.sha256(odd.encode()).hexdigest()
        assert stored["extracted_fields_json"] == '{"rate": 1.50, "name": "Jos\\u00e9 \u5f20", "b": 1, "a": 2}'
        assert stored["confirmation_number"] == "CNF1"  # the key as the system compares it
        task = await rsv.task(world.agent, answer["items"][0]["task_id"])
        assert task["card"]["ai_payload_json"] == odd
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-04")
    async def test_one_transition_per_item_in_three_lists(self, rsv, world, db):
        raw = body("H1", [item(cn="A1"), item(cn="A2")], events=[item("note")], intents=['{"text":"call me"}'])
        answer = await rsv.ingest_ok(world.ingest1, raw)
        assert [(i["source_list"], i["array_index"]) for i in answer["items"]] == [
            ("ai_task_results", 1), ("ai_task_results", 2), ("message_events", 1), ("unhandled_current_intents", 1)]
        assert answer["item_count"] == 4
        categories = [(i["system_process_category"], i["system_task_type"], i["task_status"]) for i in answer["items"]]
        assert categories[2:] == [("BUSINESS_TASK", "INFORMATIONAL_MESSAGE", "COMPLETED"),
                                  ("UNHANDLED_CURRENT_INTENT", "MANUAL_REVIEW", "PENDING_CONFIRM")]
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-04")
    async def test_an_empty_batch_is_a_batch(self, rsv, world, db):
        answer = await rsv.ingest_ok(world.ingest1, body("H1", []))
        assert (answer["item_count"], answer["items"]) == (0, [])
        await rules_hold(db, "RSV-")

    @pytest.mark.parametrize(("raw", "status", "wanted"), [
        (b"not json", 400, "MALFORMED_REQUEST_BODY"),
        (b'\xef\xbb\xbf{"hotel_id": "H1"}', 400, "MALFORMED_REQUEST_BODY"),
        (b'{"hotel_id": "H1", "source_message_id": 1, "ai_task_results": [NaN]}', 400, "MALFORMED_REQUEST_BODY"),
        (b'{"hotel_id": "H1", "source_message_id": 1, "ai_task_results": []} trailing', 400, "MALFORMED_REQUEST_BODY"),
        (b'[1, 2]', 400, "MALFORMED_REQUEST_BODY"),
        (b'{"hotel_id": "H1", "hotel_id": "H2", "source_message_id": 1, "ai_task_results": []}', 422,
         "AI_BATCH_INVALID"),
        (b'{"hotel_id": "H1", "source_message_id": 0, "ai_task_results": []}', 422, "AI_BATCH_INVALID"),
        (b'{"hotel_id": "H1", "source_message_id": 1}', 422, "AI_BATCH_INVALID"),
        (b'{"hotel_id": "H1", "source_message_id": 1, "ai_task_results": {}}', 422, "AI_BATCH_INVALID"),
        (b'{"hotel_id": "H1\\u001f", "source_message_id": 1, "ai_task_results": []}', 422, "AI_BATCH_INVALID"),
        (b'{"hotel_id": "H2", "source_message_id": 1, "ai_task_results": []}', 403, "RESERVATION_HOTEL_FORBIDDEN"),
        (b'{"hotel_id": "H1", "source_message_id": "12", "request_id": "", "ai_task_results": []}', 422,
         "AI_BATCH_INVALID"),
        # Numbers past the parser's limits (RFC 8259 section 9): an integer of more than 4,300 digits (Python's
        # int() refuses it with a ValueError), an exponent no Decimal holds (InvalidOperation). Were 500s.
        (b'{"hotel_id": "H1", "source_message_id": 1' + b"0" * 5000 + b', "ai_task_results": []}', 400,
         "MALFORMED_REQUEST_BODY"),
        (body("H1", [item("new", fields={"adults": 1}).replace('"adults":1', '"adults":' + "9" * 4301)]), 400,
         "MALFORMED_REQUEST_BODY"),
        (body("H1", [item("new", extra=',"source_event_index":-' + "1" * 4301)]), 400, "MALFORMED_REQUEST_BODY"),
        (body("H1", [item("new", fields={"voucher_amount": "X"}).replace('"X"', "1e9999999999999999999")]), 400,
         "MALFORMED_REQUEST_BODY"),
        (body("H1", [], extra=',"extraction_warnings":[-1.5E-99999999999999999999]'), 400, "MALFORMED_REQUEST_BODY"),
    ])
    async def test_bad_bodies_are_refused_and_nothing_is_stored(self, rsv, world, db, raw, status, wanted):
        response = await rsv.ingest(world.ingest1, raw)
        assert (response.status_code, code(response)) == (status, wanted), response.text
        assert await _rows(db, "SELECT id FROM reservation.workflow_reservation_ai_batch") == []

    async def test_numbers_up_to_the_parsers_limits_are_kept_as_sent(self, rsv, world, db):
        """4,300 digits and an exponent of 10^18 are within the limits: the item is stored exactly as sent."""
        raw_item = item("new", fields={"adults": 1, "voucher_amount": "X"}).replace(
            '"adults":1', '"adults":' + "9" * 4300).replace('"X"', "1e999999999999999999")
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [raw_item])))["items"]
        (stored,) = await _rows(db, "SELECT ai_payload_json FROM reservation.workflow_reservation_ai_transition "
                                    "WHERE id = :id", id=int(result["transition_id"]))
        assert stored["ai_payload_json"] == raw_item

    async def test_a_body_cut_short_is_400_and_logs_no_error(self, app, rsv, world, db, caplog):
        """The client goes away before its declared length arrived: the route answers 400 (as uploads do), logs
        no unhandled error, stores nothing."""
        raw = body("H1", [item(cn="CUT")])
        headers = rsv.headers(world.ingest1, **{"Content-Type": "application/json", "Content-Length": str(len(raw))})
        chunks = [{"type": "http.request", "body": raw[:20], "more_body": True}, {"type": "http.disconnect"}]
        sent: list[dict] = []

        async def receive():
            return chunks.pop(0) if chunks else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": f"{BASE}/ai-batches", "raw_path": b"", "query_string": b"",
                 "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 1),
                 "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
        with caplog.at_level("WARNING"):
            await app(scope, receive, send)
        start, answer = sent[0], json.loads(sent[1]["body"])
        assert (start["status"], answer["code"]) == (400, "MALFORMED_REQUEST_BODY")
        assert [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []
        assert await _rows(db, "SELECT id FROM reservation.workflow_reservation_ai_batch") == []

    async def test_too_many_items(self, rsv, world, app):
        raw = body("H1", [item(cn=f"K{i}") for i in range(501)])
        response = await rsv.ingest(world.ingest1, raw)
        assert (response.status_code, code(response)) == (422, "AI_BATCH_INVALID")
        assert response.json()["errors"][0]["type"] == "too_many_items"

    async def test_only_json_and_only_ingest_clients(self, rsv, world):
        raw = body("H1", [])
        wrong_type = await rsv.ingest(world.ingest1, raw, **{"Content-Type": "text/plain"})
        assert wrong_type.status_code == 415
        for who in (world.agent, world.admin, world.reader1):
            response = await rsv.client.post(f"{BASE}/ai-batches", content=raw, headers=rsv.headers(
                who, **{"Content-Type": "application/json"}))
            assert (response.status_code, code(response)) == (403, "PERMISSION_DENIED")


_MARKER = "ada.marker@example.com"


class TestAdapterContractErrors:
    @pytest.mark.invariant("RSV-INV-06")
    @pytest.mark.parametrize(("raw_item", "wanted"), [
        (f'"{_MARKER}"', "ITEM_NOT_OBJECT"),
        ('{"result_type":"normal_task","result_type":"manual_review"}', "DUPLICATE_MEMBER"),
        ('{"ai_task_type":"UPDATE_BOOKING"}', "MISSING_FIELD"),
        (f'{{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","case_keys":"{_MARKER}"}}', "WRONG_TYPE"),
        ('{"result_type":"normal_task","ai_task_type":"' + "X" * 65 + '"}', "VALUE_TOO_LONG"),
        ('{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","source_event_index":-1}', "VALUE_OUT_OF_RANGE"),
        (f'{{"result_type":"{_MARKER}"}}', "UNKNOWN_RESULT_TYPE"),
        ('{"result_type":"adapter_contract_error"}', "RESERVED_RESULT_TYPE"),
        (f'{{"result_type":"normal_task","ai_task_type":"{_MARKER}"}}', "UNKNOWN_TASK_TYPE"),
        ('{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","current_or_history":"later"}',
         "INVALID_CURRENT_OR_HISTORY"),
        ('{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","case_keys":{"confirmation_number":"a\\u0000b"}}',
         "INVALID_BUSINESS_KEY"),
        ('{"result_type":"normal_task","ai_task_type":"UPDATE_BOOKING","parent_source_event_index":9,'
         '"blocked_until_parent_completed":true}', "PARENT_NOT_FOUND"),
    ])
    async def test_each_contract_error_becomes_a_fallback_review_with_a_safe_message(self, rsv, world, db, raw_item,
                                                                                        wanted):
        marked = raw_item[:-1] + f',"{_MARKER}":"{_MARKER}"}}' if raw_item.startswith("{") else raw_item
        answer = await rsv.ingest_ok(world.ingest1, body("H1", [marked]))
        (result,) = answer["items"]
        assert result["adapter_error_code"] == wanted
        assert _MARKER not in result["adapter_error_message"] and "@" not in result["adapter_error_message"]
        assert (result["system_task_type"], result["task_card_type"], result["task_status"], result["order_status"]) \
            == ("MANUAL_REVIEW", "FALLBACK_REVIEW", "PENDING_CONFIRM", "TEMPORARY")
        task = await rsv.task(world.agent, result["task_id"])
        assert task["card"]["ai_payload_json"] == marked  # kept, never dropped
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-06")
    async def test_a_parent_cycle(self, rsv, world, db):
        raw = body("H1", [item(cn="C1", event=1, parent=2), item(cn="C2", event=2, parent=1)])
        answer = await rsv.ingest_ok(world.ingest1, raw)
        assert [i["adapter_error_code"] for i in answer["items"]] == ["PARENT_CYCLE", "PARENT_CYCLE"]
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-06")
    async def test_a_cycle_that_appears_once_the_first_is_failed(self, rsv, world, db):
        """Found by the reservation state machine (a 500, KeyError): two items of event 1 both name event 1 as
        their parent. The first is its own parent (a cycle) and fails; the second then becomes the first of
        event 1, so its own parent: a cycle too, not a parent that was never placed."""
        raw = body("H1", [item(cn="C0", event=2), item(cn="C1", event=1, parent=1), item(cn="C1", event=1, parent=1)])
        answer = await rsv.ingest_ok(world.ingest1, raw)
        assert [i["adapter_error_code"] for i in answer["items"]] == [None, "PARENT_CYCLE", "PARENT_CYCLE"]
        await rules_hold(db, "RSV-")


class TestMapping:
    @pytest.mark.invariant("RSV-INV-13")
    async def test_notifications_are_completed_outside_the_queue_and_reviews_wait(self, rsv, world, db):
        raw = body("H1", [item("note", cn="N1"), item("review"), item("update", cn="N1", history=True),
                          item("source_notice")])
        results = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert [(r["system_task_type"], r["task_status"], r["route_code"]) for r in results] == [
            ("INFORMATIONAL_MESSAGE", "COMPLETED", "INFORMATIONAL_MESSAGE"),
            ("MANUAL_REVIEW", "PENDING_CONFIRM", "MANUAL_REVIEW"),
            ("INFORMATIONAL_MESSAGE", "COMPLETED", "HISTORY_EVENT"),
            ("INFORMATIONAL_MESSAGE", "COMPLETED", "S10")]
        assert results[3]["system_process_category"] == "SOURCE_MESSAGE_NOTIFICATION"
        note = await rsv.task(world.agent, results[0]["task_id"])
        assert note["queue_participation"] is False and note["blocked"] is False
        assert note["card"]["prefill"]["summary"] == "Guest asks about parking"
        await rules_hold(db, "RSV-")

    async def test_the_ai_triple_is_kept_as_sent_beside_the_systems_mapping(self, rsv, world):
        raw = body("H1", [item("update", cn="K1", card="ROOMING_LIST", gc="G1"), item("TA_RECORDER", cn="K2")])
        first, second = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert (first["result_type"], first["ai_task_type"], first["task_subtype"]) == (
            "normal_task", "UPDATE_BOOKING", "ROOMING_LIST")
        assert (first["system_task_type"], first["task_card_type"]) == ("UPDATE_BOOKING", "ROOMING_LIST")
        assert (second["ai_task_type"], second["task_card_type"], second["route_code"]) == (
            "TA_RECORDER", "TA_RECORDER", "UPDATE_BOOKING.TA_RECORDER")


class TestOrders:
    @pytest.mark.invariant("RSV-INV-07")
    async def test_an_update_with_a_key_creates_the_active_order_and_later_items_match_it(self, rsv, world, db):
        first = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CNF 884213")])))["items"][0]
        second = (await rsv.ingest_ok(world.ingest1, body("H1", [item("cancel", cn=" cnf884213 ")])))["items"][0]
        assert first["order_status"] == "ACTIVE" and second["order_id"] == first["order_id"]
        order = await rsv.order(world.agent, first["order_id"])
        assert (order["order_key_type"], order["order_business_key"], order["business_key_source"]) == (
            "CONFIRMATION_NUMBER", "CNF884213", "AI_CANDIDATE")
        assert [t["execution_order"] for t in order["tasks"]] == [1, 2]
        assert [t["blocked"] for t in order["tasks"]] == [False, True]
        await rules_hold(db, "RSV-")

    async def test_the_confirmation_number_wins_over_the_group_code(self, rsv, world):
        by_group = (await rsv.ingest_ok(world.ingest1, body("H1", [item("ROOMING_LIST", gc="G7", cn="C7")])))
        by_number = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="C8")])))
        both = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="C8", gc="G7")])))["items"][0]
        assert both["order_id"] == by_number["items"][0]["order_id"] != by_group["items"][0]["order_id"]

    @pytest.mark.invariant("RSV-INV-08")
    async def test_new_bookings_and_unkeyed_items_wait_on_temporary_orders_by_event(self, rsv, world, db):
        raw = body("H1", [item("new", event=1), item("note", event=1), item("new", event=2), item("review")])
        results = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert [r["order_status"] for r in results] == ["TEMPORARY"] * 4
        assert results[0]["order_id"] == results[1]["order_id"]
        assert len({r["order_id"] for r in results}) == 3
        order = await rsv.order(world.agent, results[0]["order_id"])
        assert order["temporary_order_code"] == f"TMP-{results[0]['order_id']}"
        assert order["created_from_task_id"] == results[0]["task_id"]
        await rules_hold(db, "RSV-")

    @pytest.mark.invariant("RSV-INV-11")
    async def test_a_child_joins_its_parents_queue_behind_it(self, rsv, world, db):
        raw = body("H1", [item("TRACE_RESERVATION_NOTES", event=2, parent=1, wait=True), item("new", event=1)],
                   message=555)
        child, parent = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert child["order_id"] == parent["order_id"]
        assert int(parent["task_id"]) < int(child["task_id"])
        assert parent["execution_order"] < child["execution_order"]
        task = await rsv.task(world.agent, child["task_id"])
        assert (task["parent_task_id"], task["blocked"], task["blocked_reason"]) == (
            parent["task_id"], True, "EARLIER_TASK")
        # A later batch of the same message finds the parent from the first one.
        later = (await rsv.ingest_ok(world.ingest1, body(
            "H1", [item("VOUCHER_RECEIVED", parent=1, wait=True)], message=555)))["items"][0]
        assert later["order_id"] == parent["order_id"]
        await rules_hold(db, "RSV-")

    async def test_a_linked_group_shares_an_order(self, rsv, world):
        raw = body("H1", [item("new", group="g1"), item("TRACE_RESERVATION_NOTES", group="g1")])
        first, second = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        assert first["order_id"] == second["order_id"]

    @pytest.mark.invariant("RSV-INV-05")
    async def test_every_transition_has_its_task_and_card(self, rsv, world, db):
        raw = body("H1", [item(cn="T1"), item("new"), item("note"), '"junk"'])
        await rsv.ingest_ok(world.ingest1, raw)
        counts = (await _rows(db, "SELECT (SELECT count(*) FROM reservation.workflow_reservation_ai_transition) t, "
                                  "(SELECT count(*) FROM reservation.workflow_reservation_task) k, "
                                  "(SELECT count(*) FROM reservation.workflow_reservation_task_card) c"))[0]
        assert counts == {"t": 4, "k": 4, "c": 4}
        await rules_hold(db, "RSV-")

    async def test_the_audit_names_the_superagent(self, rsv, world, db):
        answer = await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="AU1")]))
        actions = await _rows(db, "SELECT action, actor_type, actor_id FROM reservation.workflow_reservation_audit_log "
                                  "ORDER BY id")
        assert [a["action"] for a in actions] == ["reservation.batch.ingested", "reservation.order.created",
                                                  "reservation.task.created"]
        assert {(a["actor_type"], a["actor_id"]) for a in actions} == {("SUPERAGENT", str(world.ingest1.id))}
        batch = await rsv.get(world.ingest1, f"/ai-batches/{answer['batch_id']}")
        assert batch.status_code == 200 and batch.json()["items"] == answer["items"]
        assert (await rsv.get(world.ingest2, f"/ai-batches/{answer['batch_id']}")).status_code == 404
        assert json.loads(json.dumps(batch.json()))["client_id"] == str(world.ingest1.id)


class TestLimits:
    async def test_a_body_over_two_mebibytes_is_refused_before_it_is_read(self, rsv, world, db):
        raw = body("H1", [item(cn="BIG", fields={"blob": "x" * (2 * 1024 * 1024)})])
        response = await rsv.ingest(world.ingest1, raw)
        assert (response.status_code, code(response)) == (413, "PAYLOAD_TOO_LARGE")
        assert await _rows(db, "SELECT id FROM reservation.workflow_reservation_ai_batch") == []

    async def test_a_body_over_the_default_limit_but_under_the_routes_is_accepted(self, rsv, world):
        raw = body("H1", [item(cn="MID", fields={"blob": "x" * (1200 * 1024)})])
        assert (await rsv.ingest(world.ingest1, raw)).status_code == 201
