"""The OPERA seam (spec §11-§13): an adapter plans a task's operations and performs them; the simulator is the
adapter of this phase.

A real adapter replaces the simulator without table changes: it maps OPERA's answers into `response` and
`business_key_candidates` (spec §13's structure) and keeps raw remote text out of `error_message`. Every
operation carries an `external_reference` that travels with its writes; before any *retry* of a write the
executor asks `lookup` whether an earlier attempt reached OPERA after all (an answer lost to a timeout), so a
write is never done twice.

The simulator is driven by the confirmed payload's `opera_simulation_outcome` (a documented card field), so
failures can be shown and tested deterministically:

| value | precheck | write |
|---|---|---|
| SUCCEED (default) | succeeds | books and succeeds |
| FAIL_PRECHECK_ONCE | attempt 1 fails, later ones succeed | as SUCCEED |
| FAIL_PRECHECK_ALWAYS | every attempt fails | never reached |
| FAIL_WRITE_ONCE | succeeds | attempt 1 fails without booking; the retry books |
| FAIL_WRITE_ALWAYS | succeeds | every attempt fails |
| TIMEOUT_AFTER_WRITE_ONCE | succeeds | attempt 1 books, then times out; the retry finds the booking |

It keeps its own store (`opera_simulator_write`), the stand-in for OPERA's database, in the command's
transaction. A NEW_BOOKING without a confirmation number gets `SIM` + the booking's id, answered as a
business key candidate for the back-fill.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.statements import statements

PRECHECK, WRITE = "SIMULATE_PRECHECK", "SIMULATE_WRITE"
_LOOKUP_SQL = """
    SELECT id, business_key_type, business_key FROM reservation.opera_simulator_write
     WHERE hotel_id = %(h)s AND external_reference = %(ref)s"""
_BOOK_SQL = """
    INSERT INTO reservation.opera_simulator_write (id, hotel_id, external_reference, task_card_type,
           business_key_type, business_key, request_payload, created_at)
    SELECT n.id, %(h)s, %(ref)s, %(card)s, COALESCE(%(kt)s, 'CONFIRMATION_NUMBER'),
           COALESCE(%(k)s, 'SIM' || lpad(n.id::text, 9, '0')), CAST(%(request)s AS jsonb), %(now)s
      FROM (SELECT nextval(pg_get_serial_sequence('reservation.opera_simulator_write', 'id')) AS id) n
    RETURNING id, business_key_type, business_key"""


@dataclass(frozen=True)
class PlannedOperation:
    sequence: int
    code: str
    name: str
    request: dict[str, Any]


@dataclass(frozen=True)
class OperationCall:
    hotel_id: str
    task_id: int
    operation_id: int
    operation_code: str
    external_reference: str
    attempt_number: int
    system_task_type: str
    task_card_type: str
    request: dict[str, Any]
    confirmed_payload: dict[str, Any]
    now: datetime


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    response: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None   # a safe summary (<= 512), never raw remote text
    outcome_unknown: bool = False       # a timeout: the write may have happened
    via_lookup: bool = False
    business_key_candidates: tuple[dict[str, str], ...] = field(default=())


class OperaAdapter(Protocol):
    name: str

    def plan(self, *, system_task_type: str, task_card_type: str,
             confirmed_payload: dict[str, Any]) -> list[PlannedOperation]: ...

    def is_write(self, operation_code: str) -> bool: ...

    async def perform(self, session: AsyncSession, call: OperationCall) -> Outcome: ...

    async def lookup(self, session: AsyncSession, call: OperationCall) -> Outcome | None: ...


def request_summary(system_task_type: str, task_card_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """What an operation's rows keep of the confirmed payload: field names, the business key and a hash —
    never guest names or message text (spec §11: no full mail text)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    summary: dict[str, Any] = {"system_task_type": system_task_type, "task_card_type": task_card_type,
                               "fields": sorted(payload),
                               "payload_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
    for name in ("confirmation_number", "group_code", "new_group_code"):
        if isinstance(payload.get(name), str):
            summary[name] = payload[name]
    return summary


class OperaSimulator:
    name = "opera-simulator"

    def plan(self, *, system_task_type: str, task_card_type: str,
             confirmed_payload: dict[str, Any]) -> list[PlannedOperation]:
        summary = request_summary(system_task_type, task_card_type, confirmed_payload)
        return [PlannedOperation(1, PRECHECK, "Simulated OPERA precheck", summary),
                PlannedOperation(2, WRITE, "Simulated OPERA write", summary)]

    def is_write(self, operation_code: str) -> bool:
        return operation_code == WRITE

    async def perform(self, session: AsyncSession, call: OperationCall) -> Outcome:
        outcome = call.confirmed_payload.get("opera_simulation_outcome", "SUCCEED")
        first = call.attempt_number == 1
        if call.operation_code == PRECHECK:
            if outcome == "FAIL_PRECHECK_ALWAYS" or (outcome == "FAIL_PRECHECK_ONCE" and first):
                return Outcome(False, {"checked": False}, "SIMULATED_PRECHECK_FAILURE",
                               "The simulated OPERA precheck refused the change")
            return Outcome(True, {"checked": True})
        if outcome == "FAIL_WRITE_ALWAYS" or (outcome == "FAIL_WRITE_ONCE" and first):
            return Outcome(False, {"written": False}, "SIMULATED_WRITE_FAILURE",
                           "The simulated OPERA write was rejected")
        booked = await self._book(session, call)
        if outcome == "TIMEOUT_AFTER_WRITE_ONCE" and first:
            return Outcome(False, None, "TIMEOUT", "No answer from the simulated OPERA in time; the write may have "
                           "happened", outcome_unknown=True)
        return booked

    async def lookup(self, session: AsyncSession, call: OperationCall) -> Outcome | None:
        row = await (await statements(session)).one(_LOOKUP_SQL, {"h": call.hotel_id, "ref": call.external_reference})
        if row is None:
            return None
        return self._answer(call, row["id"], row["business_key_type"], row["business_key"], via_lookup=True)

    async def _book(self, session: AsyncSession, call: OperationCall) -> Outcome:
        payload = call.confirmed_payload
        key_type, key = (("CONFIRMATION_NUMBER", payload["confirmation_number"]) if payload.get("confirmation_number")
                         else ("GROUP_CODE", payload["group_code"]) if payload.get("group_code") else (None, None))
        row = await (await statements(session)).one(_BOOK_SQL, {
            "h": call.hotel_id, "ref": call.external_reference, "card": call.task_card_type, "kt": key_type, "k": key,
            "request": json.dumps(call.request), "now": call.now})
        assert row is not None
        return self._answer(call, row["id"], row["business_key_type"], row["business_key"], via_lookup=False)

    def _answer(self, call: OperationCall, booking_id: int, key_type: str, key: str, *, via_lookup: bool) -> Outcome:
        candidates: tuple[dict[str, str], ...] = ()
        if call.system_task_type == "NEW_BOOKING":
            candidates = ({"key_type": key_type, "business_key": key, "source": "OPERA_SIMULATION_RESULT",
                           "raw_path": "reserved.for.future.real.opera.path"},)
        return Outcome(True, {"written": True, "booking_id": str(booking_id), "business_key_type": key_type,
                              "business_key": key, "business_key_candidates": list(candidates)},
                       via_lookup=via_lookup, business_key_candidates=candidates)


ADAPTER: OperaAdapter = OperaSimulator()
