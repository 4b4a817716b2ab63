"""Identity commands: accounts, roles, sign-in, refresh tokens, API clients. Each runs inside the caller's unit of
work and never commits (sign-in's password check reads on the read path first, so no connection is held while
argon2 runs). The reads other domains' commands make of accounts (`user_summaries`, `require_active_accounts`) are
here too; identity's GET reads are tenet.iam.queries'."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam import errors, lifecycles, queries, web_sessions
from tenet.iam.events import AccountCreated, AccountDeleted, AccountRolesChanged
from tenet.iam.models import ApiClient, RefreshToken, UserAccount, UserRole
from tenet.iam.passwords import Passwords, password_problems
from tenet.iam.permissions import DEFAULT_ROLES, Role, Scope
from tenet.iam.schemas import TokenResponse
from tenet.iam.tokens import AccessTokens, digest, new_client_id, new_secret
from tenet.kernel import audit, events
from tenet.kernel.audit import Actor
from tenet.kernel.db_errors import add_unique
from tenet.kernel.emails import EMAIL_NORMALIZATION_VERSION, InvalidEmail, clean_email, normalize_email
from tenet.kernel.reads import Reads
from tenet.kernel.statements import statements
from tenet.kernel.transitions import Refusal, lock_rows, transition

USER_EMAIL_INDEX = "uq_user_account_email_live"


@dataclass(frozen=True)
class UserSummary:
    """What other domains may know of an account: for member lists, mail, audit-free display."""

    id: uuid.UUID
    email: str
    display_name: str
    status: str


# --- users -------------------------------------------------------------------------------------------


async def roles_of(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[str]]:
    ids = list(user_ids)
    found: dict[uuid.UUID, list[str]] = {user_id: [] for user_id in ids}
    if ids:
        rows = await session.execute(
            select(UserRole.user_id, UserRole.role_name).where(UserRole.user_id.in_(ids)).order_by(UserRole.role_name)
        )
        for user_id, role in rows:
            found[user_id].append(role)
    return found


async def user_summaries(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, UserSummary]:
    """Display fields of many accounts in one query (deleted ones included: history shows who it was)."""
    ids = list(set(user_ids))
    if not ids:
        return {}
    rows = await session.execute(
        select(UserAccount.id, UserAccount.email, UserAccount.display_name, UserAccount.status)
        .where(UserAccount.id.in_(ids))
    )
    return {row.id: UserSummary(row.id, row.email, row.display_name, row.status) for row in rows}


async def find_user_by_email(session: AsyncSession, email: str) -> UserAccount | None:
    return (await session.scalars(
        select(UserAccount).where(UserAccount.email_normalized == normalize_email(email),
                                  UserAccount.status != "deleted")
    )).one_or_none()


async def get_user(session: AsyncSession, user_id: uuid.UUID, *, include_deleted: bool = False,
                   fresh: bool = False) -> UserAccount:
    user = await session.get(UserAccount, user_id, populate_existing=fresh)
    if user is None or (user.status == "deleted" and not include_deleted):
        raise errors.UserNotFound()
    return user


async def create_user(
    session: AsyncSession,
    *,
    passwords: Passwords,
    email: str,
    password: str,
    display_name: str,
    now: datetime,
    actor: Actor,
    roles: Iterable[Role] = DEFAULT_ROLES,
) -> UserAccount:
    """Register (actor anonymous) or create (actor an administrator) an account."""
    try:
        typed = clean_email(email)
    except InvalidEmail as exc:
        raise errors.EmailInvalid(str(exc)) from None
    problem = password_problems(password, email=typed)
    if problem:
        raise errors.PasswordTooWeak(problem)
    # Friendlier and cheaper than hashing first; the unique index below is the arbiter (IAM-INV-01).
    if await find_user_by_email(session, typed) is not None:
        raise errors.EmailTaken()
    user = UserAccount(
        id=uuid.uuid4(), email=typed, email_normalized=normalize_email(typed),
        email_normalization=EMAIL_NORMALIZATION_VERSION, display_name=display_name,
        password_hash=await passwords.hash(password), status="active", created_at=now, updated_at=now,
    )
    await add_unique(session, user, on_violation={USER_EMAIL_INDEX: errors.EmailTaken})
    role_names = sorted({Role(r).value for r in roles})
    session.add_all(UserRole(user_id=user.id, role_name=r, granted_at=now) for r in role_names)
    await session.flush()
    await audit.record(session, action="iam.user.created", actor=actor, subject=("user", user.id), now=now,
                       data={"roles": role_names, "self_registered": actor.type == "anonymous"})
    await events.publish(session, AccountCreated(user_id=user.id, actor=actor, now=now))
    return user


async def verify_password(reads: Reads, *, passwords: Passwords, email: str,
                          password: str) -> tuple[uuid.UUID, str | None]:
    """Check a password without holding a connection while argon2 runs: the hash is read in one statement
    (read path), then verified. Answers the account id and, when the stored hash's parameters are outdated,
    a new hash to store; InvalidCredentials otherwise. Unknown accounts are verified against a decoy hash,
    so both failures take the same time."""
    row = await queries.sign_in_candidate(reads, email_normalized=normalize_email(email))
    stored = row["password_hash"] if row else None
    if not await passwords.verify(stored, password) or row is None:
        raise errors.InvalidCredentials()
    new_hash = await passwords.hash(password) if passwords.needs_rehash(row["password_hash"]) else None
    return row["id"], new_hash


async def record_sign_in(session: AsyncSession, *, user_id: uuid.UUID, new_hash: str | None,
                         now: datetime) -> UserAccount:
    """The sign-in's writes, conditional on the account still being active (it may have been disabled
    while the password was being checked)."""
    values: dict[str, object] = {"last_login_at": now}
    if new_hash is not None:
        values["password_hash"] = new_hash
    user = (await session.scalars(
        update(UserAccount).where(UserAccount.id == user_id, UserAccount.status == "active").values(values)
        .returning(UserAccount).execution_options(synchronize_session=False, populate_existing=True)
    )).one_or_none()
    if user is None:
        raise errors.InvalidCredentials()
    return user


async def _lock_administrators(session: AsyncSession) -> None:
    """Serialise every change that could remove the last Administrator on the role's row."""
    await (await statements(session)).execute("SELECT 1 FROM iam.role WHERE name = %(name)s FOR UPDATE",
                                              {"name": Role.ADMINISTRATOR.value})


