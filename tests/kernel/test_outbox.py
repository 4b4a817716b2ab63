"""The transactional mail outbox, delivered to a real SMTP server (aiosmtpd on 127.0.0.1).

Races between deliverers on separate connections are in tests/concurrency/test_outbox_races.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import make_url, select, text
from sqlalchemy.exc import IntegrityError

from tenet.app import create_app
from tenet.kernel import outbox
from tenet.kernel.mail import MailSettings, header_text
from tenet.kernel.models import EmailOutbox
from tenet.kernel.outbox import (
    LEASE,
    OutboxDispatcher,
    SmtpSender,
    claim_due,
    deliver_claim,
    deliver_due,
    enqueue_email,
    install_delivery,
)
from tests.conftest import test_settings
from tests.support.invariants import assert_invariants_hold
from tests.support.smtp import running_smtp_server

TOKEN = "wsi_secret-token-of-the-test"


def smtp(server) -> MailSettings:
    return MailSettings(smtp_host="127.0.0.1", smtp_port=server.port, mail_from="Tenet <no-reply@tenet.example>")


UNREACHABLE = MailSettings(smtp_host="127.0.0.1", smtp_port=1)  # nothing listens on port 1


async def enqueue(db, clock, to="someone@example.com", subject="Hello", body=f"Open /x?token={TOKEN}"):
    async with db.unit_of_work() as session:
        return await enqueue_email(session, kind="test.hello", to=to, subject=subject, body_text=body, now=clock.now())


async def row(db, mail_id) -> EmailOutbox:
    async with db.read_only() as session:
        return (await session.scalars(select(EmailOutbox).where(EmailOutbox.id == mail_id))).one()


async def insert_raw(db, clock, **values) -> uuid.UUID:
    """A row written without enqueue_email (an older version, an operator by hand)."""
    mail_id = uuid.uuid4()
    fields = {"id": mail_id, "kind": "test.raw", "to_address": "raw@example.com", "subject": "Raw",
              "body_text": "b", "now": clock.now()} | values
    async with db.unit_of_work() as session:
        await session.execute(text(
            "INSERT INTO kernel.email_outbox (id, kind, to_address, subject, body_text, status, attempts, created_at,"
            " next_attempt_at) VALUES (:id, :kind, :to_address, :subject, :body_text, 'pending', 0, :now, :now)"),
            fields)
    return mail_id


@pytest.fixture
def smtputf8_server():
    yield from running_smtp_server(smtputf8=True)


# --- delivery ---------------------------------------------------------------------------------------


@pytest.mark.invariant("KERNEL-INV-04")
async def test_a_due_mail_is_delivered_once_and_marked_sent_with_its_time(db, clock, smtp_server):
    mail_id = await enqueue(db, clock, subject="Welcome to Tenet")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 0
    (received,) = smtp_server.received
    assert received.mail_from == "no-reply@tenet.example" and received.rcpt_tos == ["someone@example.com"]
    message = received.message
    assert message["Subject"] == "Welcome to Tenet" and message["To"] == "someone@example.com"
    assert message["Message-ID"] == f"<{mail_id}@tenet.example>"  # the receiver's key to drop a repeat
    assert message.get_payload().strip() == f"Open /x?token={TOKEN}"
    sent = await row(db, mail_id)
    assert (sent.status, sent.sent_at, sent.attempts) == ("sent", clock.now(), 1)
    assert sent.claim_token is None and sent.claimed_until is None
    async with db.read_only() as session:
        await assert_invariants_hold(session, prefix="KERNEL-")


async def test_mail_of_a_rolled_back_change_never_exists(db, clock):
    with pytest.raises(RuntimeError):
        async with db.unit_of_work() as session:
            await enqueue_email(session, kind="test.x", to="a@example.com", subject="s", body_text="b", now=clock.now())
            raise RuntimeError("the change failed")
    async with db.read_only() as session:
        assert (await session.execute(text("SELECT count(*) FROM kernel.email_outbox"))).scalar_one() == 0


async def test_an_unreachable_server_backs_off_then_tries_again(db, clock):
    mail_id = await enqueue(db, clock)
    assert await deliver_due(db, SmtpSender(UNREACHABLE), clock) == 0
    failed_once = await row(db, mail_id)
    assert (failed_once.status, failed_once.attempts) == ("pending", 1) and failed_once.last_error
    assert failed_once.next_attempt_at > clock.now() and failed_once.claim_token is None
    # Not due again until the back-off has passed ...
    assert await deliver_due(db, SmtpSender(UNREACHABLE), clock) == 0
    assert (await row(db, mail_id)).attempts == 1
    # ... and then tried again.
    clock.set(failed_once.next_attempt_at)
    await deliver_due(db, SmtpSender(UNREACHABLE), clock)
    assert (await row(db, mail_id)).attempts == 2


async def test_after_max_attempts_the_mail_is_marked_failed(db, clock):
    mail_id = await enqueue(db, clock)
    for _ in range(outbox.MAX_ATTEMPTS):
        clock.advance(timedelta(hours=2))
        await deliver_due(db, SmtpSender(UNREACHABLE), clock)
    gave_up = await row(db, mail_id)
    assert gave_up.status == "failed" and gave_up.attempts == outbox.MAX_ATTEMPTS


async def test_an_undeliverable_mail_fails_alone(db, clock, smtp_server):
    """A row whose address is not one is marked failed at once and does not hold up the mail after it."""
    broken = await insert_raw(db, clock, to_address="not an address")
    clock.advance(timedelta(seconds=1))
    fine = await enqueue(db, clock, subject="Fine")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    failed = await row(db, broken)
    assert (failed.status, failed.attempts) == ("failed", 1) and "not an email address" in failed.last_error
    assert (await row(db, fine)).status == "sent"
    assert [m["Subject"] for m in smtp_server.messages] == ["Fine"]


async def test_a_subject_written_with_a_line_break_cannot_add_a_header(db, clock, smtp_server):
    """Rows not written by enqueue_email are cleaned again when the message is built."""
    await insert_raw(db, clock, subject="Line one\r\nBcc: everyone@example.com")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    (received,) = smtp_server.received
    assert received.rcpt_tos == ["raw@example.com"] and received.message["Bcc"] is None
    assert received.message["Subject"] == "Line one Bcc: everyone@example.com"


async def test_the_dispatcher_delivers_right_after_commit(committed_db, clock, smtp_server):
    dispatcher = OutboxDispatcher(committed_db, smtp(smtp_server), clock)
    with install_delivery(smtp(smtp_server), dispatcher=dispatcher):
        dispatcher.start()
        try:
            await asyncio.sleep(0.1)  # the first round (delivering leftovers) finds nothing
            await enqueue(committed_db, clock, subject="Right away")
            # Well before the dispatcher's next poll (30 s): only the after-commit wake delivers this soon.
            for _ in range(100):
                if smtp_server.messages:
                    break
                await asyncio.sleep(0.05)
        finally:
            await dispatcher.stop()
    assert [m["Subject"] for m in smtp_server.messages] == ["Right away"]


async def test_purge_removes_sent_mail_after_a_week(db, clock, smtp_server):
    mail_id = await enqueue(db, clock)
    await deliver_due(db, SmtpSender(smtp(smtp_server)), clock)
    assert await outbox.purge_sent(db, clock.now() + timedelta(days=6)) == 0
    assert await outbox.purge_sent(db, clock.now() + timedelta(days=8)) == 1
    async with db.read_only() as session:
        assert await session.get(EmailOutbox, mail_id) is None


# --- claims and leases (KERNEL-INV-04) --------------------------------------------------------------


@pytest.mark.invariant("KERNEL-INV-04")
async def test_a_claim_whose_lease_ran_out_is_picked_up_again(db, clock, smtp_server):
    """A deliverer claims a mail and dies mid-send: nobody else sends it while the lease runs; after it,
    the next deliverer does."""
    mail_id = await enqueue(db, clock, subject="Orphaned")
    dead = await claim_due(db, clock.now())
    assert [r.id for r in dead.rows] == [mail_id]
    claimed = await row(db, mail_id)
    assert claimed.claim_token == dead.token and claimed.claimed_until == clock.now() + LEASE

    clock.advance(LEASE - timedelta(seconds=1))
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 0
    assert smtp_server.received == []

    clock.advance(timedelta(seconds=1))
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    assert [m["Subject"] for m in smtp_server.messages] == ["Orphaned"]
    sent = await row(db, mail_id)
    assert (sent.status, sent.attempts, sent.claim_token) == ("sent", 1, None)


@pytest.mark.invariant("KERNEL-INV-04")
async def test_a_crash_between_send_and_mark_sends_again_with_the_same_message_id(db, clock, smtp_server):
    """At-least-once: the server accepted the mail, the deliverer died before marking it. After the lease
    it goes out again, under the same Message-ID, and the row is sent once."""
    mail_id = await enqueue(db, clock)
    dead = await claim_due(db, clock.now())
    await SmtpSender(smtp(smtp_server)).send(dead.rows[0])  # ... and the process dies here

    clock.advance(LEASE)
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    ids = [m["Message-ID"] for m in smtp_server.messages]
    assert ids == [f"<{mail_id}@tenet.example>"] * 2
    assert (await row(db, mail_id)).status == "sent"


class _DatabaseAwayAfterSend(SmtpSender):
    """Sends for real, then the database refuses every connection for `seconds` (its backends terminated,
    ALLOW_CONNECTIONS off, as during a restart of PostgreSQL or PgBouncer) while the outcome is recorded."""

    def __init__(self, settings: MailSettings, server_url: str, database: str, seconds: float) -> None:
        super().__init__(settings)
        self.server_url, self.database, self.seconds = server_url, database, seconds
        self.back: threading.Timer | None = None

    def _allow(self, allowed: bool) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as connection:
            connection.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(self.database), sql.SQL("true" if allowed else "false")))
            if not allowed:
                connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                   "AND pid <> pg_backend_pid()", (self.database,))

    async def send(self, row: EmailOutbox) -> None:
        await super().send(row)
        await asyncio.to_thread(self._allow, False)
        self.back = threading.Timer(self.seconds, self._allow, (True,))
        self.back.start()


@pytest.mark.invariant("KERNEL-INV-04")
async def test_a_database_away_while_the_outcome_is_recorded_is_waited_for_not_sent_twice(
        committed_db, clock, smtp_server, server_url, database_url):
    """The mail went out, then the database was unreachable for a moment: the outcome is recorded once it is
    back, so the mail is marked sent and never goes out again after its lease."""
    mail_id = await enqueue(committed_db, clock)
    sender = _DatabaseAwayAfterSend(smtp(smtp_server), server_url, make_url(database_url).database, seconds=1.2)
    try:
        assert await deliver_due(committed_db, sender, clock) == 1
    finally:
        if sender.back is not None:
            sender.back.join()
    sent = await row(committed_db, mail_id)
    assert (sent.status, sent.attempts, sent.claim_token) == ("sent", 1, None)
    clock.advance(LEASE)
    assert await deliver_due(committed_db, SmtpSender(smtp(smtp_server)), clock) == 0
    assert len(smtp_server.messages) == 1


@pytest.mark.invariant("KERNEL-INV-04")
async def test_a_deliverer_whose_claim_was_taken_over_cannot_record_its_outcome(db, clock, smtp_server):
    """A deliverer stalls past its lease; another claims, sends and marks the mail sent. The stalled one
    then fails against its server: its outcome is refused, the row stays as the new holder left it."""
    mail_id = await enqueue(db, clock)
    stalled = await claim_due(db, clock.now())
    clock.advance(LEASE)
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    before = await row(db, mail_id)

    assert await deliver_claim(db, SmtpSender(UNREACHABLE), clock, stalled) == 0
    after = await row(db, mail_id)
    assert (after.status, after.attempts, after.sent_at, after.last_error) == ("sent", 1, before.sent_at, None)


@pytest.mark.invariant("KERNEL-INV-04")
async def test_the_database_refuses_a_claim_on_mail_that_is_not_pending_or_without_a_lease(db, clock):
    mail_id = await enqueue(db, clock)
    for values in ("status = 'failed', claim_token = gen_random_uuid(), claimed_until = now()",
                   "claim_token = gen_random_uuid()",
                   "claimed_until = now()",
                   "status = 'sent'"):
        with pytest.raises(IntegrityError):
            async with db.unit_of_work() as session:
                await session.execute(text(f"UPDATE kernel.email_outbox SET {values} WHERE id = :id"), {"id": mail_id})


# --- what is logged -----------------------------------------------------------------------------------


async def test_without_smtp_the_mail_is_logged_in_full_after_commit(db, clock, caplog):
    caplog.set_level("INFO", logger="tenet.kernel.outbox")
    with install_delivery(MailSettings(smtp_host=None)):
        async with db.unit_of_work() as session:
            await enqueue_email(session, kind="test.dev", to="dev@example.com", subject="Try it",
                                body_text=f"Open http://127.0.0.1:8000/x?token={TOKEN}", now=clock.now())
            assert "Try it" not in caplog.text  # not before the commit
    assert "dev@example.com" in caplog.text and f"token={TOKEN}" in caplog.text


async def test_without_smtp_a_rolled_back_mail_is_not_logged(db, clock, caplog):
    caplog.set_level("DEBUG", logger="tenet.kernel.outbox")
    with install_delivery(MailSettings(smtp_host=None)), pytest.raises(RuntimeError):
        async with db.unit_of_work() as session:
            await enqueue_email(session, kind="test.dev", to="dev@example.com", subject="Never",
                                body_text=f"token={TOKEN}", now=clock.now())
            raise RuntimeError("the change failed")
    assert TOKEN not in caplog.text and "dev@example.com" not in caplog.text


@pytest.fixture
def lifespan_app(db, clock, tmp_path, caplog):
    """An API app whose lifespan runs (the boundary that installs the mail delivery), without background
    tasks: an API process, or any process, that runs no dispatcher."""
    root = logging.getLogger()

    def make(**settings):
        app = create_app(test_settings(data_dir=tmp_path, **settings), database=db, clock=clock,
                         run_background_tasks=False)
        root.addHandler(caplog.handler)  # configure_logging replaced the root's handlers, caplog's too
        return app

    yield make
    root.removeHandler(caplog.handler)


async def test_an_api_process_without_smtp_logs_the_mail(lifespan_app, db, clock, caplog):
    app = lifespan_app()
    async with app.router.lifespan_context(app):
        caplog.set_level("INFO", logger="tenet.kernel.outbox")
        mail_id = await enqueue(db, clock)
    assert f"token={TOKEN}" in caplog.text
    assert (await row(db, mail_id)).status == "pending"


async def test_with_smtp_and_no_dispatcher_the_mail_text_is_never_logged(lifespan_app, db, clock, caplog):
    app = lifespan_app(smtp_host="127.0.0.1", smtp_port=1)
    async with app.router.lifespan_context(app):
        caplog.set_level("DEBUG")
        mail_id = await enqueue(db, clock, subject="Secret subject")
    assert TOKEN not in caplog.text and "Secret subject" not in caplog.text
    assert (await row(db, mail_id)).status == "pending"  # the periodic job delivers it


# --- what goes on the wire ----------------------------------------------------------------------------


def test_header_text_removes_bidi_and_control_characters_and_keeps_spelling():
    assert header_text("Eve\u202e\u2066lin\u2069k\u200e\u200f\u061c\ufeff\u0085x\u009b\x07 done") == "Evelink x done"
    assert header_text("one\r\ntwo\tthree\u2028four") == "one two three four"
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # the zero-width non-joiner is spelling
    assert header_text(persian) == persian
    assert header_text("a" * 10, limit=5) == "aaaa…"


async def test_a_subject_arrives_without_bidi_or_c1_characters(db, clock, smtp_server):
    await enqueue(db, clock, subject="Mallory\u202eexe.txt\u009b invited you to Q\u2066x\u2069 on Tenet")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    (message,) = smtp_server.messages
    assert message["Subject"] == "Malloryexe.txt invited you to Qx on Tenet"


async def test_an_idn_domain_is_sent_in_punycode(db, clock, smtp_server):
    mail_id = await enqueue(db, clock, to="user@bücher.example")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 1
    (received,) = smtp_server.received
    assert received.rcpt_tos == ["user@xn--bcher-kva.example"]
    assert received.message["To"] == "user@xn--bcher-kva.example"
    assert "SMTPUTF8" not in received.mail_options
    assert (await row(db, mail_id)).to_address == "user@bücher.example"  # stored as typed


async def test_a_non_ascii_local_part_goes_out_with_smtputf8_where_the_server_offers_it(db, clock, smtputf8_server):
    await enqueue(db, clock, to="jürgen@bücher.example")
    assert await deliver_due(db, SmtpSender(smtp(smtputf8_server)), clock) == 1
    (received,) = smtputf8_server.received
    assert received.rcpt_tos == ["jürgen@xn--bcher-kva.example"] and "SMTPUTF8" in received.mail_options


async def test_a_non_ascii_local_part_fails_clearly_where_the_server_lacks_smtputf8(db, clock, smtp_server):
    mail_id = await enqueue(db, clock, to="jürgen@example.com")
    assert await deliver_due(db, SmtpSender(smtp(smtp_server)), clock) == 0
    failed = await row(db, mail_id)
    assert (failed.status, failed.attempts) == ("failed", 1) and "SMTPUTF8" in failed.last_error
    assert smtp_server.received == []
