"""Social publishes no cross-domain events (nothing else reacts to social state). It handles identity's:
AccountCreated makes the profile and the agent in the account's own transaction (SOC-INV-01); AccountDeleted
ends what the account holds, table by table (SOC-INV-22)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.events import AccountCreated, AccountDeleted


async def _account_created(session: AsyncSession, event: AccountCreated) -> None:
    from tenet.social import accounts

    await accounts.create_profile_and_agent(session, user_id=event.user_id, now=event.now)


async def _account_deleted(session: AsyncSession, event: AccountDeleted) -> None:
    from tenet.social import accounts

    await accounts.account_deleted(session, user_id=event.user_id, now=event.now, actor=event.actor)


HANDLERS = {AccountCreated: _account_created, AccountDeleted: _account_deleted}