async def _other_active_administrators(session: AsyncSession, user_id: uuid.UUID) -> int:
    return (await session.execute(
        select(func.count()).select_from(UserRole).join(UserAccount, UserAccount.id == UserRole.user_id)
        .where(UserRole.role_name == Role.ADMINISTRATOR.value, UserAccount.status == "active",
               UserAccount.id != user_id)
    )).scalar_one()


async def set_user_roles(session: AsyncSession, *, user_id: uuid.UUID, roles: Iterable[Role], now: datetime,
                         actor: Actor) -> UserAccount:
    # Account first, then the Administrator role row: the order every account command takes.
    user = await lock_account(session, user_id)
    if user.status == "deleted":
        raise errors.UserNotFound()
    wanted = sorted({Role(r).value for r in roles})
    await _lock_administrators(session)
    current = (await roles_of(session, [user_id]))[user_id]
    if (Role.ADMINISTRATOR.value in current and Role.ADMINISTRATOR.value not in wanted
            and user.status == "active" and await _other_active_administrators(session, user_id) == 0):
        raise errors.LastAdministrator()
    await session.execute(delete(UserRole).where(UserRole.user_id == user_id, UserRole.role_name.not_in(wanted)))
    for role in wanted:
        if role not in current:
            session.add(UserRole(user_id=user_id, role_name=role, granted_at=now))
    await session.execute(update(UserAccount).where(UserAccount.id == user_id).values(updated_at=now))
    await session.flush()
    await audit.record(session, action="iam.user.roles_changed", actor=actor, subject=("user", user_id), now=now,
                       data={"before": current, "after": wanted})
    if sorted(current) != wanted:
        await web_sessions.revoke_all(session, user_id=user_id, now=now)  # a console session dies with a role change
        await events.publish(session, AccountRolesChanged(user_id=user_id, before=tuple(sorted(current)),
                                                          after=tuple(wanted), actor=actor, now=now))
    return user


