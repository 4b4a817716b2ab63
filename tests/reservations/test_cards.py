"""Task card contracts: the provider and its definitions route, prefill from the AI item, and the contract
version migration rule of spec §9."""

from __future__ import annotations

import tracemalloc

import pytest
from sqlalchemy import text

from tenet.kernel.jobs import JobRuntime, run_now
from tenet.reservations import tasks as reservation_jobs
from tenet.reservations.cards.contract import CURRENT_VERSION, LEGACY_VERSION
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.cards.validation import prefill, validate
from tests.reservations.conftest import body, confirmable, item
from tests.support.invariants import rules_hold
from tests.support.outcomes import code


class TestDefinitions:
    async def test_every_card_type_has_a_current_definition(self, rsv, world):
        listing = (await rsv.get(world.agent, "/task-card-definitions")).json()["items"]
        assert {i["task_card_type"] for i in listing} == set(PROVIDER.card_types())
        assert all(i["field_contract_version"] == CURRENT_VERSION for i in listing)
        assert all(set(i["versions"]) == {CURRENT_VERSION, LEGACY_VERSION} for i in listing)

    async def test_one_definition_with_its_version_and_etag(self, rsv, world):
        response = await rsv.get(world.reader1, "/task-card-definitions/ROOMING_LIST")
        assert response.status_code == 200
        definition = response.json()
        assert (definition["field_contract_version"], definition["current"], definition["confirmable"]) == (
            CURRENT_VERSION, True, True)
        rooming = next(f for f in definition["fields"] if f["key"] == "rooming_list")
        assert rooming["type"] == "list" and {f["key"] for f in rooming["item_fields"]} >= {"guest_name"}
        assert response.headers["etag"] == f'"ROOMING_LIST:{CURRENT_VERSION}"'
        legacy = (await rsv.get(world.agent, "/task-card-definitions/ROOMING_LIST", version=LEGACY_VERSION)).json()
        assert legacy["current"] is False

    @pytest.mark.parametrize(("path", "wanted"), [
        ("/task-card-definitions/NOPE", "TASK_CARD_TYPE_UNKNOWN"),
        ("/task-card-definitions/NEW_BOOKING?version=v0", "TASK_CARD_CONTRACT_VERSION_UNKNOWN"),
    ])
    async def test_unknown_types_and_versions(self, rsv, world, path, wanted):
        response = await rsv.client.get(f"/api/v1/reservations{path}", headers=rsv.headers(world.agent))
        assert (response.status_code, code(response)) == (404, wanted)

    async def test_the_prefill_takes_what_fits_and_names_what_does_not(self, rsv, world):
        fields = {"arrival_date": "tomorrow", "adults": 2, "number_of_rooms": 1.0, "rate_code": "BAR",
                  "guest_name": "Ada"}
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item("new", fields=fields)])))["items"]
        card = (await rsv.task(world.agent, result["task_id"]))["card"]
        assert card["prefill"] == {"adults": 2, "number_of_rooms": 1, "rate_code": "BAR", "guest_name": "Ada"}
        assert card["prefill_issues"] == [{"field": "arrival_date", "code": "BAD_FORMAT"}]


def _with(raw_item: str, **literals: str) -> str:
    """`raw_item` with each field's placeholder string replaced by a number literal, spelt as the AI sent it."""
    for name, literal in literals.items():
        raw_item = raw_item.replace(f'"{name}":"{name}"', f'"{name}":{literal}')
    return raw_item


