"""Per-account sending limits (issue 6.4): workspaces created per account, invitation mails sent per account
across all its workspaces. Both 429 with Retry-After and a stable code; failed commands are not counted.

The slots are counted in transactions of their own (not the command's), so these tests run on a database
that really commits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.outcomes import code


@pytest.fixture
def settings(tmp_path):
    from tests.conftest import test_settings

    return test_settings(data_dir=tmp_path, workspace_creation_limit="3/hour", invitation_sender_limit="4/24hour")


@pytest.fixture
def app(settings, committed_db, clock):
    from tenet.app import create_app

    return create_app(settings, database=committed_db, clock=clock, run_background_tasks=False)


@pytest.fixture
def users(app, committed_db, clock):
    from tests.support.users import UserFactory

    return UserFactory(app, committed_db, clock)


async def test_one_account_creates_at_most_the_limit_of_workspaces(ws, owner, users, clock):
    for n in range(3):
        await ws.create_ok(owner, f"W{n}")
    refused = await ws.create(owner, "W3")
    assert refused.status_code == 429 and code(refused) == "WORKSPACE_CREATION_LIMIT_REACHED"
    assert 0 < int(refused.headers["retry-after"]) <= 3600
    assert refused.json()["limit"] == 3
    # Another account is not affected, and the window moves on.
    await ws.create_ok(await users.make(), "Theirs")
    clock.advance(timedelta(hours=1))
    await ws.create_ok(owner, "Later")


async def test_invitation_mails_are_limited_per_sender_across_workspaces(ws, owner, users):
    first, second = await ws.create_ok(owner, "One"), await ws.create_ok(owner, "Two")
    for n in range(2):
        await ws.invite_ok(owner, first, f"a{n}@example.com")
    invitation = await ws.invite_ok(owner, second, "b0@example.com")
    assert (await ws.resend(owner, invitation)).status_code == 200  # a resend is a mail too: 4 sent
    refused = await ws.invite(owner, second, "b1@example.com")
    assert refused.status_code == 429 and code(refused) == "INVITATION_SENDER_LIMIT_REACHED"
    assert int(refused.headers["retry-after"]) > 0
    refused_resend = await ws.resend(owner, invitation)
    assert code(refused_resend) == "INVITATION_SENDER_LIMIT_REACHED"
    # The limit is the sender's: another account still invites.
    other = await users.make()
    await ws.invite_ok(other, await ws.create_ok(other, "Theirs"), "c0@example.com")


async def test_a_refused_invitation_is_not_counted(ws, owner):
    workspace_id = await ws.create_ok(owner)
    await ws.invite_ok(owner, workspace_id, "dup@example.com")
    for _ in range(5):
        assert code(await ws.invite(owner, workspace_id, "dup@example.com")) == "INVITATION_ALREADY_PENDING"
    for n in range(3):
        await ws.invite_ok(owner, workspace_id, f"more{n}@example.com")