async def _refuse_removing_the_last_administrator(session: AsyncSession, user: UserAccount) -> None:
    await _lock_administrators(session)
    roles = (await roles_of(session, [user.id]))[user.id]
    if (Role.ADMINISTRATOR.value in roles and user.status == "active"
            and await _other_active_administrators(session, user.id) == 0):
        raise errors.LastAdministrator()


async def _revoke_refresh_tokens(session: AsyncSession, user_id: uuid.UUID, now: datetime) -> None:
    await session.execute(
        update(RefreshToken).where(RefreshToken.user_id == user_id, RefreshToken.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def _user_refusal(refusal: Refusal[UserAccount]) -> errors.DomainError:
    if refusal.status in (None, "deleted"):
        return errors.UserNotFound()
    return errors.UserStateConflict(current_status=refusal.status)


async def _move_user(session: AsyncSession, user_id: uuid.UUID, name: str, values: dict[str, object],
                     ) -> UserAccount:
    return await transition(session, lifecycles.USER, name, model=UserAccount, id=user_id, values=values,
                            refuse=_user_refusal)


async def lock_account(session: AsyncSession, user_id: uuid.UUID) -> UserAccount:
    """Row-lock an account (FOR UPDATE) before changing its state: every command that relies on the account
    being active holds a share lock on the same row (`require_active_accounts`), so the change waits for
    them and they, after it, see the new state. The account row is the first lock of the global order."""
    if not await lock_rows(session, UserAccount, [user_id], mode="update"):
        raise errors.UserNotFound()
    return await get_user(session, user_id, include_deleted=True, fresh=True)


async def require_active_accounts(session: AsyncSession, user_ids: Iterable[uuid.UUID]) -> None:
    """Share-lock the accounts (ascending id) and refuse unless each is active (ACCOUNT_NOT_ACTIVE).

    Taken first by every command that makes an account hold something — joining or creating a workspace,
    receiving ownership, later joining a group — so a concurrent deletion or disable (which locks the row
    FOR UPDATE and then ends what the account holds) runs entirely before or entirely after it: an
    account can never be left holding an active membership it acquired while being deleted (WS-INV-10).
    Shared, so one person's concurrent joins do not queue behind each other."""
    ids = sorted(set(user_ids))
    if not ids:
        return
    locked = await lock_rows(session, UserAccount, ids, mode="share")
    statuses = dict((await session.execute(
        select(UserAccount.id, UserAccount.status).where(UserAccount.id.in_(locked))
    )).all())
    for user_id in ids:
        status = statuses.get(user_id)
        if status != "active":
            raise errors.AccountNotActive(user_id=str(user_id), account_status=status or "missing")


async def disable_user(session: AsyncSession, *, user_id: uuid.UUID, now: datetime, actor: Actor) -> UserAccount:
    """Suspend an account: sign-in stops and every token dies at once; the account and its data stay."""
    user = await lock_account(session, user_id)
    await _refuse_removing_the_last_administrator(session, user)
    # A new epoch: every access token issued so far stays dead, even after a re-enable.
    user = await _move_user(session, user_id, "disable",
                            {"updated_at": now, "token_epoch": UserAccount.token_epoch + 1})
    await _revoke_refresh_tokens(session, user_id, now)
    await web_sessions.revoke_all(session, user_id=user_id, now=now)
    await audit.record(session, action="iam.user.disabled", actor=actor, subject=("user", user_id), now=now)
    return user


async def enable_user(session: AsyncSession, *, user_id: uuid.UUID, now: datetime, actor: Actor) -> UserAccount:
    await lock_account(session, user_id)
    user = await _move_user(session, user_id, "enable", {"updated_at": now})
    await audit.record(session, action="iam.user.enabled", actor=actor, subject=("user", user_id), now=now)
    return user


async def delete_user(session: AsyncSession, *, user_id: uuid.UUID, now: datetime, actor: Actor) -> None:
    """Delete as a state: the account stops signing in, its tokens die, its email is freed, and every
    domain handles `AccountDeleted` in the same transaction (and may refuse it). The account's row lock is
    taken first and held to commit: commands that make the account hold something share-lock the same row
    (`require_active_accounts`), so none of them can interleave with the handlers."""
    user = await lock_account(session, user_id)
    if user.status == "deleted":
        raise errors.UserNotFound()
    await _refuse_removing_the_last_administrator(session, user)
    await events.publish(session, AccountDeleted(user_id=user_id, actor=actor, now=now))
    await _move_user(session, user_id, "delete", {"deleted_at": now, "updated_at": now})
    await _revoke_refresh_tokens(session, user_id, now)
    await web_sessions.revoke_all(session, user_id=user_id, now=now)
    await audit.record(session, action="iam.user.deleted", actor=actor, subject=("user", user_id), now=now)


async def ensure_administrator(session: AsyncSession, *, passwords: Passwords, email: str, password: str,
                               display_name: str, now: datetime, reset_password: bool = False
                               ) -> tuple[UserAccount, bool]:
    """`tenet users create-admin`: create the account, or make an existing one an active Administrator.
    Idempotent. Answers the user and whether it was created."""
    existing = await find_user_by_email(session, email)
    if existing is None:
        user = await create_user(session, passwords=passwords, email=email, password=password,
                                 display_name=display_name, now=now, actor=Actor.system(),
                                 roles=[Role.ADMINISTRATOR])
        return user, True
    roles = (await roles_of(session, [existing.id]))[existing.id]
    values: dict[str, object] = {"status": "active", "updated_at": now}
    if reset_password:
        problem = password_problems(password, email=existing.email)
        if problem:
            raise errors.PasswordTooWeak(problem)
        values["password_hash"] = await passwords.hash(password)
    await session.execute(update(UserAccount).where(UserAccount.id == existing.id).values(values))
    if Role.ADMINISTRATOR.value not in roles:
        await set_user_roles(session, user_id=existing.id, roles=[*map(Role, roles), Role.ADMINISTRATOR],
                             now=now, actor=Actor.system())
    return existing, False


async def count_active_administrators(session: AsyncSession) -> int:
    return await _other_active_administrators(session, uuid.UUID(int=0))


# --- tokens ------------------------------------------------------------------------------------------


async def _new_refresh_token(session: AsyncSession, *, user_id: uuid.UUID, family_id: uuid.UUID,
                             now: datetime, ttl: timedelta) -> str:
    secret = new_secret("rt")
    session.add(RefreshToken(id=uuid.uuid4(), family_id=family_id, user_id=user_id, token_digest=digest(secret),
                             issued_at=now, expires_at=now + ttl))
    await session.flush()
    return secret


async def issue_user_tokens(session: AsyncSession, *, user: UserAccount, access_tokens: AccessTokens,
                            refresh_ttl: timedelta, now: datetime) -> TokenResponse:
    """A sign-in: an access token and the first refresh token of a new family (the access token names both
    the family and the account's token epoch, so revoking either kills it)."""
    family_id = uuid.uuid4()
    refresh = await _new_refresh_token(session, user_id=user.id, family_id=family_id, now=now, ttl=refresh_ttl)
    return TokenResponse(
        access_token=access_tokens.issue(subject=user.id, kind="user", now=now, epoch=user.token_epoch,
                                         family=family_id),
        expires_in=int(access_tokens.ttl.total_seconds()), refresh_token=refresh,
    )


async def rotate_refresh_token(session: AsyncSession, *, refresh_token: str, access_tokens: AccessTokens,
                               refresh_ttl: timedelta, now: datetime) -> TokenResponse:
    """Spend a refresh token and issue its successor in the same family.

    The spend is a conditional UPDATE (`used_at IS NULL AND revoked_at IS NULL`), so of two requests
    with the same token exactly one succeeds. A token that was already spent means a copy exists: the
    whole family is revoked (committed although the request fails) and the caller must sign in again.
    """
    token_digest = digest(refresh_token)
    spent = (await session.execute(
        update(RefreshToken)
        .where(RefreshToken.token_digest == token_digest, RefreshToken.used_at.is_(None),
               RefreshToken.revoked_at.is_(None), RefreshToken.expires_at > now)
        .values(used_at=now)
        .returning(RefreshToken.user_id, RefreshToken.family_id)
    )).one_or_none()
    if spent is None:
        token = (await session.scalars(
            select(RefreshToken).where(RefreshToken.token_digest == token_digest)
        )).one_or_none()
        if token is None or token.revoked_at is not None:
            raise errors.InvalidRefreshToken()
        if token.used_at is not None:
            await session.execute(
                update(RefreshToken).where(RefreshToken.family_id == token.family_id, RefreshToken.revoked_at.is_(None))
                .values(revoked_at=now)
            )
            await audit.record(session, action="iam.refresh_token.reuse_detected", actor=Actor.user(token.user_id),
                               subject=("refresh_token_family", token.family_id), now=now)
            raise errors.RefreshTokenReused()
        raise errors.RefreshTokenExpired()
    user_id, family_id = spent
    epoch = (await session.execute(
        select(UserAccount.token_epoch).where(UserAccount.id == user_id, UserAccount.status == "active")
    )).scalar_one_or_none()
    if epoch is None:
        raise errors.InvalidRefreshToken("The account is no longer active")
    refresh = await _new_refresh_token(session, user_id=user_id, family_id=family_id, now=now, ttl=refresh_ttl)
    return TokenResponse(
        access_token=access_tokens.issue(subject=user_id, kind="user", now=now, epoch=epoch, family=family_id),
        expires_in=int(access_tokens.ttl.total_seconds()), refresh_token=refresh,
    )


async def revoke_refresh_token(session: AsyncSession, *, refresh_token: str, now: datetime) -> None:
    """Sign out: the token's whole family dies. Unknown tokens are ignored (RFC 7009 §2.2)."""
    await session.execute(
        update(RefreshToken)
        .where(RefreshToken.family_id == select(RefreshToken.family_id)
               .where(RefreshToken.token_digest == digest(refresh_token)).scalar_subquery(),
               RefreshToken.revoked_at.is_(None))
        .values(revoked_at=now)
    )


# --- API clients -------------------------------------------------------------------------------------


async def create_api_client(session: AsyncSession, *, name: str, scopes: Iterable[Scope],
                            hotel_ids: Iterable[str], now: datetime, actor: Actor) -> tuple[ApiClient, str]:
    secret = new_secret("tcs")
    client = ApiClient(
        id=uuid.uuid4(), client_id=new_client_id(), name=name, secret_digest=digest(secret),
        scopes=sorted({Scope(s).value for s in scopes}), hotel_ids=sorted(set(hotel_ids)), created_at=now,
        created_by=uuid.UUID(actor.id) if actor.type == "user" and actor.id else None,
    )
    session.add(client)
    await session.flush()
    await audit.record(session, action="iam.api_client.created", actor=actor, subject=("api_client", client.id),
                       now=now, data={"scopes": client.scopes, "hotel_ids": client.hotel_ids})
    return client, secret


async def revoke_api_client(session: AsyncSession, *, api_client_id: uuid.UUID, now: datetime,
                            actor: Actor) -> None:
    revoked = (await session.execute(
        update(ApiClient).where(ApiClient.id == api_client_id, ApiClient.revoked_at.is_(None))
        .values(revoked_at=now).returning(ApiClient.id)
    )).scalar_one_or_none()
    if revoked is None:
        if await session.get(ApiClient, api_client_id) is None:
            raise errors.ApiClientNotFound()
        return  # already revoked: DELETE is idempotent
    await audit.record(session, action="iam.api_client.revoked", actor=actor, subject=("api_client", api_client_id),
                       now=now)


async def authenticate_client(reads: Reads, *, client_id: str, client_secret: str) -> tuple[uuid.UUID, list[str]]:
    """The API client's id and scopes for its credentials (one statement on the read path)."""
    client = await queries.client_credentials(reads, client_id=client_id)
    # Compare digests of high-entropy secrets: a timing difference reveals nothing usable.
    if client is None or client["secret_digest"] != digest(client_secret):
        raise errors.InvalidClient()
    return client["id"], list(client["scopes"])
