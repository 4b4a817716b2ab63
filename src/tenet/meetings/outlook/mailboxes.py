"""Sources (spec layer 1): mailboxes, their access check and the operator's resync (docs/design/outlook.md §7).

Adding a mailbox asks Graph first, before any transaction is open: `GET /users/{address}` (the directory) and then
`GET /users/{id}/events?$top=1` (the mailbox data Exchange may refuse). A 403 `ErrorAccessDenied` (Exchange RBAC for
Applications, an Application Access Policy) or an unknown mailbox is not an error of the request: it is stored as
the mailbox's state with Graph's code, request-id and a hint, and the answer is 201 with that state. The worker never
retries such a mailbox on its own (no retry storm); `POST /mailboxes/{id}/resync` puts it back to PENDING."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.emails import InvalidEmail, clean_email, normalize_email
from tenet.kernel.errors import DomainError, PreconditionFailed
from tenet.kernel.reads import Runner
from tenet.kernel.transitions import Refusal, transition
from tenet.meetings import audit
from tenet.meetings.outlook import errors, lifecycles, policy, queries, webhook
from tenet.meetings.outlook import graph as graph_client
from tenet.meetings.outlook.graph import GraphClient, GraphError
from tenet.meetings.outlook.models import MAILBOX_ADDRESS_LIVE, OutlookDeltaCursor, OutlookMailbox, OutlookNotification
from tenet.meetings.settings import MeetingSettings

HINT_DENIED = ("Exchange refuses this application the mailbox (RBAC for Applications or an Application Access "
               "Policy scopes the app's Calendars.Read). Add the mailbox to the app's management scope, allow for the "
               "change to take effect (it can take over an hour), then POST /outlook/mailboxes/{id}/resync.")
HINT_INVALID = ("Graph knows no mailbox at this address, or the mailbox is not enabled for the REST API (on-premises, "
                "unlicensed or inactive). Check the address and the mailbox, then POST /outlook/mailboxes/{id}/resync.")
# Stored by the delta round (sync.py) and a binding's run (runs.py) when Graph refuses or fails mid-round.
HINT_DENIED_IN_ROUND = "Exchange refuses this app the mailbox: see POST /outlook/mailboxes/{id}/resync"
HINT_ROUND_FAILED = "Graph failed during a delta round; the job retries"
# Every hint the service stores, by a stable code: the API answers the English text (`last_error_hint`); the console
# says the hint of a code in the viewer's language (tenet.meetings.pages.outlook.HINT_WORDS).
HINTS = {"ACCESS_DENIED": HINT_DENIED, "INVALID": HINT_INVALID, "ACCESS_DENIED_IN_ROUND": HINT_DENIED_IN_ROUND,
         "ROUND_FAILED": HINT_ROUND_FAILED}
_HINT_CODES = {text: code for code, text in HINTS.items()}


def hint_code(hint: str | None) -> str | None:
    """The code of a stored hint this service wrote; None for no hint or one it does not know."""
    return _HINT_CODES.get(hint) if hint else None


def normalise(address: str) -> str:
    """The platform's one email rule (kernel.emails, `email-v1`: checked, NFKC, trimmed, lower-case; Exchange
    compares local parts case-insensitively too), so a mailbox and an account with one address compare equal."""
    try:
        return normalize_email(clean_email(address))
    except InvalidEmail:
        raise errors.MailboxAddressInvalid() from None


@dataclass(frozen=True)
class Access:
    """What the access check found: the state to store and, unless OK, Graph's error."""

    state: str
    graph_user_id: str | None = None
    error: GraphError | None = None
    hint: str | None = None


