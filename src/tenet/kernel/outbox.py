"""The transactional mail outbox.

A service writes mail with `enqueue_email` in the same transaction as the change that causes it, so mail
exists exactly when the change committed. After commit the process's dispatcher is woken and delivers
due rows over SMTP (`TENET_SMTP_HOST`); without SMTP the mail stays in the outbox, logged, for an
operator or a later configuration to deliver. Any number of processes deliver at once: rows are
claimed with `FOR UPDATE SKIP LOCKED`, so none is sent twice by two processes.

Without SMTP (development) each mail is also logged in full after commit, as API.md promises ("kept in
the outbox and logged"), so someone trying Tenet locally can follow an invitation link. That log line
carries whatever the mail carries (links with tokens): production configures SMTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid

import aiosmtplib
from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tenet.db.database import Database, after_commit
from tenet.kernel.clock import Clock
from tenet.kernel.models import EmailOutbox
from tenet.kernel.settings import KernelSettings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BATCH = 20
SENT_RETENTION = timedelta(days=7)
POLL_INTERVAL_SECONDS = 30.0

_dispatcher: OutboxDispatcher | None = None


async def enqueue_email(session: AsyncSession, *, kind: str, to: str, subject: str, body_text: str,
                        now: datetime) -> uuid.UUID:
    """Write one mail into the outbox, in the caller's transaction."""
    mail_id = uuid.uuid4()
    await session.execute(insert(EmailOutbox).values(
        id=mail_id, kind=kind, to_address=to, subject=subject, body_text=body_text, status="pending",
        attempts=0, created_at=now, next_attempt_at=now,
    ))

    async def released() -> None:
        if _dispatcher is not None:
            _dispatcher.wake()
        else:
            log.info("mail kept in the outbox (no TENET_SMTP_HOST): to %s, subject %r\n%s", to, subject, body_text,
                     extra={"mail_id": str(mail_id), "mail_kind": kind})

    after_commit(session, released)
    return mail_id


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempts - 1)))


class SmtpSender:
    def __init__(self, settings: KernelSettings) -> None:
        self.settings = settings

    async def send(self, row: EmailOutbox) -> None:
        message = EmailMessage()
        message["From"] = self.settings.mail_from
        message["To"] = row.to_address
        message["Subject"] = row.subject
        message["Message-ID"] = make_msgid(idstring=str(row.id))
        message.set_content(row.body_text)
        password = self.settings.smtp_password.get_secret_value() if self.settings.smtp_password else None
        await aiosmtplib.send(
            message, hostname=self.settings.smtp_host, port=self.settings.smtp_port,
            username=self.settings.smtp_username, password=password,
            start_tls=self.settings.smtp_starttls, timeout=30,
        )


async def deliver_due(db: Database, sender: SmtpSender, now: datetime) -> int:
    """Send every due pending mail; answer how many were sent."""
    sent = 0
    while True:
        async with db.unit_of_work() as session:
            rows = list((await session.scalars(
                select(EmailOutbox)
                .where(EmailOutbox.status == "pending", EmailOutbox.next_attempt_at <= now)
                .order_by(EmailOutbox.next_attempt_at)
                .limit(BATCH)
                .with_for_update(skip_locked=True)
            )).all())
            for row in rows:
                try:
                    await sender.send(row)
                except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                    # The server or the network: try again later, a bounded number of times.
                    attempts = row.attempts + 1
                    gave_up = attempts >= MAX_ATTEMPTS
                    log.warning("outbox mail %s (%s) failed, attempt %d: %s", row.id, row.kind, attempts,
                                type(exc).__name__)
                    await session.execute(update(EmailOutbox).where(EmailOutbox.id == row.id).values(
                        attempts=attempts, last_error=f"{type(exc).__name__}: {exc}"[:500],
                        status="failed" if gave_up else "pending", next_attempt_at=now + _backoff(attempts),
                    ))
                except Exception as exc:
                    # The mail itself cannot be built or sent (a malformed header, say): retrying cannot
                    # help, and leaving it pending would put it first in line forever, blocking the rest.
                    log.exception("outbox mail %s (%s) cannot be sent; marked failed", row.id, row.kind)
                    await session.execute(update(EmailOutbox).where(EmailOutbox.id == row.id).values(
                        attempts=row.attempts + 1, last_error=f"{type(exc).__name__}: {exc}"[:500], status="failed",
                    ))
                else:
                    sent += 1
                    await session.execute(update(EmailOutbox).where(EmailOutbox.id == row.id).values(
                        attempts=row.attempts + 1, status="sent", sent_at=now, last_error=None))
        if len(rows) < BATCH:
            return sent


async def count_by_status(connection: AsyncConnection) -> dict[str, int]:
    """Outbox mail per status (for /metrics)."""
    rows = await connection.execute(text("SELECT status, count(*) FROM kernel.email_outbox GROUP BY 1"))
    return {status: count for status, count in rows}


async def purge_sent(db: Database, now: datetime) -> int:
    """Sent mail may hold tokens (invitation links); keep it only a week."""
    async with db.unit_of_work() as session:
        result = await session.execute(
            text("DELETE FROM kernel.email_outbox WHERE status = 'sent' AND sent_at < :cutoff"),
            {"cutoff": now - SENT_RETENTION},
        )
        return result.rowcount or 0


class OutboxDispatcher:
    """A background loop in each API or worker process: delivers when woken, and polls as a safety net."""

    def __init__(self, db: Database, settings: KernelSettings, clock: Clock) -> None:
        self.db = db
        self.sender = SmtpSender(settings)
        self.clock = clock
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._event.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), POLL_INTERVAL_SECONDS)
            self._event.clear()
            try:
                await deliver_due(self.db, self.sender, self.clock.now())
            except Exception:
                log.exception("outbox delivery round failed; retrying on the next round")

    def start(self) -> None:
        global _dispatcher
        _dispatcher = self
        self._task = asyncio.create_task(self._run(), name="outbox-dispatcher")
        self._event.set()  # deliver whatever was left pending by an earlier run

    async def stop(self) -> None:
        global _dispatcher
        if _dispatcher is self:
            _dispatcher = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
