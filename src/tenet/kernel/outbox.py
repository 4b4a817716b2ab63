"""The transactional mail outbox.

A service writes mail with `enqueue_email` in the same transaction as the change that causes it, so mail
exists exactly when the change committed. Rows are then delivered over SMTP by `deliver_due`, run by a
dispatcher in each API process (woken right after commit) and by the worker's periodic job (the safety
net), any number of them at once.

Delivery is **at-least-once**. A deliverer claims a batch of due rows in one short transaction (`FOR UPDATE
SKIP LOCKED` + `UPDATE .. RETURNING`): it writes its own `claim_token` and a lease, `claimed_until`. It
sends outside any transaction, then marks each row sent (or failed, or due again after a back-off) in a
short transaction conditioned on its claim token. While a lease runs no other deliverer takes the row;
once it has run out (the process died or hung), the row is claimable again. So a crash between the SMTP
server accepting a mail and the row being marked sends it again after the lease. Each mail carries a
Message-ID derived from its row id (`<row-id@sender-domain>`), the same on every attempt, by which
receivers can recognise the duplicate. A send starts only when it can end (its timeout) well inside the
lease, so a live deliverer never sends a row whose claim may already be someone else's.

What happens after commit depends on one thing, set once per process by its boundary: `install_delivery`
with the process's `MailSettings` (built from the service settings by the API lifespan, the worker, the
CLI) and, where the process runs one, its dispatcher.

- SMTP configured: the mail's text is never logged; the local dispatcher, if any, is woken. Processes
  without a dispatcher (the worker, a CLI command) leave the mail to the periodic job.
- SMTP not configured (development): the mail stays `pending` and is logged in full after commit, as
  API.md promises ("kept in the outbox and logged"), so someone trying Tenet locally can follow an
  invitation link. That log line carries whatever the mail carries (links with tokens).
- Nothing installed (a script, a test): nothing is logged; not knowing is treated like production.

A rolled-back transaction leaves neither a row nor a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr

import aiosmtplib
from sqlalchemy import or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tenet.db.database import Database, after_commit
from tenet.kernel.clock import Clock
from tenet.kernel.db_errors import once_the_database_answers
from tenet.kernel.mail import MailSettings, UndeliverableMail, address_domain, header_text, wire_address
from tenet.kernel.models import EmailOutbox
from tenet.kernel.statements import Unit, statements

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BATCH = 20
SENT_RETENTION = timedelta(days=7)
POLL_INTERVAL_SECONDS = 30.0
# One mail, connection to QUIT, at most this long (the whole exchange, not each command).
SEND_TIMEOUT_SECONDS = 30.0
# How long a claim keeps other deliverers away. A crashed deliverer's mail waits this long.
LEASE = timedelta(minutes=5)
# A send starts only if it ends (at worst, by its timeout) this long before the lease does, so clocks of
# different processes may disagree by up to this much.
LEASE_MARGIN = timedelta(seconds=30)


# --- writing mail -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Delivery:
    settings: MailSettings
    dispatcher: OutboxDispatcher | None


_delivery: _Delivery | None = None


@contextlib.contextmanager
def install_delivery(settings: MailSettings, *, dispatcher: OutboxDispatcher | None = None) -> Iterator[None]:
    """Tell this process how its mail leaves (see the module docstring); the boundary enters this once at
    startup and leaves it at shutdown. The previous installation comes back on exit (nested test apps)."""
    global _delivery
    previous, _delivery = _delivery, _Delivery(settings, dispatcher)
    try:
        yield
    finally:
        _delivery = previous


_ENQUEUE = """
    INSERT INTO kernel.email_outbox (id, kind, to_address, subject, body_text, status, attempts, created_at,
                                     next_attempt_at)
    VALUES (%(id)s, %(kind)s, %(to)s, %(subject)s, %(body)s, 'pending', 0, %(now)s, %(now)s)
