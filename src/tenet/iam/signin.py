"""A password sign-in, the one way: shared by the API's token route (`POST /api/v1/auth/token`, password grant) and
the consoles' sign-in form (tenet.web), so both count against the same limiter buckets and follow the same steps.

It is a boundary of its own: each step opens (and ends) what it needs, so no connection is held while argon2 runs.
Each attempt takes a slot of the account's and of the address's bucket before the password is checked (at the
limit: 429 whatever the password); a success forgets the account's failures and gives the address's slot back; the
caller's `then` runs in the sign-in's own unit of work (it issues tokens, or starts a console session)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import service
from tenet.iam.models import UserAccount
from tenet.kernel.emails import normalize_email
from tenet.kernel.ratelimit import release_in, reset_in
from tenet.kernel.settings import Rate

T = TypeVar("T")


def buckets(email: str, address: str) -> tuple[str, str]:
    """The limiter's buckets of a sign-in: the account's and the client address's."""
    return f"login:account:{normalize_email(email)}", f"login:ip:{address}"


async def with_password(state: Any, *, email: str, password: str, address: str, limit: Rate, now: datetime,
                        then: Callable[[AsyncSession, UserAccount], Awaitable[T]]) -> T:
    """Check the password under the limiter, record the sign-in and run `then` in the same unit of work."""
    account_bucket, address_bucket = buckets(email, address)
    # A wrong password keeps its slots; an outage (503) while checking it gives them back.
    async with state.rate_limiter.attempting([account_bucket, address_bucket], limit, now, "failed sign-ins"):
        user_id, new_hash = await service.verify_password(state.db.reads, passwords=state.passwords, email=email,
                                                          password=password)
        async with state.db.unit_of_work() as session:
            user = await service.record_sign_in(session, user_id=user_id, new_hash=new_hash, now=now)
            # The owner proved themselves: the account's failures are forgotten, and this attempt's slot of the
            # address is given back (only failures count against a shared address).
            await reset_in(session, account_bucket, limit, now)
            await release_in(session, address_bucket, limit, now)
            return await then(session, user)


__all__ = ["buckets", "with_password"]
