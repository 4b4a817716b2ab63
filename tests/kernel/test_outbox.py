"""The transactional mail outbox, delivered to a real SMTP server."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from tenet.kernel import outbox
from tenet.kernel.models import EmailOutbox
from tenet.kernel.outbox import OutboxDispatcher, SmtpSender, deliver_due, enqueue_email
from tests.conftest import test_settings


async def enqueue(db, clock, to="someone@example.com", subject="Hello"):
    async with db.unit_of_work() as session:
        return await enqueue_email(session, kind="test.hello", to=to, subject=subject, body_text="Body text",
                                   now=clock.now())


async def row(db, mail_id) -> EmailOutbox:
    async with db.read_only() as session:
        return (await session.scalars(select(EmailOutbox).where(EmailOutbox.id == mail_id))).one()


@pytest.mark.invariant("KERNEL-INV-04")
async def test_pending_mail_is_delivered_over_smtp_once(db, clock, smtp_server, tmp_path):
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port)
    mail_id = await enqueue(db, clock, subject="Welcome to Tenet")
    assert await deliver_due(db, SmtpSender(settings), clock.now()) == 1
    assert await deliver_due(db, SmtpSender(settings), clock.now()) == 0  # never twice
    received = smtp_server.wait_for(1)
    assert len(received) == 1
    assert received[0]["Subject"] == "Welcome to Tenet" and received[0]["To"] == "someone@example.com"
    assert received[0].get_payload().strip() == "Body text"
    sent = await row(db, mail_id)
    assert sent.status == "sent" and sent.sent_at == clock.now() and sent.attempts == 1


async def test_mail_of_a_rolled_back_change_never_exists(db, clock):
    with pytest.raises(RuntimeError):
        async with db.unit_of_work() as session:
            await enqueue_email(session, kind="test.x", to="a@example.com", subject="s", body_text="b", now=clock.now())
            raise RuntimeError("the change failed")
    async with db.read_only() as session:
        assert (await session.execute(text("SELECT count(*) FROM kernel.email_outbox"))).scalar_one() == 0


async def test_an_unreachable_server_backs_off_and_keeps_the_mail(db, clock, tmp_path):
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=1)  # nothing listens on port 1
    mail_id = await enqueue(db, clock)
    assert await deliver_due(db, SmtpSender(settings), clock.now()) == 0
    failed_once = await row(db, mail_id)
    assert failed_once.status == "pending" and failed_once.attempts == 1
    assert failed_once.next_attempt_at > clock.now() and failed_once.last_error
    # Not due again until the back-off has passed.
    assert await deliver_due(db, SmtpSender(settings), clock.now()) == 0
    assert (await row(db, mail_id)).attempts == 1


async def test_a_mail_that_cannot_be_built_fails_alone(db, clock, smtp_server, tmp_path):
    """A malformed mail (a line break in a header) is marked failed and does not block the ones after it."""
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port)
    broken = await enqueue(db, clock, subject="Line one\nBcc: everyone@example.com")
    clock.advance(timedelta(seconds=1))
    fine = await enqueue(db, clock, subject="Fine")
    assert await deliver_due(db, SmtpSender(settings), clock.now()) == 1
    assert (await row(db, broken)).status == "failed" and (await row(db, fine)).status == "sent"
    assert [m["Subject"] for m in smtp_server.wait_for(1)] == ["Fine"]


async def test_after_max_attempts_the_mail_is_marked_failed(db, clock, tmp_path):
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=1)
    mail_id = await enqueue(db, clock)
    for _ in range(outbox.MAX_ATTEMPTS):
        await deliver_due(db, SmtpSender(settings), clock.advance(timedelta(hours=2)))
    gave_up = await row(db, mail_id)
    assert gave_up.status == "failed" and gave_up.attempts == outbox.MAX_ATTEMPTS


async def test_without_smtp_the_mail_is_logged_after_commit(db, clock, caplog):
    caplog.set_level("INFO", logger="tenet.kernel.outbox")
    async with db.unit_of_work() as session:
        await enqueue_email(session, kind="test.dev", to="dev@example.com", subject="Try it",
                            body_text="Open http://127.0.0.1:8000/x?token=abc", now=clock.now())
        assert "Try it" not in caplog.text  # not before the commit
    assert "dev@example.com" in caplog.text and "token=abc" in caplog.text


async def test_without_smtp_the_mail_stays_in_the_outbox(client, db):
    response = await client.post("/api/v1/auth/register", json={
        "email": "nosmtp@example.com", "password": "long enough password", "display_name": "N"})
    assert response.status_code == 201
    async with db.unit_of_work() as session:
        await enqueue_email(session, kind="test.kept", to="k@example.com", subject="s", body_text="b",
                            now=clock_now(client))
    async with db.read_only() as session:
        statuses = (await session.execute(text("SELECT status FROM kernel.email_outbox"))).scalars().all()
    assert statuses == ["pending"]


def clock_now(client):
    return client._transport.app.state.clock.now()  # the app's injected clock


async def test_the_dispatcher_delivers_right_after_commit(committed_db, clock, smtp_server, tmp_path):
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port)
    dispatcher = OutboxDispatcher(committed_db, settings, clock)
    dispatcher.start()
    try:
        await asyncio.sleep(0.1)  # the first round (delivering leftovers) finds nothing
        await enqueue(committed_db, clock, subject="Right away")
        for _ in range(100):
            if smtp_server.messages:
                break
            await asyncio.sleep(0.05)
    finally:
        await dispatcher.stop()
    assert [m["Subject"] for m in smtp_server.messages] == ["Right away"]


async def test_purge_removes_sent_mail_after_a_week(db, clock, smtp_server, tmp_path):
    settings = test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port)
    mail_id = await enqueue(db, clock)
    await deliver_due(db, SmtpSender(settings), clock.now())
    assert await outbox.purge_sent(db, clock.now() + timedelta(days=6)) == 0
    assert await outbox.purge_sent(db, clock.now() + timedelta(days=8)) == 1
    async with db.read_only() as session:
        assert await session.get(EmailOutbox, mail_id) is None
