"""Password reset (issue 20): a person who has no usable password (an account the legacy import created) or who
forgot it asks for a mail by email address, follows its link and sets a new password; an operator sets one from
the shell (`tenet users set-password`). Both end in `set_password`, which also ends every way the account was
signed in: the token epoch moves on (access tokens die), refresh tokens and console sessions are revoked, and
every other outstanding reset secret of the account is spent.

- The request answers the same for a known, an unknown, a disabled or a malformed address (no account
  enumeration); only an active account gets a mail. The boundary limits requests per address asked for and per
  client address before this runs (the login limiter's way: `RateLimiter.attempt`), so nobody can flood an
  inbox.
- The mail's secret is random (`prr_`, 256 bits) and stored as its SHA-256 digest; it lives `ttl` and is spent
  by one conditional UPDATE (`used_at IS NULL AND expires_at > now`), so of two racing uses one wins.
- The new password is checked and hashed before the unit of work opens: no connection is held while argon2
  runs, and a refused password does not spend the secret.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import errors, web_sessions
from tenet.iam.models import PasswordReset, RefreshToken, UserAccount
from tenet.iam.passwords import Passwords, password_problems
from tenet.iam.settings import IamSettings
from tenet.iam.tokens import digest, new_secret
from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.emails import InvalidEmail, clean_email, normalize_email
from tenet.kernel.outbox import enqueue_email
from tenet.kernel.reads import Reads
from tenet.kernel.settings import KernelSettings, section

TOKEN_PREFIX = "prr"
MAIL_KIND = "iam.password_reset"
PAGE_PATH = "/console/password-reset/new"


@dataclass(frozen=True)
class ResetPolicy:
    ttl: timedelta
    public_base_url: str


def reset_link(public_base_url: str, token: str) -> str:
    return f"{public_base_url.rstrip('/')}{PAGE_PATH}?{urlencode({'token': token})}"


async def request_reset(session: AsyncSession, *, email: str, policy: ResetPolicy, now: datetime) -> bool:
    """Queue the reset mail when `email` names an active account (answers whether it did: for tests and logs
    only; the boundary answers the same either way)."""
    try:
        key = normalize_email(clean_email(email))
    except InvalidEmail:
        return False
    user = (await session.execute(
        select(UserAccount).where(UserAccount.email_normalized == key, UserAccount.status == "active")
    )).scalar_one_or_none()
    if user is None:
        return False
    token = new_secret(TOKEN_PREFIX)
    expires = now + policy.ttl
    session.add(PasswordReset(id=uuid.uuid4(), user_id=user.id, token_digest=digest(token), created_at=now,
                              expires_at=expires))
    await session.flush()
    link = reset_link(policy.public_base_url, token)
    minutes = int(policy.ttl.total_seconds() // 60)
    body = (
        "Hello,\n\n"
        "Someone (we hope you) asked to set a new password for your Tenet account.\n\n"
        f"Set your password here (the link works once, for {minutes} minutes):\n{link}\n\n"
        f"The link expires on {expires:%Y-%m-%d %H:%M} UTC. If you did not ask for it, ignore this mail: "
        "your password stays as it is.\n"
    )
    await enqueue_email(session, kind=MAIL_KIND, to=user.email, subject="Set your Tenet password / 设置 Tenet 密码",
                        body_text=body, now=now)
    await audit.record(session, action="iam.user.password_reset_requested", actor=Actor("anonymous"),
                       subject=("user", user.id), now=now, data={"expires_at": expires.isoformat()})
    return True


_LIVE_RESET = """
    SELECT u.email FROM iam.password_reset r JOIN iam.user_account u ON u.id = r.user_id
     WHERE r.token_digest = %(digest)s AND r.used_at IS NULL AND r.expires_at > %(now)s AND u.status = 'active'
