"""Small pieces every social command shares."""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service as iam_service
from tenet.kernel.statements import statements

# No model catalogue exists behind `llm_id` (D-06): an opaque id, this one until the user picks another.
DEFAULT_LLM_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
DEFAULT_AGENT_TYPE = "TASK_EXECUTION"


def new_feed_id() -> str:
    """16 random bytes, base64url without padding: 22 characters (SOC-INV-18)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()


async def require_active_accounts(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> None:
    """Identity's share lock on the accounts a command makes hold something (a request, a membership, an
    offer): a concurrent deletion runs entirely before (we refuse) or after (its handler ends what we wrote).
    The first lock of the global order, so taken before any social row."""
    await iam_service.require_active_accounts(session, user_ids)


async def is_active_account(session: AsyncSession, user_id: uuid.UUID) -> bool:
    """`require_active_accounts` for the other party of a command, answered rather than raised: the command
    decides what to say, and says the same for a missing account as for one who refuses (issue 24 item 9)."""
    from tenet.iam.errors import AccountNotActive

    try:
        await require_active_accounts(session, [user_id])
    except AccountNotActive:
        return False
    return True


async def active_account_ids(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Share-lock the recipients of a fan-out (id order) and answer those that are active.

    A fan-out runs under social row locks (an item, a group), after the point where accounts come in the lock
    order, so it must not wait for an account: SKIP LOCKED leaves out an account identity is changing at this
    moment (deleting, disabling, recording a sign-in: the row is locked for update), which then gets no message
    — for a deletion, the same as if it had been deleted first. Waiting instead could deadlock with the
    deletion's handler, which locks the group or item next."""
    ids = sorted(set(user_ids))
    if not ids:
        return set()
    rows = await (await statements(session)).all(
        "SELECT id FROM iam.user_account WHERE id = ANY(%(ids)s) AND status = 'active' ORDER BY id "
        "FOR SHARE SKIP LOCKED", {"ids": ids})
    return {row["id"] for row in rows}

