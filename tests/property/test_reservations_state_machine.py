"""Random sequences of reservation commands (INVARIANTS.md §3): ingest, replay, draft, confirm, move, convert,
execute, retry, abandon, end, logic-delete and create, each with fresh or stale versions. After every step every
RSV detector must find nothing, the deferred constraint triggers must pass (as at COMMIT), and every task's
status must have moved only along lifecycles.TASK; every refusal must be a DomainError with a stable code —
never an IntegrityError or any other exception.

The machine owns an event loop and an engine; each example runs inside one outer transaction on one
connection (every unit of work is a SAVEPOINT, as in the `db` fixture), rolled back at teardown.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from sqlalchemy import text

from tenet.iam.principal import Principal
from tenet.kernel.http import ExpectedVersion
from tenet.kernel.invariants import all_invariants
from tenet.reservations import execution, ingest, lifecycles, service
from tenet.reservations.cards import validation
from tenet.reservations.cards.contract import SIMULATION_OUTCOMES
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.permissions import POINTS
from tests.reservations.conftest import confirmable
from tests.support.statemachine import DatabaseMachine, run_machine

# Long by design (tens of command sequences against a real database, each checked by every detector): about
# 150 s on a slow 2-core machine, and a failure's shrinking takes longer; the suite's 300 s would cut a run short.
pytestmark = pytest.mark.timeout(900)

RSV_RULES = [i for i in all_invariants() if i.id.startswith("RSV-")]
# Every detector's count in one statement (one round trip per step); the kernel's check names the rows when
# one of them is not zero.
ALL_COUNTS = "SELECT " + ", ".join(
    f"(SELECT count(*) FROM ({rule.detector.strip().rstrip(';')}) v{n}) AS c{n}"
    for n, rule in enumerate(RSV_RULES))
INDEX = st.integers(min_value=0, max_value=63)
KEYS = ["K1", "K2", "K3"]
GROUPS = ["G1", "G2"]
OUTCOMES: Counter[str] = Counter()
OUTCOME_CHOICES = ["SUCCEED", "SUCCEED", "SUCCEED", *SIMULATION_OUTCOMES]


def _reachable(source: str) -> set[str]:
    """The states a task may reach from `source` along declared transitions (one command may take several:
    execute goes READY -> EXECUTING -> COMPLETED)."""
    seen, todo = {source}, [source]
    while todo:
        state = todo.pop()
        for step in lifecycles.TASK.transitions.values():
            if state in step.sources and step.target not in seen:
                seen.add(step.target)
                todo.append(step.target)
    return seen

CLIENT = Principal(kind="client", id=uuid.UUID(int=1), scopes=frozenset({"reservations:ingest"}),
                   hotel_ids=frozenset({"H1"}))
AGENT = Principal(kind="user", id=uuid.UUID(int=2), permissions=frozenset(p.name for p in POINTS))


@st.composite
def ai_item(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["update", "update", "cancel", "new", "note", "review", "junk", "child", "card"]))
    if kind == "junk":
        return draw(st.sampled_from(['"not an object"', '{"result_type": "nonsense"}', "[1, 2]",
                                     '{"result_type": "normal_task"}']))
    members: dict[str, Any] = {"result_type": "normal_task", "current_or_history": "current",
                               "source_event_index": draw(st.integers(1, 3))}
    if kind == "review":
        members["result_type"] = "manual_review"
    elif kind == "note":
        members["ai_task_type"] = "MESSAGE_NOTIFICATION"
    elif kind == "new":
        members["ai_task_type"] = "NEW_BOOKING"
    elif kind == "cancel":
        members["ai_task_type"] = "CANCEL_BOOKING"
    elif kind == "card":
        members["ai_task_type"] = draw(st.sampled_from(["ROOMING_LIST", "TA_RECORDER", "VOUCHER_RECEIVED"]))
    else:
        members["ai_task_type"] = "UPDATE_BOOKING"
    if kind == "child":
        members["parent_source_event_index"] = draw(st.integers(1, 3))
        members["blocked_until_parent_completed"] = draw(st.booleans())
    keys = {}
    if draw(st.booleans()):
        keys["confirmation_number"] = draw(st.sampled_from(KEYS))
    if draw(st.booleans()):
        keys["group_code"] = draw(st.sampled_from(GROUPS))
    if keys:
        members["case_keys"] = keys
    members["extracted_fields"] = {"room_type": "KING", "adults": draw(st.integers(1, 3))}
    return json.dumps(members, separators=(",", draw(st.sampled_from([":", ": "]))))


class ReservationCommands(DatabaseMachine):
    outcomes = OUTCOMES

    def __init__(self) -> None:
        super().__init__()
        self.now = self.start
        self.bodies: list[bytes] = []
        self.statuses: dict[int, str] = {}
        self.messages = 0
        self.command(lambda s: s.execute(text(
            "INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) VALUES ('H1', now(), now())")))

    def ids(self, sql: str) -> list[int]:
        async def go() -> list[int]:
            async with self.db.read_only() as session:
                return list((await session.execute(text(sql))).scalars())

        return self.run(go())

    def task_facts(self, task_id: int) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            async with self.db.read_only() as session:
                row = (await session.execute(text(
                    "SELECT k.version, k.task_card_type, c.ai_payload_json "
                    "FROM reservation.workflow_reservation_task k JOIN reservation.workflow_reservation_task_card c "
                    "ON c.hotel_id = k.hotel_id AND c.task_id = k.id "
                    "WHERE k.id = :id"), {"id": task_id})).mappings().one()
                return dict(row)

        return self.run(go())

    def own_key(self, task_id: int) -> str:
        """The confirmation number the task's order is keyed by, or a key no other order holds."""
        async def go() -> str | None:
            async with self.db.read_only() as session:
                return (await session.execute(text(
                    "SELECT o.order_business_key FROM reservation.workflow_reservation_task k "
                    "JOIN reservation.workflow_reservation_order o ON o.hotel_id = k.hotel_id AND o.id = k.order_id "
                    "WHERE k.id = :id AND o.order_key_type = 'CONFIRMATION_NUMBER'"), {"id": task_id})).scalar()

        return self.run(go()) or f"CNF-OWN-{task_id}"

    def version(self, current: int, stale: bool) -> ExpectedVersion:
        return ExpectedVersion(current - 1 if stale and current > 1 else current + 1 if stale else current,
                               from_header=True)

    # --- ingest -------------------------------------------------------------------------------------------

    @rule(items=st.lists(ai_item(), max_size=5), same_message=st.booleans(), with_request_id=st.booleans())
    def ingest(self, items: list[str], same_message: bool, with_request_id: bool) -> None:
        if not same_message or self.messages == 0:
            self.messages += 1
        parts = ['"hotel_id":"H1"', f'"source_message_id":{self.messages}']
        if with_request_id:
            parts.append(f'"request_id":"r-{len(self.bodies)}"')
        raw = ("{" + ",".join([*parts, f'"ai_task_results":[{",".join(items)}]']) + "}").encode()
        prepared = ingest.prepare(raw, principal=CLIENT, max_items=500)
        try:
            self.command(lambda s: ingest.ingest(s, prepared, principal=CLIENT, now=self.now))
        except ingest.BatchExists:
            OUTCOMES["replayed"] += 1
            return
        self.bodies.append(raw)

    @precondition(lambda self: self.bodies)
    @rule(which=INDEX)
    def replay(self, which: int) -> None:
        prepared = ingest.prepare(self.pick(self.bodies, which), principal=CLIENT, max_items=500)
        with pytest.raises(ingest.BatchExists):
            self.command(lambda s: ingest.ingest(s, prepared, principal=CLIENT, now=self.now))
        OUTCOMES["replayed"] += 1

    # --- tasks --------------------------------------------------------------------------------------------

    def tasks(self, status: str | None = None) -> list[int]:
        """Every task, or (when asked and there are any) those in `status`: commands mostly hit tasks they
        can act on, and sometimes any task."""
        every = self.ids("SELECT id FROM reservation.workflow_reservation_task ORDER BY id")
        if status is None:
            return every
        wanted = self.ids(f"SELECT id FROM reservation.workflow_reservation_task "
                          f"WHERE task_status = '{status}' ORDER BY id")
        return wanted or every

    @rule(which=INDEX, stale=st.booleans(), valid=st.booleans())
    def save_draft(self, which: int, stale: bool, valid: bool) -> None:
        if not (tasks := self.tasks()):
            return
        task_id = self.pick(tasks, which)
        facts = self.task_facts(task_id)
        payload = {"room_type": "TWIN"} if valid else {"room_type": 7, "unknown": True}
        self.command(lambda s: service.save_draft(s, task_id=task_id, payload=payload,
                                                  want=self.version(facts["version"], stale), principal=AGENT,
                                                  now=self.now))

    @rule(which=INDEX, stale=st.booleans(), outcome=st.sampled_from(OUTCOME_CHOICES),
          key=st.sampled_from([None, *KEYS]), aim=st.booleans())
    def confirm(self, which: int, stale: bool, outcome: str, key: str | None, aim: bool) -> None:
        if not (tasks := self.tasks("PENDING_CONFIRM" if aim else None)):
            return
        task_id = self.pick(tasks, which)
        facts = self.task_facts(task_id)
        prefill, _ = validation.prefill(PROVIDER.definition(facts["task_card_type"]), facts["ai_payload_json"])
        payload = confirmable({"card": {"task_card_type": facts["task_card_type"], "prefill": prefill}},
                              opera_simulation_outcome=outcome)
        if key is not None:
            payload["confirmation_number"] = key
        self.command(lambda s: service.confirm_task(s, task_id=task_id, payload=payload,
                                                    want=self.version(facts["version"], stale), principal=AGENT,
                                                    now=self.now))

    @rule(which=INDEX, outcome=st.sampled_from(OUTCOME_CHOICES))
    def confirm_then_execute(self, which: int, outcome: str) -> None:
        """The common path in one step: the first waiting task that is not blocked, confirmed and executed."""
        if not (tasks := self.tasks("PENDING_CONFIRM")):
            return
        task_id = self.pick(tasks, which)
        facts = self.task_facts(task_id)
        prefill, _ = validation.prefill(PROVIDER.definition(facts["task_card_type"]), facts["ai_payload_json"])
        payload = confirmable({"card": {"task_card_type": facts["task_card_type"], "prefill": prefill}},
                              opera_simulation_outcome=outcome)
        # The key the task's own order holds (or one of its own): `confirmable`'s shared default key is active
        # in one order at most, so most confirms elsewhere were refused ORDER_KEY_ALREADY_ACTIVE and a run
        # could end without one task reaching COMPLETED (seen once in a full run).
        if "confirmation_number" in payload and "group_code" not in payload:
            payload["confirmation_number"] = self.own_key(task_id)
        if self.command(lambda s: service.confirm_task(s, task_id=task_id, payload=payload,
                                                       want=self.version(facts["version"], False), principal=AGENT,
                                                       now=self.now)) is not False:
            self.command(lambda s: execution.execute_task(s, task_id=task_id, want=None, principal=AGENT, now=self.now))

    @rule(which=INDEX, destination=INDEX, stale=st.booleans())
    def move(self, which: int, destination: int, stale: bool) -> None:
        tasks, orders = self.tasks(), self.ids("SELECT id FROM reservation.workflow_reservation_order ORDER BY id")
        if not tasks or not orders:
            return
        task_id, order_id = self.pick(tasks, which), self.pick(orders, destination)
        facts = self.task_facts(task_id)
        self.command(lambda s: service.move_task(s, task_id=task_id, target_order_id=order_id,
                                                 want=self.version(facts["version"], stale), principal=AGENT,
                                                 now=self.now))

    @rule(which=INDEX, card=st.sampled_from(["UPDATE_BOOKING", "NEW_BOOKING", "CANCEL_BOOKING"]))
    def convert(self, which: int, card: str) -> None:
        if not (tasks := self.tasks()):
            return
        task_id = self.pick(tasks, which)
        facts = self.task_facts(task_id)
        self.command(lambda s: service.convert_task(s, task_id=task_id, task_card_type=card,
                                                    want=self.version(facts["version"], False), principal=AGENT,
                                                    now=self.now))

    @rule(which=INDEX, aim=st.booleans())
    def execute(self, which: int, aim: bool) -> None:
        if not (tasks := self.tasks("READY" if aim else None)):
            return
        task_id = self.pick(tasks, which)
        self.command(lambda s: execution.execute_task(s, task_id=task_id, want=None, principal=AGENT, now=self.now))

    @rule(which=INDEX, stale=st.booleans(), aim=st.booleans())
    def retry(self, which: int, stale: bool, aim: bool) -> None:
        operations = self.ids("SELECT id FROM reservation.workflow_reservation_opera_operation "
                              + ("WHERE operation_status = 'FAILED' " if aim else "") + "ORDER BY id")
        if not operations:
            return
        operation_id = self.pick(operations, which)
        count = self.ids(f"SELECT attempt_count FROM reservation.workflow_reservation_opera_operation "
                         f"WHERE id = {int(operation_id)}")[0]
        want = ExpectedVersion(count + 1 if stale else count, from_header=True)
        self.command(lambda s: execution.retry_operation(s, operation_id=operation_id, want=want, principal=AGENT,
                                                         now=self.now))

    @rule(which=INDEX, stale=st.booleans())
    def abandon(self, which: int, stale: bool) -> None:
        if not (tasks := self.tasks()):
            return
        task_id = self.pick(tasks, which)
        facts = self.task_facts(task_id)
        self.command(lambda s: service.abandon_task(s, task_id=task_id, reason="machine",
                                                    want=self.version(facts["version"], stale), principal=AGENT,
                                                    now=self.now))

    # --- orders -------------------------------------------------------------------------------------------

    @rule(which=INDEX, to=st.sampled_from(["ENDED", "LOGIC_DELETED"]))
    def close(self, which: int, to: str) -> None:
        orders = self.ids("SELECT id FROM reservation.workflow_reservation_order ORDER BY id")
        if not orders:
            return
        order_id = self.pick(orders, which)
        self.command(lambda s: service.close_order(s, order_id=order_id, to=to, reason="machine", want=None,
                                                   principal=AGENT, now=self.now))

    @rule(key=st.sampled_from(KEYS), kind=st.sampled_from(["CONFIRMATION_NUMBER", "GROUP_CODE"]))
    def create_order(self, key: str, kind: str) -> None:
        self.command(lambda s: service.create_order(s, hotel_id="H1", key_type=kind, business_key=key,
                                                    display_name=None, principal=AGENT, now=self.now))

    # --- after every step ---------------------------------------------------------------------------------

    @invariant()
    def every_reservation_rule_holds(self) -> None:
        async def go() -> list[Any]:
            # What COMMIT would check: the deferred constraint triggers, then back to deferred.
            await self.connection.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await self.connection.execute(text("SET CONSTRAINTS ALL DEFERRED"))
            counts = (await self.connection.execute(text(ALL_COUNTS))).one()
            if not any(counts):
                return []
            return await self.detected("RSV-")

        violations = self.run(go())
        assert not violations, [(v.invariant.id, v.sample) for v in violations]

    @invariant()
    def statuses_move_only_along_the_lifecycle(self) -> None:
        async def go() -> dict[int, str]:
            async with self.db.read_only() as session:
                rows = await session.execute(text("SELECT id, task_status FROM reservation.workflow_reservation_task"))
                return {row.id: row.task_status for row in rows}

        now = self.run(go())
        for task_id, status in now.items():
            before = self.statuses.get(task_id)
            assert before is None or status in _reachable(before), (before, status)
            if before is not None and before != status:
                OUTCOMES[f"{before}->{status}"] += 1
        self.statuses = now