class TestPrefillNumbers:
    """Issue 24 item 1: the AI's numbers are exact and unbounded; the prefill measures each by its exponent
    before converting it, so one number can neither stall the API (int(1e400000) took seconds, quadratic in
    the exponent), nor fill memory (1e80000000 written out: 80 MB per read), nor fail the task's every
    answer (int(1e999999999999999999): MemoryError, a 500 on GET, confirm, abandon and move)."""

    @pytest.mark.parametrize(("card", "field", "literal", "wanted"), [
        ("NEW_BOOKING", "adults", "1e400000", "OUT_OF_RANGE"),
        ("NEW_BOOKING", "adults", "-1e400000", "OUT_OF_RANGE"),
        ("NEW_BOOKING", "adults", "1e999999999999999999", "OUT_OF_RANGE"),
        ("NEW_BOOKING", "children", "1E+400000", "OUT_OF_RANGE"),
        ("NEW_BOOKING", "number_of_rooms", "9" * 4300, "OUT_OF_RANGE"),
        ("NEW_BOOKING", "adults", "1e-999999999999999999", "WRONG_TYPE"),
        ("VOUCHER_RECEIVED", "voucher_amount", "1e80000000", "BAD_FORMAT"),
        ("VOUCHER_RECEIVED", "voucher_amount", "1e-999999999999999999", "BAD_FORMAT"),
        ("VOUCHER_RECEIVED", "voucher_amount", "1e999999999999999999", "BAD_FORMAT"),
        ("VOUCHER_RECEIVED", "voucher_amount", "9" * 4300, "BAD_FORMAT"),
        ("TA_RECORDER", "commission_percent", "-1e400000", "BAD_FORMAT"),
    ])
    def test_a_number_the_field_cannot_hold_is_an_issue_measured_not_converted(self, card, field, literal, wanted):
        definition = PROVIDER.definition(card)
        raw_item = _with(item(card, fields={field: field, "currency": "EUR"}), **{field: literal})
        tracemalloc.start()
        try:
            found, issues = prefill(definition, raw_item)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert field not in found and {"field": field, "code": wanted} in issues
        # Parsing the item and checking its fields: kilobytes. Writing the number out took its exponent in
        # bytes (1e400000: a 166 kB int; 1e80000000: 80 MB of text), and 1e999999999999999999 could not.
        assert peak < 100_000, f"peak {peak} bytes"

    @pytest.mark.parametrize(("card", "field", "literal", "value"), [
        ("NEW_BOOKING", "adults", "2", 2), ("NEW_BOOKING", "adults", "2.0", 2), ("NEW_BOOKING", "adults", "2E0", 2),
        ("NEW_BOOKING", "number_of_rooms", "1e1", 10),
        ("VOUCHER_RECEIVED", "voucher_amount", "1.50", "1.50"), ("VOUCHER_RECEIVED", "voucher_amount", "1E+11",
                                                                 "100000000000"),
        ("VOUCHER_RECEIVED", "voucher_amount", "0E+20", "0"), ("VOUCHER_RECEIVED", "voucher_amount", "12", "12"),
        ("TA_RECORDER", "commission_percent", "12.5000", "12.5000"),
    ])
    def test_numbers_the_field_can_hold_are_still_prefilled(self, card, field, literal, value):
        found, issues = prefill(PROVIDER.definition(card), _with(item(card, fields={field: field}), **{field: literal}))
        assert (found[field], issues) == (value, [])

    async def test_an_out_of_range_number_leaves_the_task_workable(self, rsv, world, db):
        """`adults: 1e999999999999999999`: the task reads with an issue on adults, the agent types the value and
        confirms; its neighbour behind it in the queue reads and is abandoned; nothing stays blocked."""
        huge = "1e999999999999999999"
        first = _with(item("new", event=1, fields={"adults": "adults", "guest_name": "Ada"}), adults=huge)
        second = _with(item("new", event=1, fields={"adults": "adults"}), adults="1e400000")
        results = (await rsv.ingest_ok(world.ingest1, body("H1", [first, second])))["items"]
        assert results[0]["order_id"] == results[1]["order_id"]
        task = await rsv.task(world.agent, results[0]["task_id"])
        assert task["card"]["prefill"] == {"guest_name": "Ada"}
        assert task["card"]["prefill_issues"] == [{"field": "adults", "code": "OUT_OF_RANGE"}]
        behind = await rsv.task(world.agent, results[1]["task_id"])
        assert behind["blocked"] is True and behind["card"]["prefill_issues"] == [
            {"field": "adults", "code": "OUT_OF_RANGE"}]
        confirmed = await rsv.confirm_ok(world.agent, task["id"])
        assert confirmed["card"]["confirmed_payload"]["adults"] == 2
        executed = await rsv.execute(world.agent, task["id"])
        assert executed.status_code == 200, executed.text
        released = await rsv.task(world.agent, results[1]["task_id"])
        assert released["blocked"] is False
        abandoned = await rsv.post(world.agent, f"/tasks/{released['id']}/abandon", {"reason": "duplicate"},
                                   version=released["version"])
        assert abandoned.status_code == 200, abandoned.text
        await rules_hold(db, "RSV-")


async def _cards(db) -> dict[int, str]:
    async with db.read_only() as session:
        rows = await session.execute(text(
            "SELECT task_id, field_contract_version FROM reservation.workflow_reservation_task_card"))
        return {row.task_id: row.field_contract_version for row in rows}