"""


async def reset_email(reads: Reads, *, token: str, now: datetime) -> str:
    """The address of the account a live reset secret names (the page shows it); ResetTokenInvalid else."""
    row = await reads.one(_LIVE_RESET, {"digest": digest(token), "now": now})
    if row is None:
        raise errors.ResetTokenInvalid()
    return str(row["email"])


async def new_hash(passwords: Passwords, *, password: str, email: str) -> str:
    problem = password_problems(password, email=email)
    if problem:
        raise errors.PasswordTooWeak(problem)
    return await passwords.hash(password)


async def complete_reset(session: AsyncSession, *, token: str, password_hash: str, now: datetime) -> uuid.UUID:
    """Spend the secret and set the password (hashed by the caller, `new_hash`); ResetTokenInvalid when the
    secret is unknown, spent, expired, or its account no longer active."""
    user_id = (await session.execute(
        update(PasswordReset)
        .where(PasswordReset.token_digest == digest(token), PasswordReset.used_at.is_(None),
               PasswordReset.expires_at > now)
        .values(used_at=now).returning(PasswordReset.user_id)
    )).scalar_one_or_none()
    if user_id is None:
        raise errors.ResetTokenInvalid()
    await set_password(session, user_id=user_id, password_hash=password_hash, now=now, actor=Actor.user(user_id),
                       refusal=errors.ResetTokenInvalid)
    return user_id


async def set_password(session: AsyncSession, *, user_id: uuid.UUID, password_hash: str, now: datetime, actor: Actor,
                       refusal: type[errors.DomainError] = errors.UserNotFound) -> None:
    """The new password of an active account; every sign-in of the account ends (tokens, sessions, other reset
    secrets). `refusal` when the account is not active (it may have been disabled meanwhile)."""
    changed = (await session.execute(
        update(UserAccount).where(UserAccount.id == user_id, UserAccount.status == "active")
        .values(password_hash=password_hash, updated_at=now, token_epoch=UserAccount.token_epoch + 1)
        .returning(UserAccount.id).execution_options(synchronize_session=False)
    )).scalar_one_or_none()
    if changed is None:
        raise refusal()
    await session.execute(update(RefreshToken).where(RefreshToken.user_id == user_id, RefreshToken.revoked_at.is_(None))
                          .values(revoked_at=now))
    await web_sessions.revoke_all(session, user_id=user_id, now=now)
    await session.execute(update(PasswordReset).where(PasswordReset.user_id == user_id, PasswordReset.used_at.is_(None))
                          .values(used_at=now))
    await audit.record(session, action="iam.user.password_set", actor=actor, subject=("user", user_id), now=now)


# --- the boundary's steps, shared by the API (tenet.iam.api) and the console's pages (tenet.web.account) ---------

def buckets(email: str, address: str) -> tuple[str, str]:
    """The limiter's buckets of a reset request: the address asked for (normalised as typed) and the client's."""
    return f"password-reset:account:{email.strip().lower()[:320]}", f"password-reset:ip:{address}"


async def ask(state: Any, *, email: str, address: str, now: datetime) -> None:
    """A reset request at a boundary: counted (429 at the limit, known address or not), then the mail if any."""
    iam = section(state.settings, IamSettings)
    await state.rate_limiter.attempt(list(buckets(email, address)), iam.password_reset_limit, now,
                                     "password-reset requests")
    policy = ResetPolicy(ttl=timedelta(minutes=iam.password_reset_ttl_minutes),
                         public_base_url=section(state.settings, KernelSettings).public_base_url)
    async with state.db.unit_of_work() as session:
        await request_reset(session, email=email, policy=policy, now=now)


async def finish(state: Any, *, token: str, password: str, now: datetime) -> uuid.UUID:
    """Set the password with a mailed secret at a boundary: checked and hashed first, then spent and set."""
    email = await reset_email(state.db.reads, token=token, now=now)
    hashed = await new_hash(state.passwords, password=password, email=email)
    async with state.db.unit_of_work() as session:
        return await complete_reset(session, token=token, password_hash=hashed, now=now)


__all__ = ["ResetPolicy", "ask", "buckets", "complete_reset", "finish", "new_hash", "request_reset", "reset_email",
           "reset_link", "set_password"]
