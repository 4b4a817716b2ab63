"""Declared state machines, the one conditional-transition primitive, and ordered row locks."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import Integer, MetaData, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tenet.kernel.errors import Conflict, NotFound, StateConflict, VersionConflict
from tenet.kernel.transitions import Refusal, Transition, declare, lock_rows, transition


class _Base(DeclarativeBase):
    metadata = MetaData()


class Ticket(_Base):
    """A throwaway table, created inside the test transaction."""

    __tablename__ = "ticket_for_transition_tests"
    __table_args__ = {"schema": "kernel"}
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)


TICKET = declare(
    "test.ticket",
    states=("OPEN", "DONE", "CANCELLED"),
    initial="OPEN",
    terminal={"DONE", "CANCELLED"},
    transitions=[
        Transition("finish", frozenset({"OPEN"}), "DONE", "assignee"),
        Transition("cancel", frozenset({"OPEN"}), "CANCELLED", "owner", effects="notifies the assignee"),
    ],
)


def conflict(refusal: Refusal[Ticket]) -> Conflict | NotFound:
    if refusal.reason == "missing":
        return NotFound()
    return Conflict(f"ticket is {refusal.status} ({refusal.reason})", current_status=refusal.status,
                    reason=refusal.reason, current_version=refusal.version)


@pytest.fixture
async def ticket(db):
    ticket_id = uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text(
            "CREATE TABLE kernel.ticket_for_transition_tests (id uuid PRIMARY KEY, status text, version int)"))
        await session.execute(text(
            "INSERT INTO kernel.ticket_for_transition_tests VALUES (:id, 'OPEN', 1)"), {"id": ticket_id})
    return ticket_id


async def move(db, ticket_id, name, **kwargs):
    async with db.unit_of_work() as session:
        return await transition(session, TICKET, name, model=Ticket, id=ticket_id, refuse=conflict, **kwargs)


async def test_a_declared_transition_moves_the_row_and_bumps_the_version(db, ticket):
    moved = await move(db, ticket, "finish")
    assert (moved.status, moved.version) == ("DONE", 2)


async def test_leaving_a_terminal_state_is_a_stable_conflict(db, ticket):
    await move(db, ticket, "finish")
    with pytest.raises(Conflict) as raised:
        await move(db, ticket, "cancel")
    assert raised.value.data["current_status"] == "DONE"


async def test_a_stale_version_is_told_apart_from_a_wrong_state(db, ticket):
    with pytest.raises(Conflict) as raised:
        await move(db, ticket, "finish", expected_version=7)
    assert raised.value.data == {"current_status": "OPEN", "reason": "version", "current_version": 1}
    await move(db, ticket, "finish", expected_version=1)
    with pytest.raises(Conflict) as raised:
        await move(db, ticket, "cancel", expected_version=2)
    assert raised.value.data["reason"] == "state"


async def test_a_failed_precondition_hands_the_current_row_to_the_error(db, ticket):
    seen = []

    def refuse(refusal: Refusal[Ticket]) -> Conflict:
        seen.append(refusal)
        return Conflict()

    async with db.unit_of_work() as session:
        with pytest.raises(Conflict):
            await transition(session, TICKET, "finish", model=Ticket, id=ticket, where=(Ticket.status == "NEVER",),
                             refuse=refuse)
    assert seen[0].reason == "precondition" and seen[0].current.id == ticket and seen[0].current.version == 1


async def test_the_default_refusals_are_kernel_errors(db, ticket):
    async with db.unit_of_work() as session:
        with pytest.raises(VersionConflict) as version:
            await transition(session, TICKET, "finish", model=Ticket, id=ticket, expected_version=3)
        assert version.value.data == {"current_version": 1}
        await transition(session, TICKET, "finish", model=Ticket, id=ticket)
        with pytest.raises(StateConflict) as state:
            await transition(session, TICKET, "cancel", model=Ticket, id=ticket)
        assert state.value.data == {"current_status": "DONE", "transition": "cancel"}
        with pytest.raises(NotFound):
            await transition(session, TICKET, "cancel", model=Ticket, id=uuid.uuid4())


async def test_the_set_form_moves_only_rows_in_a_source_state(db, ticket):
    other = uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text("INSERT INTO kernel.ticket_for_transition_tests VALUES (:id, 'DONE', 4)"),
                              {"id": other})
        moved = await transition(session, TICKET, "cancel", model=Ticket,
                                 where=(Ticket.id.in_([ticket, other]),))
    assert [(t.id, t.status, t.version) for t in moved] == [(ticket, "CANCELLED", 2)]


async def test_on_a_plain_unit_the_set_form_runs_as_a_plain_statement_and_answers_rows(db, ticket):
    """The same conditional UPDATE on the plain unit of work (Database.transaction): the machine's sources, the
    preconditions and the version bump hold; the moved rows come back as rows."""
    other = uuid.uuid4()
    async with db.transaction() as sql:
        await sql.execute("INSERT INTO kernel.ticket_for_transition_tests VALUES (%(id)s, 'DONE', 4)", {"id": other})
        moved = await transition(sql, TICKET, "cancel", model=Ticket, where=(Ticket.id.in_([ticket, other]),))
        assert moved == [{"id": ticket, "status": "CANCELLED", "version": 2}]
        assert await transition(sql, TICKET, "cancel", model=Ticket, where=(Ticket.id == ticket,)) == []
        with pytest.raises(TypeError):  # the one-row form answers the entity or its refusal: the session's
            await transition(sql, TICKET, "finish", model=Ticket, id=other)  # type: ignore[call-overload]


async def test_lock_rows_locks_existing_rows_in_id_order(db, ticket):
    ids = sorted([uuid.uuid4() for _ in range(3)])
    async with db.unit_of_work() as session:
        for ticket_id in ids:
            await session.execute(text("INSERT INTO kernel.ticket_for_transition_tests VALUES (:id, 'OPEN', 1)"),
                                  {"id": ticket_id})
        locked = await lock_rows(session, Ticket, [ids[2], uuid.uuid4(), ids[0], ids[1], ids[0]])
        assert locked == ids
        assert await lock_rows(session, Ticket, []) == []


async def test_a_missing_row_is_not_found(db, ticket):
    with pytest.raises(NotFound):
        await move(db, uuid.uuid4(), "finish")


async def test_machine_declarations_are_checked():
    with pytest.raises(ValueError, match="unknown states"):
        declare("test.bad", states=("A",), initial="A", terminal=set(),
                transitions=[Transition("go", frozenset({"A"}), "B", "anyone")])
    with pytest.raises(ValueError, match="leaves a terminal state"):
        declare("test.bad2", states=("A", "B"), initial="A", terminal={"A"},
                transitions=[Transition("go", frozenset({"A"}), "B", "anyone")])


def test_mermaid_names_every_transition():
    diagram = TICKET.mermaid()
    assert "OPEN --> DONE: finish (assignee)" in diagram and "CANCELLED --> [*]" in diagram


async def test_two_racing_transitions_have_exactly_one_winner(committed_db):
    """Real connections: finish and cancel at the same moment; the loser gets the conflict."""
    ticket_id = uuid.uuid4()
    async with committed_db.unit_of_work() as session:
        await session.execute(text(
            "CREATE TABLE IF NOT EXISTS kernel.ticket_for_transition_tests (id uuid PRIMARY KEY, status text,"
            " version int)"))
        await session.execute(text(
            "INSERT INTO kernel.ticket_for_transition_tests VALUES (:id, 'OPEN', 1)"), {"id": ticket_id})
    try:
        results = await asyncio.gather(move(committed_db, ticket_id, "finish"), move(committed_db, ticket_id, "cancel"),
                                       return_exceptions=True)
        winners = [r for r in results if isinstance(r, Ticket)]
        losers = [r for r in results if isinstance(r, Conflict)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert losers[0].data["current_status"] == winners[0].status
    finally:
        async with committed_db.unit_of_work() as session:
            await session.execute(text("DROP TABLE kernel.ticket_for_transition_tests"))


class TestExpectedVersion:
    """kernel.http.expected_version: the version a write is conditioned on, and the answer when it is stale."""

    def test_if_match_comes_first_and_a_stale_one_is_412(self):
        from tenet.kernel.errors import PreconditionFailed
        from tenet.kernel.http import expected_version

        wanted = expected_version('"4"', None)
        assert (wanted.value, wanted.from_header) == (4, True)
        stale = wanted.stale(5)
        assert isinstance(stale, PreconditionFailed) and stale.status == 412 and stale.data == {"current_version": 5}

    def test_a_stale_body_version_is_409(self):
        from tenet.kernel.http import expected_version

        wanted = expected_version(None, 2)
        assert (wanted.value, wanted.from_header) == (2, False)
        assert isinstance(wanted.stale(3), VersionConflict)

    def test_none_given_is_428_when_required(self):
        from tenet.kernel.errors import PreconditionRequired
        from tenet.kernel.http import expected_version

        with pytest.raises(PreconditionRequired) as missing:
            expected_version(None, None)
        assert missing.value.status == 428 and missing.value.code == "PRECONDITION_REQUIRED"
        assert expected_version(None, None, required=False) is None

    def test_two_different_versions_are_a_bad_request(self):
        from tenet.kernel.errors import BadRequest
        from tenet.kernel.http import expected_version

        with pytest.raises(BadRequest):
            expected_version('"1"', 2)
        assert expected_version('W/"2"', 2).value == 2
