"""Commands of the consoles' sessions (`iam.web_sessions`, issue 18): a sign-in starts one, sign-out ends it, and
identity's own commands end every session of an account whose roles change, that is disabled or deleted
(`revoke_all`, called by tenet.iam.service), so a session dies exactly when a person's access changes, as tokens
do. The browser holds the secret (an HttpOnly cookie); the table holds its SHA-256 digest, so a leaked table
signs nobody in. The reading side (is this cookie's session alive, and whose is it) is
`tenet.iam.queries.web_principal`: one statement, on the read path, per page."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.models import UserAccount, WebSession
from tenet.iam.tokens import digest, new_secret


async def start(session: AsyncSession, *, user: UserAccount, now: datetime, ttl: timedelta) -> str:
    """A new session for an account that just proved itself; answers the secret for the cookie (shown once)."""
    secret = new_secret("ws")
    session.add(WebSession(id=uuid.uuid4(), user_id=user.id, token_digest=digest(secret),
                           token_epoch=user.token_epoch, created_at=now, expires_at=now + ttl))
    await session.flush()
    return secret


async def end(session: AsyncSession, *, secret: str, now: datetime) -> None:
    """Sign out: the session named by the cookie's secret is revoked (an unknown or dead one is ignored)."""
    await session.execute(update(WebSession).where(WebSession.token_digest == digest(secret),
                                                   WebSession.revoked_at.is_(None)).values(revoked_at=now))


async def revoke_all(session: AsyncSession, *, user_id: uuid.UUID, now: datetime) -> None:
    """Every live session of the account ends (its roles changed, it was disabled or deleted)."""
    await session.execute(update(WebSession).where(WebSession.user_id == user_id, WebSession.revoked_at.is_(None))
                          .values(revoked_at=now))
