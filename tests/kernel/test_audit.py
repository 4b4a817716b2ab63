"""The append-only audit writer (KERNEL-INV-01)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.context import request_id_var


async def write_one(db, clock, **data) -> None:
    async with db.unit_of_work() as session:
        await audit.record(session, action="test.thing.done", actor=Actor.user(uuid.uuid4()),
                           subject=("thing", uuid.uuid4()), scope=("workspace", uuid.uuid4()), now=clock.now(),
                           data=data)


async def test_record_writes_ids_and_the_request_id(db, clock):
    token = request_id_var.set("req-42")
    try:
        await write_one(db, clock, role="admin", ids=[uuid.UUID(int=1)])
    finally:
        request_id_var.reset(token)
    async with db.read_only() as session:
        row = (await session.execute(text(
            "SELECT action, actor_type, request_id, data FROM kernel.audit_log ORDER BY id DESC LIMIT 1"))).one()
    assert row.action == "test.thing.done" and row.actor_type == "user" and row.request_id == "req-42"
    assert row.data == {"role": "admin", "ids": ["00000000-0000-0000-0000-000000000001"]}


@pytest.mark.parametrize("key", ["token", "password", "client_secret", "display_name", "workspace_name"])
async def test_secrets_and_names_are_refused(db, clock, key):
    with pytest.raises(ValueError, match="never secrets or names"):
        await write_one(db, clock, **{key: "x"})


async def test_a_rolled_back_change_leaves_no_audit_row(db, clock):
    with pytest.raises(RuntimeError):
        async with db.unit_of_work() as session:
            await audit.record(session, action="test.rolled.back", actor=Actor.system(), subject=("t", 1),
                               now=clock.now())
            raise RuntimeError("the change failed")
    async with db.read_only() as session:
        found = (await session.execute(text(
            "SELECT count(*) FROM kernel.audit_log WHERE action = 'test.rolled.back'"))).scalar_one()
    assert found == 0


@pytest.mark.invariant("KERNEL-INV-01")
@pytest.mark.parametrize("statement", [
    "UPDATE kernel.audit_log SET action = 'rewritten'",
    "DELETE FROM kernel.audit_log",
    "TRUNCATE kernel.audit_log",
])
async def test_the_database_refuses_changing_history(db, clock, statement):
    await write_one(db, clock)
    async with db.unit_of_work() as session:
        with pytest.raises(DBAPIError, match="append-only"):
            async with session.begin_nested():
                await session.execute(text(statement))