class TestContractMigration:
    @pytest.mark.invariant("RSV-INV-16")
    async def test_only_cards_without_draft_or_confirmation_move(self, rsv, world, db, settings, clock):
        untouched, drafted, confirmed = (await rsv.ingest_ok(world.ingest1, body(
            "H1", [item(cn="CM1"), item(cn="CM2"), item(cn="CM3")])))["items"]
        draft = await rsv.put(world.agent, f"/tasks/{drafted['task_id']}/card/draft",
                              {"payload": {"room_type": "TWIN"}}, version=1)
        assert draft.status_code == 200
        await rsv.confirm_ok(world.agent, confirmed["task_id"])
        async with db.unit_of_work() as session:
            # The three cards were written under the first contract (past every guard, as an old release did).
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text("SET LOCAL session_replication_role = replica"))
            await session.execute(text("UPDATE reservation.workflow_reservation_task_card SET field_contract_version "
                                       "= :v"), {"v": LEGACY_VERSION})
        runtime = JobRuntime(db=db, clock=clock, settings=settings)
        moved = await run_now(reservation_jobs.migrate_card_contracts, runtime)
        assert moved == 1
        versions = await _cards(db)
        assert versions[int(untouched["task_id"])] == CURRENT_VERSION
        assert versions[int(drafted["task_id"])] == LEGACY_VERSION
        assert versions[int(confirmed["task_id"])] == LEGACY_VERSION
        task = await rsv.task(world.agent, drafted["task_id"])
        assert (task["card"]["field_contract_version"], task["card"]["current_contract_version"]) == (
            LEGACY_VERSION, CURRENT_VERSION)
        # Saving the draft again validates it against the current contract and records that version.
        resaved = await rsv.put(world.agent, f"/tasks/{drafted['task_id']}/card/draft",
                                {"payload": {"room_type": "KING"}}, version=task["version"])
        assert resaved.json()["card"]["field_contract_version"] == CURRENT_VERSION
        assert await run_now(reservation_jobs.migrate_card_contracts, runtime) == 0
        await rules_hold(db, "RSV-")

    async def test_confirming_validates_against_the_current_contract(self, rsv, world):
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item("TA_RECORDER", cn="TA1")])))["items"]
        task = await rsv.task(world.agent, result["task_id"])
        bad = await rsv.post(world.agent, f"/tasks/{task['id']}/confirm",
                             {"payload": confirmable(task, iata_number="12", commission_percent="101.5")},
                             version=task["version"])
        assert sorted((e["field"], e["code"]) for e in bad.json()["errors"]) == [
            ("commission_percent", "OUT_OF_RANGE"), ("iata_number", "BAD_FORMAT")]


class TestTypeErrorsReportedOnce:
    """Review finding of issue 23: a field of the wrong type is reported on that field alone. The card's rules
    judge only the fields that converted, so a present (but mistyped) key is not also "a confirmation number or a
    group code is required", nor a mistyped change "at least one change is required"."""

    @staticmethod
    def _issues(card: str, payload: dict) -> list[tuple[str, str]]:
        _, issues = validate(PROVIDER.definition(card), payload, mode="confirm")
        return sorted((issue.field, issue.code) for issue in issues)

    def test_a_mistyped_key_is_not_also_a_missing_key(self):
        assert self._issues("UPDATE_BOOKING", {"confirmation_number": 12345, "room_type": "KING"}) == [
            ("confirmation_number", "WRONG_TYPE")]
        assert self._issues("CANCEL_BOOKING", {"group_code": ["G1"]}) == [("group_code", "WRONG_TYPE")]

    def test_a_mistyped_change_is_not_also_no_change(self):
        assert self._issues("UPDATE_BOOKING", {"confirmation_number": "CN1", "adults": "two"}) == [
            ("adults", "WRONG_TYPE")]

    def test_a_mistyped_companion_is_not_also_missing(self):
        assert self._issues("VOUCHER_RECEIVED", {"confirmation_number": "CN1", "voucher_number": "V-1",
                                                 "voucher_amount": "10.00", "currency": 978}) == [
            ("currency", "WRONG_TYPE")]

    def test_the_rules_still_judge_what_did_convert(self):
        # The key is really missing: the rule speaks, next to the type error of another field.
        assert self._issues("UPDATE_BOOKING", {"room_type": "KING", "adults": "two"}) == [
            ("adults", "WRONG_TYPE"), ("confirmation_number", "KEY_REQUIRED")]
        assert self._issues("UPDATE_BOOKING", {"confirmation_number": "CN1"}) == [
            ("arrival_date", "CHANGE_REQUIRED")]

    async def test_the_confirm_route_answers_the_type_error_alone(self, rsv, world):
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CT1")])))["items"]
        task = await rsv.task(world.agent, result["task_id"])
        bad = await rsv.post(world.agent, f"/tasks/{task['id']}/confirm",
                             {"payload": {"confirmation_number": 7, "room_type": "KING"}}, version=task["version"])
        assert (bad.status_code, code(bad)) == (422, "TASK_CARD_PAYLOAD_INVALID")
        assert [(e["field"], e["code"]) for e in bad.json()["errors"]] == [("confirmation_number", "WRONG_TYPE")]
