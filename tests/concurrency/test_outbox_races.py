"""Two mail deliverers on their own engines race over committed outbox rows against a slow real SMTP server."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from sqlalchemy import text

from tenet.db.database import Database
from tenet.kernel.mail import MailSettings
from tenet.kernel.outbox import SmtpSender, deliver_due, enqueue_email
from tests.support.invariants import assert_invariants_hold
from tests.support.smtp import running_smtp_server

MAILS = 12
BATCH = 3  # smaller than the mail count, so each deliverer claims again while the other is still sending


@pytest.fixture
def slow_smtp_server():
    """0.3 s per message, like a distant server: a claim is still being sent when the other deliverer looks."""
    yield from running_smtp_server(delay=0.3)


@pytest.fixture
async def two_deliverers(database_url):
    """Two Database handles on engines of their own, as two processes would have."""
    handles = [Database.from_url(database_url, pool_size=2, max_overflow=0, application_name=f"deliverer-{i}")
               for i in range(2)]
    yield handles
    for handle in handles:
        await handle.dispose()


@pytest.mark.invariant("KERNEL-INV-04")
async def test_two_deliverers_send_each_mail_exactly_once(committed_db, two_deliverers, clock, slow_smtp_server):
    async with committed_db.unit_of_work() as session:
        ids = [await enqueue_email(session, kind="test.race", to=f"r{i}@example.com", subject=f"Mail {i}",
                                   body_text="b", now=clock.now()) for i in range(MAILS)]
    sender = SmtpSender(MailSettings(smtp_host="127.0.0.1", smtp_port=slow_smtp_server.port,
                                     mail_from="Tenet <no-reply@tenet.example>"))

    counts = await asyncio.gather(*(deliver_due(db, sender, clock, batch=BATCH) for db in two_deliverers))

    received = Counter(m["Message-ID"] for m in slow_smtp_server.messages)
    assert received == Counter({f"<{mail_id}@tenet.example>": 1 for mail_id in ids})
    assert sum(counts) == MAILS and min(counts) > 0, counts  # both delivered: it was a race
    async with committed_db.read_only() as session:
        statuses = (await session.execute(text(
            "SELECT status, attempts, claim_token IS NULL FROM kernel.email_outbox"))).all()
        assert set(statuses) == {("sent", 1, True)} and len(statuses) == MAILS
        await assert_invariants_hold(session, prefix="KERNEL-")