"""


async def enqueue_email(session: Unit, *, kind: str, to: str, subject: str, body_text: str,
                        now: datetime) -> uuid.UUID:
    """Write one mail into the outbox, in the caller's transaction.

    The subject is made one safe line here, for every domain: no line breaks, no control or bidi
    characters (`mail.header_text`), whatever user-supplied names it was built from.
    """
    mail_id = uuid.uuid4()
    subject = header_text(subject)
    await (await statements(session)).execute(_ENQUEUE, {
        "id": mail_id, "kind": kind, "to": to, "subject": subject, "body": body_text, "now": now})

    async def released() -> None:
        delivery = _delivery
        if delivery is None:
            return
        if not delivery.settings.smtp_configured:
            log.info("mail kept in the outbox (no TENET_SMTP_HOST): to %s, subject %r\n%s", to, subject, body_text,
                     extra={"mail_id": str(mail_id), "mail_kind": kind})
        elif delivery.dispatcher is not None:
            delivery.dispatcher.wake()

    after_commit(session, released)
    return mail_id


# --- sending one mail ---------------------------------------------------------------------------------


def build_message(row: EmailOutbox, settings: MailSettings) -> tuple[EmailMessage, str, str]:
    """The message and its envelope (sender, recipient). Raises UndeliverableMail for a bad address."""
    recipient = wire_address(row.to_address)
    sender = wire_address(parseaddr(settings.mail_from)[1])
    message = EmailMessage()
    message["From"] = settings.mail_from
    message["To"] = recipient
    # Again here, for rows written before enqueue_email cleaned subjects (or by hand).
    message["Subject"] = header_text(row.subject)
    message["Date"] = format_datetime(row.created_at)
    # The same on every attempt: at-least-once delivery lets receivers drop a repeat by this id.
    message["Message-ID"] = f"<{row.id}@{address_domain(settings.mail_from)}>"
    message.set_content(row.body_text)
    return message, sender, recipient


class SmtpSender:
    def __init__(self, settings: MailSettings) -> None:
        if not settings.smtp_configured:
            raise ValueError("SmtpSender needs an SMTP host")
        self.settings = settings

    async def send(self, row: EmailOutbox) -> None:
        message, sender, recipient = build_message(row, self.settings)
        async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
            try:
                await aiosmtplib.send(
                    message, sender=sender, recipients=[recipient],
                    hostname=self.settings.smtp_host, port=self.settings.smtp_port,
                    username=self.settings.smtp_username, password=self.settings.smtp_password,
                    start_tls=self.settings.smtp_starttls, timeout=SEND_TIMEOUT_SECONDS,
                )
            except aiosmtplib.SMTPNotSupported as exc:
                if not (sender + recipient).isascii():
                    # A non-ASCII local part needs SMTPUTF8 (RFC 6531); a server without it never will.
                    raise UndeliverableMail(
                        "the address has a non-ASCII local part and the SMTP server does not offer SMTPUTF8"
                    ) from exc
                raise


# --- delivering due mail ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """Rows one deliverer holds until `until` (or until it marks them), identified by `token`."""

    token: uuid.UUID
    until: datetime
    rows: list[EmailOutbox]


async def claim_due(db: Database, now: datetime, *, limit: int = BATCH) -> Claim:
    """Claim up to `limit` due pending rows that nobody holds (no claim, or one whose lease ran out), in
    one short transaction. SKIP LOCKED lets concurrent claims take disjoint rows without waiting; the lease
    condition keeps rows claimed by a committed claim away from everyone else."""
    token, until = uuid.uuid4(), now + LEASE
    due = (
        select(EmailOutbox.id)
        .where(EmailOutbox.status == "pending", EmailOutbox.next_attempt_at <= now,
               or_(EmailOutbox.claimed_until.is_(None), EmailOutbox.claimed_until <= now))
        .order_by(EmailOutbox.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    async with db.unit_of_work() as session:
        rows = list((await session.scalars(
            update(EmailOutbox)
            .where(EmailOutbox.id.in_(due.scalar_subquery()))
            .values(claim_token=token, claimed_until=until)
            .returning(EmailOutbox)
            .execution_options(synchronize_session=False)
        )).all())
    rows.sort(key=lambda row: (row.next_attempt_at, row.created_at))
    return Claim(token=token, until=until, rows=rows)


async def _finish(db: Database, row: EmailOutbox, token: uuid.UUID, **values: object) -> bool:
    """Record the outcome of one send and drop the claim, only while the claim is still ours (see _record).
    The database away for a moment is waited for: left unrecorded, the mail would go out again after its lease."""
    return await once_the_database_answers(lambda: _record(db, row, token, **values),
                                           what=f"outbox mail {row.id}'s outcome")


async def _record(db: Database, row: EmailOutbox, token: uuid.UUID, **values: object) -> bool:
    """Record the outcome of one send and drop the claim, only while the claim is still ours: a deliverer
    whose lease ran out and was taken over must not overwrite what the new holder records."""
    async with db.unit_of_work() as session:
        result = await session.execute(
            update(EmailOutbox)
            .where(EmailOutbox.id == row.id, EmailOutbox.claim_token == token)
            .values(claim_token=None, claimed_until=None, **values)
        )
    if getattr(result, "rowcount", 0) != 1:
        log.warning("outbox mail %s (%s): claim lost before its outcome was recorded", row.id, row.kind)
        return False
    return True


async def _release(db: Database, token: uuid.UUID) -> None:
    """Give back rows of a claim that were not attempted, so the next round takes them at once."""
    async with db.unit_of_work() as session:
        await session.execute(
            update(EmailOutbox).where(EmailOutbox.claim_token == token).values(claim_token=None, claimed_until=None)
        )


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempts - 1)))


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


async def deliver_claim(db: Database, sender: SmtpSender, clock: Clock, claim: Claim) -> int:
    """Send the claimed rows one by one, outside any transaction; answer how many were sent."""
    sent = 0
    started = time.monotonic()
    # The last moment a send may start: it then ends, at worst by its timeout, a margin before the lease.
    latest_start = (LEASE - LEASE_MARGIN).total_seconds() - SEND_TIMEOUT_SECONDS
    for row in claim.rows:
        if time.monotonic() - started > latest_start:
            await _release(db, claim.token)
            log.info("outbox: a slow round gave back the rest of its claim")
            break
        attempts = row.attempts + 1
        try:
            await sender.send(row)
        except UndeliverableMail as exc:
            log.warning("outbox mail %s (%s) is undeliverable; marked failed: %s", row.id, row.kind, exc)
            await _finish(db, row, claim.token, attempts=attempts, status="failed", last_error=_error(exc))
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            # The server or the network: try again later, a bounded number of times.
            gave_up = attempts >= MAX_ATTEMPTS
            log.warning("outbox mail %s (%s) failed, attempt %d: %s", row.id, row.kind, attempts, type(exc).__name__)
            await _finish(db, row, claim.token, attempts=attempts, last_error=_error(exc),
                          status="failed" if gave_up else "pending",
                          next_attempt_at=clock.now() + _backoff(attempts))
        except Exception as exc:
            # The mail itself cannot be built or sent: retrying cannot help, and leaving it pending would
            # put it first in line forever, blocking the rest.
            log.exception("outbox mail %s (%s) cannot be sent; marked failed", row.id, row.kind)
            await _finish(db, row, claim.token, attempts=attempts, status="failed", last_error=_error(exc))
        else:
            if await _finish(db, row, claim.token, attempts=attempts, status="sent", sent_at=clock.now(),
                             last_error=None):
                sent += 1
    return sent


async def deliver_due(db: Database, sender: SmtpSender, clock: Clock, *, batch: int = BATCH) -> int:
    """Claim, send and mark due mail until none is left; answer how many this call sent."""
    sent = 0
    while True:
        claim = await claim_due(db, clock.now(), limit=batch)
        sent += await deliver_claim(db, sender, clock, claim)
        if len(claim.rows) < batch:
            return sent


async def count_by_status(connection: AsyncConnection) -> dict[str, int]:
    """Outbox mail per status (for /metrics)."""
    rows = await connection.execute(text("SELECT status, count(*) FROM kernel.email_outbox GROUP BY 1"))
    return {status: count for status, count in rows}


async def due_backlog(connection: AsyncConnection, now: datetime) -> tuple[int, float]:
    """Pending mail due now (whether or not a deliverer holds it) and how long (seconds) the longest-waiting of it
    has been due (for /metrics: a backlog that only grows means no deliverer runs or SMTP refuses). Due is
    `next_attempt_at` as `claim_due` reads it, on the service's clock; a mail backing off after a failed attempt
    is not due until its next attempt. Read through the partial index on due pending mail."""
    row = (await connection.execute(text(
        "SELECT count(*), min(next_attempt_at) FROM kernel.email_outbox "
        "WHERE status = 'pending' AND next_attempt_at <= :now"), {"now": now})).one()
    count, oldest = row
    waited = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
    return int(count), waited


async def purge_sent(db: Database, now: datetime) -> int:
    """Sent mail may hold tokens (invitation links); keep it only a week."""
    async with db.unit_of_work() as session:
        result = await session.execute(
            text("DELETE FROM kernel.email_outbox WHERE status = 'sent' AND sent_at < :cutoff"),
            {"cutoff": now - SENT_RETENTION},
        )
        return int(getattr(result, "rowcount", 0) or 0)


class OutboxDispatcher:
    """A background loop in an API process: delivers when woken after commit, and polls as a safety net."""

    def __init__(self, db: Database, settings: MailSettings, clock: Clock) -> None:
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
                await deliver_due(self.db, self.sender, self.clock)
            except Exception:
                log.exception("outbox delivery round failed; retrying on the next round")

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-dispatcher")
        self._event.set()  # deliver whatever was left pending by an earlier run

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