async def check_access(graph: GraphClient, address: str) -> Access:
    """Two reads; a refused or unknown mailbox is an answer, anything else Graph does wrong is GraphUnavailable."""
    try:
        user = await graph.user(address)
    except GraphError as exc:
        if exc.mailbox_missing:
            return Access("INVALID", error=exc, hint=HINT_INVALID)
        if exc.access_denied:
            return Access("ACCESS_DENIED", error=exc, hint=HINT_DENIED)
        raise _unavailable(exc) from exc
    user_id = str(user.get("id") or "") or None
    try:
        await graph.first_event(user_id or address)
    except GraphError as exc:
        if exc.access_denied:
            return Access("ACCESS_DENIED", user_id, exc, HINT_DENIED)
        if exc.mailbox_missing:
            return Access("INVALID", user_id, exc, HINT_INVALID)
        raise _unavailable(exc) from exc
    return Access("OK", user_id)


async def check_access_with_policy(runner: Runner, settings: MeetingSettings, address: str) -> Access:
    """The access check as adding a mailbox runs it (the API's route and the console's form): under the stored
    policy's concurrency, with two attempts and short retry sleeps, before any transaction is open."""
    rules = policy.Policy.from_row(await queries.policy(runner))
    async with graph_client.client_for(settings, max_concurrent=rules.max_concurrent_requests, max_attempts=2,
                                       retry_base_seconds=rules.retry_base_seconds, max_retry_sleep=2.0) as client:
        return await check_access(client, address)


def _unavailable(exc: GraphError) -> errors.GraphUnavailable:
    return errors.GraphUnavailable(graph_status=exc.status, graph_code=exc.code, graph_request_id=exc.request_id)


def error_columns(access: Access, now: datetime) -> dict[str, object]:
    if access.error is None:
        return {"last_error_code": None, "last_error_request_id": None, "last_error_hint": None,
                "last_error_at": None}
    return {"last_error_code": access.error.code, "last_error_request_id": access.error.request_id,
            "last_error_hint": access.hint, "last_error_at": now}


async def add_mailbox(session: AsyncSession, *, principal_id: uuid.UUID, address: str, kind: str, access: Access,
                      now: datetime) -> OutlookMailbox:
    """Store the mailbox with what the access check found, its empty delta cursor, and the audit row (MA-INV-40).
    A live mailbox of the same address: 409 OUTLOOK_MAILBOX_EXISTS (pre-check, and the index for races)."""
    existing = await session.scalar(select(OutlookMailbox.id).where(
        OutlookMailbox.address == address, OutlookMailbox.state != "DISABLED"))
    if existing is not None:
        raise errors.MailboxExists(mailbox_id=str(existing))
    row = OutlookMailbox(id=uuid.uuid4(), address=address, kind=kind, graph_user_id=access.graph_user_id,
                         state=access.state, created_by_id=principal_id, created_at=now, updated_at=now, version=1,
                         **error_columns(access, now))
    await add_unique(session, row, on_violation={MAILBOX_ADDRESS_LIVE: lambda: errors.MailboxExists()})
    session.add(OutlookDeltaCursor(mailbox_id=row.id))
    await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_ADDED, resource=audit.Resource.OUTLOOK_MAILBOX,
                       resource_id=row.id, now=now, actor=Actor.user(principal_id),
                       after={"kind": kind, "state": access.state, "graph_error_code": access.error.code
                              if access.error else None})
    if access.state == "OK":  # the first pass fills the candidate pool
        await webhook.defer_in(session, webhook.DELTA_TASK, queueing_lock=webhook.delta_lock(row.id),
                               mailbox_id=str(row.id))
    return row


def _refuse(refusal: Refusal[OutlookMailbox]) -> DomainError:
    if refusal.reason == "missing":
        return errors.MailboxNotFound()
    if refusal.reason == "version":  # If-Match named another version
        return PreconditionFailed(current_version=refusal.version)
    return errors.MailboxDisabled(current_state=refusal.status)


