"""What social keeps per account: made with the account, ended with it (SOC-INV-01, SOC-INV-22).

Both run as handlers of identity's events, inside identity's transaction: AccountCreated right after the
account row is flushed (so every entry point — registration, an administrator, create-admin, the demo, the
tests — gives the account its profile and agent in the same commit), AccountDeleted while identity holds the
account row FOR UPDATE (every social command that makes an account hold something share-locks that row first,
so none can interleave with the clean-up below).

Deletion follows the written rule of the design (§7.1), in the domain's lock order: profile and agent, owned
automations, owned items (others' jobs on them disabled, todos left without a source archived, open offers
dismissed), groups (the creator hands over to the oldest admin, else the oldest member; nobody left: the
group is archived), friendships (ended as `canceled`, reason `account_deleted`), subscriptions, todos and the
inbox of the account (deleted: private data, spec §B).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.statements import statements
from tenet.social.common import DEFAULT_AGENT_TYPE, DEFAULT_LLM_ID, new_feed_id


async def create_profile_and_agent(session: AsyncSession, *, user_id: uuid.UUID, now: datetime) -> None:
    """The account's profile (username = its display name, default settings, a calendar feed id) and its
    agent. ON CONFLICT DO NOTHING: a second publication of the event is harmless."""
    run = await statements(session)
    await run.execute("""
        INSERT INTO social.profiles (id, username, settings, settings_version, calendar_feed_id, version,
                                     created_at, updated_at, created_by)
        SELECT u.id,
               coalesce(nullif(btrim(left(regexp_replace(u.display_name, '[[:cntrl:]]', '', 'g'), 200)), ''), 'User'),
               '{}'::jsonb, 1, %(feed)s, 1, %(now)s, %(now)s, u.id
          FROM iam.user_account u WHERE u.id = %(id)s
        ON CONFLICT (id) DO NOTHING""", {"id": user_id, "feed": new_feed_id(), "now": now})
    await run.execute("""
        INSERT INTO social.user_agents (id, user_id, llm_id, agent_type, config, status, capability_version, version,
                                        created_at, updated_at, created_by)
        VALUES (%(agent)s, %(id)s, %(llm)s, %(kind)s, '{}'::jsonb, 'active', 1, 1, %(now)s, %(now)s, %(id)s)
        ON CONFLICT (user_id) WHERE deleted_at IS NULL DO NOTHING""",
        {"agent": uuid.uuid4(), "id": user_id, "llm": DEFAULT_LLM_ID, "kind": DEFAULT_AGENT_TYPE, "now": now})


async def _count(session: AsyncSession, sql: str, params: dict[str, object]) -> int:
    return await (await statements(session)).execute(sql, params)


async def account_deleted(session: AsyncSession, *, user_id: uuid.UUID, now: datetime, actor: Actor) -> None:
    """End everything the account holds in social (SOC-INV-22). Never refuses: every table has a rule."""
    from tenet.social import groups, items  # the services import this module's neighbours

    p = {"u": user_id, "now": now}
    counts: dict[str, int] = {}
    # 1. Profile and agent: soft-deleted and scrubbed (the rows stay for others' references); the feed dies.
    counts["profile"] = await _count(session, """
        UPDATE social.profiles SET deleted_at = %(now)s, username = 'Deleted user', avatar_url = NULL, bio = NULL,
               settings = '{}'::jsonb, calendar_feed_id = NULL, version = version + 1, updated_at = %(now)s
         WHERE id = %(u)s AND deleted_at IS NULL""", p)
    await _count(session, """
        UPDATE social.user_agents SET deleted_at = %(now)s, config = '{}'::jsonb, status = 'paused',
               version = version + 1, updated_at = %(now)s
         WHERE user_id = %(u)s AND deleted_at IS NULL""", p)
    # 2. Owned automations (a run being executed holds its job FOR KEY SHARE: this waits for it). Runs cascade;
    #    messages they wrote keep their text, their run id goes NULL.
    counts["automations"] = await _count(session, """
        DELETE FROM social.automation_jobs WHERE id IN (
            SELECT id FROM social.automation_jobs WHERE owner_id = %(u)s ORDER BY id FOR UPDATE)""", p)
    # 3. Owned items, deleted as their owner would delete them.
    owned = await (await statements(session)).all(
        "SELECT id FROM social.schedule_items WHERE owner_id = %(u)s ORDER BY id", p)
    counts["items"] = await items.delete_items(session, item_ids=[row["id"] for row in owned], principal_id=None,
                                               now=now)
    # 4. Groups: hand over or archive, then leave.
    counts["groups"] = await groups.remove_deleted_account(session, user_id=user_id, now=now)
    # 5. Friendships end; a request the account sent is closed in its recipient's inbox.
    await _count(session, """
        UPDATE social.inbox_messages SET status = 'dismissed', acted_at = %(now)s, read_at = coalesce(read_at, %(now)s)
         WHERE message_type = 'friend_request' AND sender_id = %(u)s AND status IN ('pending', 'read')""", p)
    counts["friendships"] = await _count(session, """
        UPDATE social.friendships SET status = 'canceled', closed_at = %(now)s, closed_reason = 'account_deleted',
               accepted_at = NULL, blocked_by = NULL, blocked_at = NULL, version = version + 1, updated_at = %(now)s
         WHERE id IN (SELECT id FROM social.friendships WHERE (user_low_id = %(u)s OR user_high_id = %(u)s)
                        AND status IN ('pending', 'accepted', 'blocked') ORDER BY id FOR UPDATE)""", p)
    # 6-8. Private data: the account's subscriptions (offers to it included), todos, inbox.
    counts["subscriptions"] = await _count(
        session, "DELETE FROM social.schedule_subscriptions WHERE subscriber_user_id = %(u)s", p)
    counts["todos"] = await _count(session, "DELETE FROM social.todos WHERE owner_id = %(u)s", p)
    counts["inbox_messages"] = await _count(session, "DELETE FROM social.inbox_messages WHERE recipient_id = %(u)s", p)
    await audit.record(session, action="social.account.cleaned", actor=actor, subject=("user", user_id), now=now,
                       data=counts)
