"""Friendships (spec 000 §C.2; SOC-INV-04..06): one row per unordered pair, reused across request cycles.

A request inserts the pair's row with `INSERT .. ON CONFLICT DO NOTHING` (the unique pair decides a race: the
second insert waits for the first and then finds the row), then every command works on the row locked FOR
UPDATE and applies the rules of the design (§4.1) to its *current* state. So A->B and B->A at the same moment
end as one row, accepted: the second request finds the first pending and accepts it (a crossed request).

A pending request has exactly one open friend_request message in the recipient's inbox, written and closed by
the same commands (SOC-INV-06).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel import audit
from tenet.kernel.audit import Actor
from tenet.kernel.errors import DomainError
from tenet.kernel.ratelimit import consume_in
from tenet.kernel.settings import Rate
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, transition
from tenet.social import errors, lifecycles
from tenet.social.common import is_active_account, require_active_accounts
from tenet.social.models import Friendship, InboxMessage


def pair(a: uuid.UUID, b: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    return (a, b) if a < b else (b, a)


def other(friendship: Friendship, one: uuid.UUID) -> uuid.UUID:
    """The other one of the pair."""
    return friendship.user_high_id if friendship.user_low_id == one else friendship.user_low_id


async def _lock(session: AsyncSession, friendship_id: uuid.UUID) -> Friendship | None:
    return (await session.scalars(select(Friendship).where(Friendship.id == friendship_id).with_for_update()
                                  .execution_options(populate_existing=True))).one_or_none()


def _refusal(refusal: Refusal[Friendship]) -> DomainError:
    if refusal.current is None:
        return errors.FriendshipNotFound()
    return errors.FriendshipStateConflict(current_status=refusal.status)


_USERNAME = "SELECT username FROM social.profiles WHERE id = %(u)s"


async def _request_message(session: AsyncSession, friendship: Friendship, sender: uuid.UUID, now: datetime) -> None:
    username = await (await statements(session)).value(_USERNAME, {"u": sender})
    session.add(InboxMessage(id=uuid.uuid4(), recipient_id=other(friendship, sender), sender_id=sender,
                             message_type="friend_request", content={"sender_username": username},
                             related_type="friendship", related_id=friendship.id, actionable=True, status="pending",
                             created_at=now, created_by=sender))
    await session.flush()


_CLOSE_REQUEST = """
    UPDATE social.inbox_messages SET status = %(status)s, acted_at = %(now)s, acted_by = %(actor)s,
           read_at = coalesce(read_at, %(now)s)
     WHERE message_type = 'friend_request' AND related_id = %(f)s AND status IN ('pending', 'read')
"""


async def close_request(session: AsyncSession, friendship_id: uuid.UUID, *, status: str,
                        principal_id: uuid.UUID | None, now: datetime) -> None:
    """The open friend_request message of the pair moves with the friendship (SOC-INV-06)."""
    await (await statements(session)).execute(_CLOSE_REQUEST, {"status": status, "now": now, "actor": principal_id,
                                                               "f": friendship_id})


async def _accepts_requests(session: AsyncSession, user_id: uuid.UUID) -> bool:
    value = await (await statements(session)).value(
        "SELECT settings #> '{privacy,allow_friend_requests}' FROM social.profiles WHERE id = %(u)s", {"u": user_id})
    return value is not False


# The pair's row, made when the two never had one (the unique pair decides a race: see the module's docstring).
_INSERT_PAIR = """
    INSERT INTO social.friendships (id, user_low_id, user_high_id, initiator_id, status, requested_at, blocked_by,
                                    blocked_at, version, created_at, updated_at, created_by, updated_by)
    VALUES (%(id)s, %(low)s, %(high)s, %(me)s, %(status)s, %(requested_at)s, %(blocked_by)s, %(blocked_at)s, 1,
            %(now)s, %(now)s, %(me)s, %(me)s)
    ON CONFLICT (user_low_id, user_high_id) DO NOTHING RETURNING id
"""
_PAIR_ID = "SELECT id FROM social.friendships WHERE user_low_id = %(low)s AND user_high_id = %(high)s"


async def _pair_row(session: AsyncSession, principal_id: uuid.UUID, other_id: uuid.UUID, *, blocked: bool,
                    now: datetime) -> tuple[Friendship, bool]:
    """The pair's row locked, and whether it was made now (pending, or born blocked by the principal)."""
    low, high = pair(principal_id, other_id)
    run = await statements(session)
    inserted = await run.value(_INSERT_PAIR, {
        "id": uuid.uuid4(), "low": low, "high": high, "me": principal_id, "now": now,
        "status": "blocked" if blocked else "pending", "requested_at": None if blocked else now,
        "blocked_by": principal_id if blocked else None, "blocked_at": now if blocked else None})
    friendship_id = inserted or await run.value(_PAIR_ID, {"low": low, "high": high})
    friendship = await _lock(session, friendship_id)
    assert friendship is not None  # rows of pairs are never deleted
    return friendship, inserted is not None