async def request_resync(session: AsyncSession, *, principal_id: uuid.UUID, mailbox_id: uuid.UUID,
                         now: datetime) -> OutlookMailbox:
    """The operator's full pass: the cursor is dropped (the next round starts a new delta over the window); a
    denied or invalid mailbox goes back to PENDING so the worker checks its access again. Audited."""
    row = await session.scalar(select(OutlookMailbox).where(OutlookMailbox.id == mailbox_id).with_for_update()
                               .execution_options(populate_existing=True))
    if row is None:
        raise errors.MailboxNotFound()
    if row.state == "DISABLED":
        raise errors.MailboxDisabled(current_state=row.state)
    before = row.state
    if row.state in ("ACCESS_DENIED", "INVALID"):
        row = await transition(session, lifecycles.MAILBOX, "recheck", model=OutlookMailbox, id=mailbox_id,
                               values={"updated_at": now}, refuse=_refuse, status_attr="state")
    await session.execute(update(OutlookDeltaCursor).where(OutlookDeltaCursor.mailbox_id == mailbox_id).values(
        next_link=None, delta_link=None, full_pass_requested_at=now))
    await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_RESYNC_REQUESTED,
                       resource=audit.Resource.OUTLOOK_MAILBOX, resource_id=mailbox_id, now=now,
                       actor=Actor.user(principal_id), before={"state": before}, after={"state": row.state})
    if row.state in ("PENDING", "OK", "DEGRADED"):
        await webhook.defer_in(session, webhook.DELTA_TASK, queueing_lock=webhook.delta_lock(mailbox_id),
                               mailbox_id=str(mailbox_id))
    return row


async def request_replay(session: AsyncSession, *, principal_id: uuid.UUID, mailbox_id: uuid.UUID, since: datetime,
                         now: datetime) -> int:
    """The operator's replay: the mailbox's stored notifications received since `since` (kept 7 days) are processed
    again (their delta rounds follow). Audited; answers how many were queued again."""
    row = await session.scalar(select(OutlookMailbox).where(OutlookMailbox.id == mailbox_id).with_for_update())
    if row is None:
        raise errors.MailboxNotFound()
    if row.state == "DISABLED":
        raise errors.MailboxDisabled(current_state=row.state)
    result = await session.execute(update(OutlookNotification).where(
        OutlookNotification.mailbox_id == mailbox_id, OutlookNotification.received_at >= since,
        OutlookNotification.status != "PENDING").values(status="PENDING", processed_at=None))
    count = int(result.rowcount or 0)  # type: ignore[attr-defined]
    await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_REPLAY_REQUESTED,
                       resource=audit.Resource.OUTLOOK_MAILBOX, resource_id=mailbox_id, now=now,
                       actor=Actor.user(principal_id), after={"since": since, "notifications": count})
    await webhook.defer_in(session, webhook.PROCESS_TASK, queueing_lock=webhook.PROCESS_LOCK)
    return count


async def disable(session: AsyncSession, *, principal_id: uuid.UUID, mailbox_id: uuid.UUID, now: datetime,
                  expected_version: int | None = None) -> OutlookMailbox:
    """The operator stops reading a mailbox: DISABLED (terminal; its address may be added again as a new source).
    No Graph call here: the subscriptions job deletes its Graph subscription at its next pass (Tenet's own object,
    the only kind of write Tenet ever sends to Graph). Bindings whose source it was stay as they are and stop
    syncing until taken over from another mailbox. Audited (MA-INV-40)."""
    before = await session.scalar(select(OutlookMailbox.state).where(OutlookMailbox.id == mailbox_id))
    row = await transition(session, lifecycles.MAILBOX, "disable", model=OutlookMailbox, id=mailbox_id,
                           values={"updated_at": now}, expected_version=expected_version, refuse=_refuse,
                           status_attr="state")
    await audit.record(session, action=audit.Action.OUTLOOK_MAILBOX_DISABLED, resource=audit.Resource.OUTLOOK_MAILBOX,
                       resource_id=mailbox_id, now=now, actor=Actor.user(principal_id), before={"state": before},
                       after={"state": row.state})
    return row
