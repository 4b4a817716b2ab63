"""Random sequences of agenda commands (INVARIANTS.md §3): sections, items, reorders (right and wrong), moves,
deletions, tasks, uploads with the auto-flip, deletions and restores of files, the purge, meeting cancellation and
deletion, account deletion and time passing. After every step every MA detector must find nothing (at the frozen
clock), the deferred order triggers must accept the state, and every refusal must be a DomainError.

Files live on a real local store in a temp directory (restore checks the file is there, the purge unlinks it)."""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from sqlalchemy import text

from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.iam.principal import Principal
from tenet.kernel.audit import Actor
from tenet.meetings import service as meetings_service
from tenet.meetings.agenda import attachments, service, storage
from tenet.meetings.permissions import POINTS
from tests.support.statemachine import DatabaseMachine, run_machine

# Long by design (tens of command sequences against a real database, each checked by every detector): about
# 150 s on a slow 2-core machine, and a failure's shrinking takes longer; the suite's 300 s would cut a run short.
pytestmark = pytest.mark.timeout(900)

PEOPLE = 3
INDEX = st.integers(min_value=0, max_value=63)
OUTCOMES: Counter[str] = Counter()
DENSE = ("meeting_attendance.meeting_agenda_sections_order_dense, "
         "meeting_attendance.meeting_agenda_items_order_dense")


def principal(user_id: uuid.UUID, role: str) -> Principal:
    return Principal(kind="user", id=user_id, roles=frozenset({role}),
                     permissions=frozenset(p.name for p in POINTS if role in p.granted_to))