async def request(session: AsyncSession, *, principal_id: uuid.UUID, target_id: uuid.UUID, cooldown: timedelta,
                  inbox_limit: Rate | None, now: datetime) -> tuple[Friendship, bool]:
    """Ask `target_id` to be friends. Answers the friendship and whether a request was made (False: the
    other party's pending request was accepted instead)."""
    if target_id == principal_id:
        raise errors.FriendRequestToSelf()
    await require_active_accounts(session, [principal_id])
    if not await is_active_account(session, target_id):
        # The answer of one who refuses requests: a stranger must not learn who has an account (issue 24 item 9).
        raise errors.RecipientUnavailable()
    friendship, inserted = await _pair_row(session, principal_id, target_id, blocked=False, now=now)
    if not inserted:
        accepted = await _answer_existing(session, friendship, principal_id, cooldown=cooldown, now=now)
        if accepted is not None:
            return accepted, False
    if not await _accepts_requests(session, target_id):
        raise errors.RecipientUnavailable()
    await _consume(session, principal_id, inbox_limit, now)
    if not inserted:
        friendship = await transition(session, lifecycles.FRIENDSHIP, "re_request", model=Friendship,
                                      id=friendship.id, values={"initiator_id": principal_id, "requested_at": now,
                                                                "closed_at": None, "closed_reason": None,
                                                                "updated_at": now, "updated_by": principal_id},
                                      refuse=_refusal)
    await _request_message(session, friendship, principal_id, now)
    await audit.record(session, action="social.friendship.requested", actor=Actor.user(principal_id),
                       subject=("friendship", friendship.id), now=now)
    return friendship, True


async def _answer_existing(session: AsyncSession, friendship: Friendship, principal_id: uuid.UUID, *,
                           cooldown: timedelta, now: datetime) -> Friendship | None:
    """A request to a pair that has a row: the other's pending request is accepted (answered); a state that
    refuses a request raises; a closed pair may be asked again (None)."""
    status = friendship.status
    if status == "pending":
        if friendship.initiator_id == principal_id:
            raise errors.FriendRequestAlreadyPending(friendship_id=str(friendship.id))
        return await _accept(session, friendship, principal_id, now)
    if status == "accepted":
        raise errors.AlreadyFriends(friendship_id=str(friendship.id))
    if status == "blocked":
        if friendship.blocked_by == principal_id:
            raise errors.FriendshipBlocked(friendship_id=str(friendship.id))
        raise errors.RecipientUnavailable()
    if status == "declined" and friendship.initiator_id == principal_id and friendship.closed_at is not None \
            and friendship.closed_at + cooldown > now:
        retry = int((friendship.closed_at + cooldown - now).total_seconds()) + 1
        raise errors.FriendRequestCooldown(retry_after_seconds=retry)
    return None


async def _consume(session: AsyncSession, principal_id: uuid.UUID, limit: Rate | None, now: datetime) -> None:
    if limit is not None:
        await consume_in(session, f"social-inbox-write:user:{principal_id}", limit, now,
                         error=lambda retry_after: errors.InboxWriteLimitReached(retry_after_seconds=retry_after,
                                                                                 limit=limit.limit))


async def _accept(session: AsyncSession, friendship: Friendship, principal_id: uuid.UUID,
                  now: datetime) -> Friendship:
    moved = await transition(session, lifecycles.FRIENDSHIP, "accept", model=Friendship, id=friendship.id,
                             values={"accepted_at": now, "updated_at": now, "updated_by": principal_id},
                             refuse=_refusal)
    await close_request(session, friendship.id, status="accepted", principal_id=principal_id, now=now)
    await audit.record(session, action="social.friendship.accepted", actor=Actor.user(principal_id),
                       subject=("friendship", friendship.id), now=now)
    return moved


async def locked_for(session: AsyncSession, friendship_id: uuid.UUID, principal_id: uuid.UUID) -> Friendship:
    """The pair's row locked, if the caller is one of the two (and not the blocked one of a block: 404)."""
    friendship = await _lock(session, friendship_id)
    if friendship is None or principal_id not in (friendship.user_low_id, friendship.user_high_id) or (
            friendship.status == "blocked" and friendship.blocked_by != principal_id):
        raise errors.FriendshipNotFound()
    return friendship


_ACCOUNT_EXISTS = "SELECT 1 FROM iam.user_account WHERE id = %(u)s AND status <> 'deleted'"