@pytest.mark.invariant(*[f"RSV-INV-{n:02d}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)])
def test_random_command_sequences_keep_every_reservation_rule(database_url):
    # Derandomized: the coverage asserted below (a task left EXECUTING on a failed operation needs a failure drawn
    # between a confirm and an execute) was missed by one random run in the full suite; the same sequences every
    # run keep the assertion meaningful without making it flaky.
    run_machine(ReservationCommands, database_url, OUTCOMES, max_examples=40, steps=40)
    assert OUTCOMES["ok"] > 0 and OUTCOMES["replayed"] > 0, OUTCOMES
    # The run drew refusals, not only successes. Which ones a random run draws varies (TASK_BLOCKED needs a
    # confirm on a queue whose earlier task is unfinished); each refusal has its own deterministic test in
    # tests/reservations/test_tasks.py, so requiring all of them here would only make this test flaky.
    refusals = {"TASK_BLOCKED", "TASK_NOT_READY", "PRECONDITION_FAILED"} & set(OUTCOMES)
    assert len(refusals) >= 2, OUTCOMES
    # Tasks went the whole way, and some stayed on a failed operation.
    assert any(key.endswith("->COMPLETED") for key in OUTCOMES), OUTCOMES
    assert any(key.endswith("->EXECUTING") for key in OUTCOMES), OUTCOMES