class AgendaCommands(DatabaseMachine):
    outcomes = OUTCOMES

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.store = storage.LocalDiskStorage(Path(self.directory.name))
        self.manager, self.people = self.run(self._make_people())
        self.meetings: list[str] = []
        self.sections: list[uuid.UUID] = []
        self.items: list[uuid.UUID] = []
        self.tasks: list[uuid.UUID] = []
        self.files: list[tuple[str, uuid.UUID]] = []

    async def _make_people(self) -> tuple[Principal, list[Principal]]:
        passwords = Passwords(time_cost=1, memory_kib=1024)
        async with self.db.unit_of_work() as session:
            manager = await iam_service.create_user(
                session, passwords=passwords, email="manager@example.com", password="a-long-password-1",
                display_name="Manager", now=self.clock.now(), actor=Actor.system(), roles=[Role.MEETING_MANAGER])
            people = [await iam_service.create_user(
                session, passwords=passwords, email=f"person{i}@example.com", password="a-long-password-1",
                display_name=f"Person {i}", now=self.clock.now(), actor=Actor.system(), roles=[Role.EMPLOYEE])
                for i in range(PEOPLE)]
        return principal(manager.id, "MeetingManager"), [principal(p.id, "Employee") for p in people]

    def teardown(self) -> None:
        super().teardown()
        self.directory.cleanup()

    def who(self, index: int) -> Principal:
        return self.manager if index % (PEOPLE + 1) == PEOPLE else self.people[index % (PEOPLE + 1)]

    # --- structure ------------------------------------------------------------------------------------------

    @rule(starts_in=st.integers(-240, 600), who=st.sets(st.integers(0, PEOPLE - 1), max_size=PEOPLE))
    def create_meeting(self, starts_in: int, who: set[int]) -> None:
        start = self.clock.now() + timedelta(minutes=starts_in)
        made = self.command(lambda s: meetings_service.create_meeting(
            s, principal_id=self.manager.id, fields={"title": "M", "start_time": start,
                                                 "end_time": start + timedelta(hours=1)},
            attendee_ids=[self.people[i].id for i in who], template_id=None,
            policy=meetings_service.MeetingPolicy(), now=self.clock.now()))
        if made is not None:
            self.meetings.append(made[0].id)

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX)
    def create_section(self, which: int) -> None:
        made = self.command(lambda s: service.create_section(s, meeting_id=self.pick(self.meetings, which),
                                                             title="S", principal=self.manager, now=self.clock.now()))
        if made is not None:
            self.sections.append(made.id)

    @precondition(lambda self: self.sections)
    @rule(which=INDEX)
    def create_item(self, which: int) -> None:
        made = self.command(lambda s: service.create_item(s, section_id=self.pick(self.sections, which),
                                                          fields={"title": "I"}, principal=self.manager,
                                                          now=self.clock.now()))
        if made is not None:
            self.items.append(made.id)

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, seed=st.randoms(use_true_random=False), drop=st.booleans())
    def reorder_sections(self, which: int, seed: Any, drop: bool) -> None:
        meeting_id = self.pick(self.meetings, which)

        async def go(session):
            ids = list((await session.execute(text(
                "SELECT id FROM meeting_attendance.meeting_agenda_sections WHERE meeting_id = :m "
                "AND deleted_at IS NULL"), {"m": meeting_id})).scalars())
            seed.shuffle(ids)
            if drop and ids:
                ids.pop()
            return await service.reorder_sections(session, meeting_id=meeting_id, ids=ids, principal=self.manager,
                                                  now=self.clock.now())

        self.command(go)

    @precondition(lambda self: self.sections)
    @rule(which=INDEX, seed=st.randoms(use_true_random=False))
    def reorder_items(self, which: int, seed: Any) -> None:
        section_id = self.pick(self.sections, which)

        async def go(session):
            ids = list((await session.execute(text(
                "SELECT id FROM meeting_attendance.meeting_agenda_items WHERE section_id = :s AND deleted_at IS NULL"),
                {"s": section_id})).scalars())
            seed.shuffle(ids)
            return await service.reorder_items(session, section_id=section_id, ids=ids, principal=self.manager,
                                               now=self.clock.now())

        self.command(go)

    @precondition(lambda self: self.items and self.sections)
    @rule(item=INDEX, section=INDEX)
    def move_item(self, item: int, section: int) -> None:
        self.command(lambda s: service.update_item(
            s, item_id=self.pick(self.items, item), changes={"section_id": self.pick(self.sections, section)},
            principal=self.manager, expected_version=None, now=self.clock.now()))

    @precondition(lambda self: self.sections)
    @rule(which=INDEX)
    def delete_section(self, which: int) -> None:
        self.command(lambda s: service.delete_section(s, section_id=self.pick(self.sections, which),
                                                      principal=self.manager, now=self.clock.now()))

    @precondition(lambda self: self.items)
    @rule(which=INDEX)
    def delete_item(self, which: int) -> None:
        self.command(lambda s: service.delete_item(s, item_id=self.pick(self.items, which), principal=self.manager,
                                                   now=self.clock.now()))

    # --- tasks and files --------------------------------------------------------------------------------------

    @precondition(lambda self: self.items)
    @rule(which=INDEX, who=st.sets(st.integers(0, PEOPLE - 1), min_size=1, max_size=PEOPLE))
    def assign(self, which: int, who: set[int]) -> None:
        made = self.command(lambda s: service.assign_tasks(
            s, item_id=self.pick(self.items, which), assignee_ids=[self.people[i].id for i in who], due_at=None,
            principal=self.manager, now=self.clock.now()))
        if made:
            self.tasks.extend(t.id for t in made)

    @precondition(lambda self: self.tasks)
    @rule(which=INDEX, delete=st.booleans())
    def end_task(self, which: int, delete: bool) -> None:
        task_id = self.pick(self.tasks, which)
        if delete:
            self.command(lambda s: service.delete_task(s, task_id=task_id, principal=self.manager,
                                                       now=self.clock.now()))
        else:
            self.command(lambda s: service.cancel_task(s, task_id=task_id, principal=self.manager,
                                                       now=self.clock.now()))

    async def _file(self, kind: str) -> attachments.StoredFile:
        attachment_id = uuid.uuid4()
        key = storage.key_for(kind, attachment_id, self.clock.now())
        temp = Path(self.directory.name) / "tmp" / f"{attachment_id}.part"
        temp.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(b"%PDF-1.7")
        await self.store.commit(temp, key)
        return attachments.StoredFile(attachment_id=attachment_id, key=key, filename="f.pdf",
                                      mime_type="application/pdf", size=8, sha256="0" * 64)

    @precondition(lambda self: self.items)
    @rule(which=INDEX, who=INDEX)
    def upload(self, which: int, who: int) -> None:
        stored = self.run(self._file("agenda-item"))
        made = self.command(lambda s: attachments.record_item_attachment(
            s, item_id=self.pick(self.items, which), stored=stored, principal=self.who(who), now=self.clock.now()))
        if made is None:
            self.run(self.store.delete(stored.key))
        else:
            self.files.append(("agenda-item", stored.attachment_id))

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX)
    def upload_to_meeting(self, which: int) -> None:
        stored = self.run(self._file("meeting"))
        made = self.command(lambda s: attachments.record_meeting_attachment(
            s, meeting_id=self.pick(self.meetings, which), category="MINUTES", stored=stored, principal=self.manager,
            now=self.clock.now()))
        if made is None:
            self.run(self.store.delete(stored.key))
        else:
            self.files.append(("meeting", stored.attachment_id))

    @precondition(lambda self: self.files)
    @rule(which=INDEX, who=INDEX)
    def delete_file(self, which: int, who: int) -> None:
        kind, attachment_id = self.pick(self.files, which)
        self.command(lambda s: attachments.delete_attachment(s, kind=kind, attachment_id=attachment_id,
                                                             principal=self.who(who), now=self.clock.now()))

    @precondition(lambda self: self.files)
    @rule(which=INDEX)
    def restore_file(self, which: int) -> None:
        kind, attachment_id = self.pick(self.files, which)
        self.command(lambda s: attachments.restore_attachment(
            s, kind=kind, attachment_id=attachment_id, principal=self.manager, storage=self.store, purge_days=30,
            now=self.clock.now()))

    @rule()
    def purge(self) -> None:
        cutoff = self.clock.now() - timedelta(days=30)
        for table in attachments._PURGE_TABLES:
            self.command(lambda s, table=table: attachments.purge_batch(s, table=table, storage=self.store,
                                                                        cutoff=cutoff))

    # --- the meeting, people, time ------------------------------------------------------------------------------

    @precondition(lambda self: self.meetings)
    @rule(which=INDEX, delete=st.booleans())
    def end_meeting(self, which: int, delete: bool) -> None:
        meeting_id = self.pick(self.meetings, which)
        if delete:
            self.command(lambda s: meetings_service.delete_meeting(s, meeting_id=meeting_id,
                                                                   principal_id=self.manager.id, now=self.clock.now()))
        else:
            self.command(lambda s: meetings_service.cancel_meeting(s, meeting_id=meeting_id,
                                                                   principal_id=self.manager.id, reason=None,
                                                                   now=self.clock.now()))

    @rule(who=st.integers(0, PEOPLE - 1))
    def delete_account(self, who: int) -> None:
        self.command(lambda s: iam_service.delete_user(s, user_id=self.people[who].id, now=self.clock.now(),
                                                       actor=Actor.user(self.manager.id)))

    @rule(days=st.sampled_from([0, 1, 12, 31]), hours=st.integers(0, 5))
    def time_passes(self, days: int, hours: int) -> None:
        self.clock.advance(timedelta(days=days, hours=hours))
        # The worker purges every hour: whatever left the window while time passed is gone by now.
        self.purge()

    @invariant()
    def every_meeting_rule_holds(self) -> None:
        async def detect():
            # The order triggers are deferred to COMMIT, which this outer transaction never reaches: fire them now.
            await self.connection.execute(text(f"SET CONSTRAINTS {DENSE} IMMEDIATE"))
            await self.connection.execute(text(f"SET CONSTRAINTS {DENSE} DEFERRED"))
            return await self.detected("MA-", now=self.clock.now())

        violations = self.run(detect())
        assert not violations, [(v.invariant.id, v.sample, v.error) for v in violations]


@pytest.mark.invariant("MA-INV-21", "MA-INV-22", "MA-INV-24", "MA-INV-25", "MA-INV-27", "MA-INV-28", "MA-INV-29")
def test_random_agenda_command_sequences_keep_every_meeting_rule(database_url):
    run_machine(AgendaCommands, database_url, OUTCOMES, max_examples=8, steps=25)
    assert OUTCOMES["ok"] > 0 and len(OUTCOMES) >= 4, OUTCOMES
