"""Bypass tests of the agenda: illegal rows written with raw SQL must be refused by PostgreSQL itself, each by the
constraint, index or trigger the catalog names (MA-INV-21..26)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from tests.meetings.test_bypass import T0, _meeting, _refused, _user

SECTION = ("INSERT INTO meeting_attendance.meeting_agenda_sections (id, meeting_id, sort_order, title, created_by_id, "
           "created_at, updated_at, deleted_at, deleted_by_id) VALUES (:id, :m, :o, 'S', :u, :t, :t, :d, :by)")
ITEM = ("INSERT INTO meeting_attendance.meeting_agenda_items (id, section_id, sort_order, title, created_by_id, "
        "created_at, updated_at) VALUES (:id, :s, :o, 'I', :u, :t, :t)")
TASK = ("INSERT INTO meeting_attendance.meeting_agenda_item_upload_tasks (id, agenda_item_id, assignee_user_id, "
        "assigned_by_id, created_by_id, status, assigned_at, updated_at, completed_at) "
        "VALUES (:id, :i, :a, :u, :c, :st, :t, :t, :done)")
ATTACHMENT = ("INSERT INTO meeting_attendance.meeting_agenda_item_attachments (id, agenda_item_id, uploaded_by_id, "
              "created_by_id, filename, mime_type, size, storage_path, sha256, uploaded_at) "
              "VALUES (:id, :i, :u, :u, :f, 'application/pdf', 10, :p, :h, :t)")
SHA = "0" * 64


@pytest.fixture
async def tree(db):
    user = await _user(db)
    meeting = await _meeting(db, user)
    section, item = uuid.uuid4(), uuid.uuid4()
    async with db.unit_of_work() as session:
        await session.execute(text(SECTION), {"id": section, "m": meeting, "o": 0, "u": user, "t": T0, "d": None,
                                              "by": None})
        await session.execute(text(ITEM), {"id": item, "s": section, "o": 0, "u": user, "t": T0})
    return {"user": user, "meeting": meeting, "section": section, "item": item}


def _attachment(tree, **overrides):
    attachment_id = overrides.pop("id", uuid.uuid4())
    return {"id": attachment_id, "i": tree["item"], "u": tree["user"], "f": "slides.pdf",
            "p": f"agenda-item/2026/03/{attachment_id}", "h": SHA, "t": T0, **overrides}


class TestOrder:
    @pytest.mark.invariant("MA-INV-21")
    async def test_two_live_sections_at_one_position(self, db, tree):
        await _refused(db, SECTION, {"id": uuid.uuid4(), "m": tree["meeting"], "o": 0, "u": tree["user"], "t": T0,
                                     "d": None, "by": None}, "uq_meeting_agenda_sections_meeting_id_sort_order")

    @pytest.mark.invariant("MA-INV-21")
    async def test_a_gap_is_refused_at_commit(self, db, tree):
        await _refused(db, ITEM, {"id": uuid.uuid4(), "s": tree["section"], "o": 2, "u": tree["user"], "t": T0},
                       "meeting_agenda_items_order_dense", immediate=True)

    @pytest.mark.invariant("MA-INV-21")
    async def test_a_deleted_row_has_no_position(self, db, tree):
        await _refused(db, SECTION, {"id": uuid.uuid4(), "m": tree["meeting"], "o": 1, "u": tree["user"], "t": T0,
                                     "d": T0, "by": tree["user"]}, "ck_meeting_agenda_sections_order_live")

    @pytest.mark.invariant("MA-INV-21")
    async def test_the_one_statement_swap_passes_on_the_deferrable_constraint(self, db, tree):
        other = uuid.uuid4()
        async with db.unit_of_work() as session:
            await session.execute(text(ITEM), {"id": other, "s": tree["section"], "o": 1, "u": tree["user"],
                                               "t": T0})
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_items SET sort_order = CASE id WHEN :a THEN 1 "
                "WHEN :b THEN 0 END WHERE id IN (:a, :b)"), {"a": tree["item"], "b": other})
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))


class TestParents:
    @pytest.mark.invariant("MA-INV-22")
    async def test_a_live_item_under_a_deleted_section(self, db, tree):
        async with db.unit_of_work() as session:
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_items SET deleted_at = :t, deleted_by_id = :u, "
                "sort_order = NULL WHERE id = :i"), {"t": T0, "u": tree["user"], "i": tree["item"]})
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_sections SET deleted_at = :t, deleted_by_id = :u, "
                "sort_order = NULL WHERE id = :s"), {"t": T0, "u": tree["user"], "s": tree["section"]})
        await _refused(db, ITEM, {"id": uuid.uuid4(), "s": tree["section"], "o": 0, "u": tree["user"], "t": T0},
                       "meeting_agenda_items_parent_live")

    @pytest.mark.invariant("MA-INV-22")
    async def test_an_attachment_under_a_deleted_item_or_restored_under_it(self, db, tree):
        kept = _attachment(tree)
        async with db.unit_of_work() as session:
            await session.execute(text(ATTACHMENT), kept)
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_item_attachments SET deleted_at = :t, deleted_by_id = :u"),
                {"t": T0, "u": tree["user"]})
            await session.execute(text(
                "UPDATE meeting_attendance.meeting_agenda_items SET deleted_at = :t, deleted_by_id = :u, "
                "sort_order = NULL WHERE id = :i"), {"t": T0, "u": tree["user"], "i": tree["item"]})
        await _refused(db, ATTACHMENT, _attachment(tree), "meeting_agenda_item_attachments_parent_live")
        await _refused(db, "UPDATE meeting_attendance.meeting_agenda_item_attachments SET deleted_at = NULL, "
                           "deleted_by_id = NULL WHERE id = :id", {"id": kept["id"]},
                       "meeting_agenda_item_attachments_parent_live")

    @pytest.mark.invariant("MA-INV-22")
    async def test_a_section_of_a_deleted_meeting(self, db, tree):
        gone = await _meeting(db, tree["user"])
        async with db.unit_of_work() as session:
            await session.execute(text("UPDATE meeting_attendance.meetings SET status = 'DELETED', deleted_at = :t "
                                       "WHERE id = :m"), {"t": T0, "m": gone})
        await _refused(db, SECTION, {"id": uuid.uuid4(), "m": gone, "o": 0, "u": tree["user"], "t": T0, "d": None,
                                     "by": None}, "meeting_agenda_sections_parent_live")


class TestTasks:
    @pytest.mark.invariant("MA-INV-23", "MA-INV-24")
    async def test_the_creator_is_the_assigner(self, db, tree):
        other = await _user(db)
        await _refused(db, TASK, {"id": uuid.uuid4(), "i": tree["item"], "a": tree["user"], "u": tree["user"],
                                  "c": other, "st": "PENDING", "t": T0, "done": None},
                       "ck_meeting_agenda_item_upload_tasks_created_by_is_assigner")

    @pytest.mark.invariant("MA-INV-23", "MA-INV-24")
    async def test_two_pending_tasks_for_one_person_on_one_item(self, db, tree):
        row = {"i": tree["item"], "a": tree["user"], "u": tree["user"], "c": tree["user"], "st": "PENDING",
               "t": T0, "done": None}
        async with db.unit_of_work() as session:
            await session.execute(text(TASK), {"id": uuid.uuid4(), **row})
        await _refused(db, TASK, {"id": uuid.uuid4(), **row}, "uq_meeting_agenda_item_upload_tasks_pending")

    @pytest.mark.invariant("MA-INV-23", "MA-INV-24")
    async def test_uploaded_is_final_and_carries_its_time(self, db, tree):
        task = uuid.uuid4()
        async with db.unit_of_work() as session:
            await session.execute(text(TASK), {"id": task, "i": tree["item"], "a": tree["user"], "u": tree["user"],
                                               "c": tree["user"], "st": "UPLOADED", "t": T0, "done": T0})
        await _refused(db, "UPDATE meeting_attendance.meeting_agenda_item_upload_tasks SET status = 'PENDING', "
                           "completed_at = NULL WHERE id = :id", {"id": task},
                       "meeting_agenda_item_upload_tasks_terminal_is_final")
        await _refused(db, TASK, {"id": uuid.uuid4(), "i": tree["item"], "a": tree["user"], "u": tree["user"],
                                  "c": tree["user"], "st": "UPLOADED", "t": T0, "done": None},
                       "ck_meeting_agenda_item_upload_tasks_uploaded_has_time")


class TestFiles:
    @pytest.mark.invariant("MA-INV-26")
    @pytest.mark.parametrize("filename", ["../../etc/passwd", "a\\b.pdf", "line\nbreak.pdf", ""])
    async def test_a_filename_that_is_a_path_or_has_control_characters(self, db, tree, filename):
        await _refused(db, ATTACHMENT, _attachment(tree, f=filename),
                       "ck_meeting_agenda_item_attachments_filename_clean")

    @pytest.mark.invariant("MA-INV-26")
    async def test_a_storage_path_not_derived_from_the_id(self, db, tree):
        await _refused(db, ATTACHMENT, _attachment(tree, p=f"agenda-item/2026/03/{uuid.uuid4()}"),
                       "ck_meeting_agenda_item_attachments_storage_path_derived")
        await _refused(db, ATTACHMENT, _attachment(tree, p="../../../etc/passwd"),
                       "ck_meeting_agenda_item_attachments_storage_path_derived")

    @pytest.mark.invariant("MA-INV-26")
    async def test_a_unicode_name_is_kept(self, db, tree):
        async with db.unit_of_work() as session:
            row = _attachment(tree, f="会议纪要 v2.pdf")
            await session.execute(text(ATTACHMENT), row)
            stored = (await session.execute(text(
                "SELECT filename FROM meeting_attendance.meeting_agenda_item_attachments "
                                                 "WHERE id = :id"), {"id": row["id"]})).scalar_one()
        assert stored == "会议纪要 v2.pdf"