async def block_person(session: AsyncSession, *, principal_id: uuid.UUID, target_id: uuid.UUID,
                       now: datetime) -> Friendship:
    """Block someone: the pair's row (made here, born blocked, when the two never had one), then `act`."""
    if target_id == principal_id:
        raise errors.FriendRequestToSelf("You cannot block yourself")
    if await (await statements(session)).value(_ACCOUNT_EXISTS, {"u": target_id}) is None:
        raise errors.UserNotFound()
    friendship, _ = await _pair_row(session, principal_id, target_id, blocked=True, now=now)
    if friendship.status == "blocked":
        if friendship.blocked_by != principal_id:
            raise errors.FriendshipBlocked(friendship_id=str(friendship.id))
        # Born blocked here (or blocked before): no open request, invitation or offer stays between the two.
        await _end_offers_between(session, friendship.user_low_id, friendship.user_high_id, principal_id, now)
        return friendship
    return await act(session, friendship_id=friendship.id, principal_id=principal_id, action="block", now=now)


_PAST = {"decline": "declined", "cancel": "canceled", "unfriend": "unfriended", "block": "blocked",
         "unblock": "unblocked"}
# action -> the reason the pair's row closes with, and the status its open request message takes (None: none).
_CLOSING = {"decline": ("declined", "rejected"), "cancel": ("withdrawn", "dismissed"),
            "unfriend": ("unfriended", None), "unblock": ("unblocked", None)}


async def act(session: AsyncSession, *, friendship_id: uuid.UUID, principal_id: uuid.UUID, action: str,
              now: datetime) -> Friendship:
    """accept | decline | cancel | block | unblock | unfriend on the caller's friendship."""
    friendship = await locked_for(session, friendship_id, principal_id)
    is_initiator = friendship.initiator_id == principal_id
    if action in ("accept", "decline") and friendship.status == "pending" and is_initiator:
        raise errors.FriendshipActionForbidden("Only the recipient of a request accepts or declines it")
    if action == "cancel" and friendship.status == "pending" and not is_initiator:
        raise errors.FriendshipActionForbidden("Only the sender of a request withdraws it")
    if action == "accept":
        return await _accept(session, friendship, principal_id, now)
    if action == "block" and friendship.status == "blocked":
        raise errors.FriendshipBlocked(friendship_id=str(friendship.id))
    values: dict[str, object] = {"updated_at": now, "updated_by": principal_id}
    if action in _CLOSING:
        reason, message_status = _CLOSING[action]
        values.update(closed_at=now, closed_reason=reason)
        if action == "unfriend":
            values["accepted_at"] = None
        if action == "unblock":
            values.update(blocked_by=None, blocked_at=None)
        moved = await transition(session, lifecycles.FRIENDSHIP, action, model=Friendship, id=friendship.id,
                                 values=values, refuse=_refusal)
        if message_status is not None:
            await close_request(session, friendship.id, status=message_status, principal_id=principal_id, now=now)
    elif action == "block":
        values.update(blocked_by=principal_id, blocked_at=now, accepted_at=None, closed_at=None, closed_reason=None)
        moved = await transition(session, lifecycles.FRIENDSHIP, "block", model=Friendship, id=friendship.id,
                                 values=values, refuse=_refusal)
        await _end_offers_between(session, friendship.user_low_id, friendship.user_high_id, principal_id, now)
    else:
        raise ValueError(action)
    await audit.record(session, action=f"social.friendship.{_PAST[action]}", actor=Actor.user(principal_id),
                       subject=("friendship", friendship.id), now=now)
    return moved


_DISMISS_OFFERS_BETWEEN = """
    UPDATE social.inbox_messages SET status = 'dismissed', acted_at = %(now)s, acted_by = %(actor)s,
           read_at = coalesce(read_at, %(now)s)
     WHERE actionable AND status IN ('pending', 'read')
       AND ((sender_id = %(a)s AND recipient_id = %(b)s) OR (sender_id = %(b)s AND recipient_id = %(a)s))
    RETURNING message_type, related_id, recipient_id
"""
_WITHDRAW_OFFER = """
    UPDATE social.schedule_subscriptions SET status = 'unsubscribed', version = version + 1, updated_at = %(now)s,
           updated_by = %(actor)s
     WHERE item_id = %(item)s AND subscriber_id = %(r)s AND status = 'pending'
"""


async def _end_offers_between(session: AsyncSession, a: uuid.UUID, b: uuid.UUID, principal_id: uuid.UUID,
                              now: datetime) -> None:
    """A block dismisses every open actionable message between the two (requests, invitations, share offers,
    either direction) and withdraws the pending subscriptions those offers stood for."""
    run = await statements(session)
    offers = await run.all(_DISMISS_OFFERS_BETWEEN, {"a": a, "b": b, "now": now, "actor": principal_id})
    for offer in offers:
        if offer["message_type"] == "schedule_item_shared":
            await run.execute(_WITHDRAW_OFFER, {"item": offer["related_id"], "r": offer["recipient_id"], "now": now,
                                                "actor": principal_id})
