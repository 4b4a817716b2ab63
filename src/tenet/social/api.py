"""Routes of social collaboration: /api/v1/social (API.md "Social").

GET routes read on the transaction-free path (one statement each, the caller's right to see the rows inside
it); writes call one service function in the request's unit of work. Every user's own rows are theirs alone:
anyone else's answer 404. API clients get 403 (these routes are for signed-in users).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from functools import partial
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request, Response, status

from tenet.deps import NowDep, SessionDep, SettingsDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import CurrentUser
from tenet.kernel.errors import ValidationFailed
from tenet.kernel.http import API_PREFIX, TenetRoute, etag, if_match_version, json_response, problem_responses
from tenet.kernel.idempotency import not_idempotent
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.settings import KernelSettings, section
from tenet.social import (
    automations,
    calendar,
    errors,
    friends,
    groups,
    inbox,
    items,
    profiles,
    queries,
    recurrence,
    settings_schema,
    todos,
)
from tenet.social.permissions import permission_table_markdown
from tenet.social.schemas import (
    AgentUpdate,
    AutomationCreate,
    AutomationJobRead,
    AutomationRunRead,
    AutomationUpdate,
    CalendarFeedRead,
    FriendshipCreate,
    FriendshipRead,
    FriendshipStatus,
    GroupCreate,
    GroupInvitationRead,
    GroupInvite,
    GroupMemberRead,
    GroupRead,
    GroupUpdate,
    InboxActionRead,
    InboxMessageRead,
    InboxSummary,
    ItemCreate,
    ItemStatus,
    ItemUpdate,
    JobStatus,
    JobTypeRead,
    MemberUpdate,
    MessageStatus,
    MessageType,
    OccurrenceRead,
    ProfilePublicRead,
    ProfileRead,
    ProfileUpdate,
    RunStatus,
    ScheduleItemRead,
    ScheduleSubscriptionRead,
    SettingsRead,
    SubscriptionCreate,
    SubscriptionUpdate,
    TodoCreate,
    TodoExtract,
    TodoExtracted,
    TodoRead,
    TodoStatus,
    TodoUpdate,
    UserAgentRead,
)
from tenet.social.settings import SocialSettings

TAG = "social"
TAG_DESCRIPTION = (
    "Social collaboration (spec 000): your profile, settings and agent; friendships; groups; schedule items "
    "shared with people and groups; the inbox; todos; automations. Other people's rows answer 404.\n\n"
    "**Item permissions** (first match wins): the owner holds view, invite, edit; else your own subscription; "
    "else, for each group the item is shared with and you are a current member of, the group subscription's "
    "permission within your role's default (creator view+invite+edit, admin view+invite, member view); else "
    "nothing (404). `invite` shares, `edit` changes the item and manages subscriptions; only the owner deletes.\n\n"
    "**Group roles** (a refused role gets 403 `GROUP_ROLE_FORBIDDEN`):\n\n" + permission_table_markdown()
)
OPENAPI_TAGS = [{"name": TAG, "description": TAG_DESCRIPTION}]

PREFIX = API_PREFIX + "/social"
router = APIRouter(prefix=PREFIX, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))
feed_router = APIRouter(prefix=PREFIX, tags=[TAG], route_class=TenetRoute)
ROUTERS = [router, feed_router]

PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The ETag you read, like "3"')]
FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
MAX_WINDOW = timedelta(days=400)


def _own(settings: KernelSettings) -> SocialSettings:
    return section(settings, SocialSettings)


def _default_zone(request: Request) -> str:
    settings: KernelSettings = request.app.state.settings
    return settings.default_timezone


def _page(model: Any, rows: list[Any], cursor: str | None) -> Response:
    return json_response(Page[model](items=[model.model_validate(r) for r in rows], next_cursor=cursor))


# --- profile, settings, agent ---------------------------------------------------------------------------


@router.get("/me/profile", response_model=ProfileRead, summary="Your profile")
async def get_profile(user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.PROFILE_SQL, {"me": user.id}, errors.ProfileNotFound)
    return json_response(ProfileRead.model_validate(row), headers={"ETag": etag(row["version"])})


@router.patch("/me/profile", response_model=ProfileRead, summary="Change your username, avatar or bio",
              responses=problem_responses(422))
async def patch_profile(body: ProfileUpdate, user: CurrentUser, session: SessionDep, now: NowDep) -> ProfileRead:
    changes = body.model_dump(exclude_unset=True)
    if "username" in changes and changes["username"] is None:
        raise _null_username()
    return ProfileRead.model_validate(await profiles.update_profile(session, user_id=user.id, changes=changes,
                                                                    now=now))


def _null_username() -> Exception:
    return ValidationFailed("a required field cannot be null", errors=[{"loc": ["body"], "msg": "cannot be null",
                                                                         "type": "value_error"}])


@router.get("/users/{user_id}/profile", response_model=ProfilePublicRead,
            summary="Another person's profile, as their privacy setting allows (else 404)")
async def get_public_profile(user_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.PUBLIC_PROFILE_SQL, {"me": user.id, "id": user_id},
                            errors.ProfileNotFound)
    return json_response(ProfilePublicRead.model_validate(row))


@router.get("/me/settings", response_model=SettingsRead, summary="Your settings (defaults filled in)")
async def get_settings(user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.SETTINGS_SQL, {"me": user.id}, errors.ProfileNotFound)
    return json_response(SettingsRead(settings=settings_schema.effective(row["settings"], _default_zone(request)),
                                      settings_version=row["settings_version"]))


@router.patch("/me/settings", response_model=SettingsRead,
              summary="Merge a JSON merge patch (RFC 7396) into your settings, atomically",
              description="Sections `preferences` (theme, language, timezone), `privacy` (profile_visible_to, "
                          "activity_visible_to, allow_friend_requests), `notification` (enabled, push_enabled, "
                          "email_enabled, quiet_hours_start, quiet_hours_end). `null` resets a key to its default. "
                          "Unknown keys or wrong types answer 422. Applied in one SQL statement: concurrent "
                          "patches of different keys all survive.",
              responses=problem_responses(409, 422))
async def patch_settings(body: dict[str, Any], user: CurrentUser, session: SessionDep, now: NowDep,
                         request: Request) -> Response:
    row = await profiles.patch_settings(session, user_id=user.id, patch=body, default_timezone=_default_zone(request),
                                        now=now)
    return json_response(SettingsRead(settings=settings_schema.effective(row["settings"], _default_zone(request)),
                                      settings_version=row["settings_version"]))


@router.get("/me/agent", response_model=UserAgentRead, summary="Your agent")
async def get_agent(user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.AGENT_SQL, {"me": user.id}, errors.ProfileNotFound)
    return json_response(UserAgentRead.model_validate(row))


@router.patch("/me/agent", response_model=UserAgentRead, summary="Change your agent (config is merged)",
              responses=problem_responses(409, 422))
async def patch_agent(body: AgentUpdate, user: CurrentUser, session: SessionDep, now: NowDep) -> UserAgentRead:
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    return UserAgentRead.model_validate(await profiles.update_agent(session, user_id=user.id, changes=changes,
                                                                    now=now))


def _feed(request: Request, feed_id: str) -> CalendarFeedRead:
    settings: KernelSettings = request.app.state.settings
    token = profiles.feed_token(settings.signing_key(), feed_id)
    return CalendarFeedRead(url=f"{settings.public_base_url.rstrip('/')}{PREFIX}/me/calendar.ics?token={token}",
                            token=token)


@router.get("/me/calendar-feed", response_model=CalendarFeedRead, summary="Your secret calendar feed address")
async def get_calendar_feed(user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.FEED_SQL, {"me": user.id}, errors.ProfileNotFound)
    return json_response(_feed(request, row["calendar_feed_id"]), headers={"Cache-Control": "no-store"})


@router.post("/me/calendar-feed/reset", response_model=CalendarFeedRead,
             summary="A new feed address; the old one stops working at once",
             description="The answer is a secret (`Cache-Control: no-store`): an `Idempotency-Key` is not honoured, "
                         "so a retried reset makes another address (the one answered last works).")
@not_idempotent
async def reset_calendar_feed(user: CurrentUser, session: SessionDep, now: NowDep, request: Request) -> Response:
    feed_id = await profiles.reset_feed(session, user_id=user.id, now=now)
    return json_response(_feed(request, feed_id), headers={"Cache-Control": "no-store"})


@feed_router.get("/me/calendar.ics", summary="Your calendar as ICS (public, with the feed token)",
                 response_class=Response, responses={200: {"content": {"text/calendar": {}}},
                                                     **problem_responses(404, 422, 429)})
async def calendar_feed(request: Request,
                        token: Annotated[str, Query(min_length=1, max_length=200)]) -> Response:
    settings: KernelSettings = request.app.state.settings
    feed_id = profiles.feed_id_of(settings.signing_key(), token)
    if feed_id is None:
        raise errors.CalendarFeedNotFound()
    at = clock_now(request)
    # A reset feed's old token still verifies: only a feed that exists is counted (no row for a dead one).
    counted = await request.app.state.rate_limiter.consume(
        f"social-calendar-feed:{feed_id}", _own(settings).calendar_feed_limit, at, "calendar feed requests",
        only_if=profiles.feed_exists(feed_id))
    if counted is None:
        raise errors.CalendarFeedNotFound()
    body = await calendar.feed(reads(request), feed_id=feed_id, now=at)
    return Response(content=body, media_type="text/calendar; charset=utf-8",
                    headers={"Cache-Control": "private, max-age=300"})


# --- friendships ---------------------------------------------------------------------------------------


async def _friendship(request: Request, me: uuid.UUID, friendship_id: uuid.UUID) -> FriendshipRead:
    row = await queries.one(reads(request), queries.FRIENDSHIP_SQL, {"me": me, "id": friendship_id},
                            errors.FriendshipNotFound)
    return FriendshipRead.model_validate(row)


@router.post("/friendships", status_code=status.HTTP_201_CREATED, response_model=FriendshipRead,
             summary="Ask someone to be friends (201); their pending request to you is accepted instead (200)",
             responses=problem_responses(409, 422, 429))
async def request_friendship(body: FriendshipCreate, user: CurrentUser, session: SessionDep, now: NowDep,
                             settings: SettingsDep, response: Response) -> FriendshipRead:
    own = _own(settings)
    friendship, created = await friends.request(
        session, user_id=user.id, target_id=body.user_id,
        cooldown=timedelta(days=own.social_friend_request_cooldown_days), inbox_limit=own.social_inbox_write_limit,
        now=now)
    if not created:
        response.status_code = status.HTTP_200_OK
    return _friendship_read(friendship, user.id)


def _friendship_read(f: Any, me: uuid.UUID) -> FriendshipRead:
    return FriendshipRead(id=f.id, user_a=f.user_low_id, user_b=f.user_high_id, status=f.status,
                          initiator_id=f.initiator_id, requested_at=f.requested_at, accepted_at=f.accepted_at,
                          other_user_id=friends.other(f, me), other_username=None,
                          blocked_by=f.blocked_by if f.blocked_by == me else None, closed_reason=f.closed_reason,
                          updated_at=f.updated_at, version=f.version)


@router.get("/friendships", response_model=Page[FriendshipRead], summary="Your friendships",
            description="`status` filters (default: all); `direction` (incoming / outgoing) by who asked.",
            responses=problem_responses(400, 422))
async def list_friendships(user: CurrentUser, request: Request, params: PageDep,
                           status_filter: Annotated[FriendshipStatus | None, Query(alias="status")] = None,
                           direction: Annotated[str | None, Query(pattern="^(incoming|outgoing)$")] = None
                           ) -> Response:
    statuses = [status_filter.value] if status_filter else [s.value for s in FriendshipStatus]
    rows, cursor = await queries.friendships(reads(request), me=user.id, statuses=statuses, direction=direction,
                                             page=params)
    return _page(FriendshipRead, rows, cursor)


@router.get("/friendships/{friendship_id}", response_model=FriendshipRead, summary="One of your friendships")
async def get_friendship(friendship_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    return json_response(await _friendship(request, user.id, friendship_id))


def _friendship_action(action: str):
    async def handler(friendship_id: uuid.UUID, user: CurrentUser, session: SessionDep,
                      now: NowDep) -> FriendshipRead:
        moved = await friends.act(session, friendship_id=friendship_id, user_id=user.id, action=action, now=now)
        return _friendship_read(moved, user.id)

    handler.__name__ = f"{action}_friendship"
    return handler


for _action in ("accept", "decline", "cancel", "block", "unblock"):
    router.post(f"/friendships/{{friendship_id}}/{_action}", response_model=FriendshipRead,
                summary=f"{_action.capitalize()} a friendship", responses=problem_responses(409))(
        _friendship_action(_action))


@router.post("/friendships/blocks", response_model=FriendshipRead,
             summary="Block a person (whether or not you have a friendship with them)",
             responses=problem_responses(409, 422))
async def block_person(body: FriendshipCreate, user: CurrentUser, session: SessionDep, now: NowDep) -> FriendshipRead:
    return _friendship_read(await friends.block_person(session, user_id=user.id, target_id=body.user_id, now=now),
                            user.id)


@router.delete("/friendships/{friendship_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Unfriend",
               responses=problem_responses(409))
async def unfriend(friendship_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await friends.act(session, friendship_id=friendship_id, user_id=user.id, action="unfriend", now=now)


# --- groups --------------------------------------------------------------------------------------------


async def _group(request: Request, me: uuid.UUID, group_id: uuid.UUID) -> GroupRead:
    row = await queries.one(reads(request), queries.GROUP_SQL, {"me": me, "id": group_id}, errors.GroupNotFound)
    return GroupRead.model_validate(row)


@router.post("/groups", status_code=status.HTTP_201_CREATED, response_model=GroupRead,
             summary="Create a group; you are its creator", responses=problem_responses(422, 429))
async def create_group(body: GroupCreate, user: CurrentUser, session: SessionDep, now: NowDep,
                       settings: SettingsDep) -> GroupRead:
    group = await groups.create_group(session, owner_id=user.id, name=body.name, description=body.description,
                                      visibility=body.visibility.value,
                                      creation_limit=_own(settings).social_group_creation_limit, now=now)
    return GroupRead(id=group.id, name=group.name, owner_id=group.owner_id, visibility=group.visibility,
                     status=group.status, description=group.description, my_role="creator", my_status="active",
                     created_at=group.created_at, archived_at=None, version=group.version)


@router.get("/groups", response_model=Page[GroupRead], summary="Your groups, or the public ones",
            responses=problem_responses(400, 422))
async def list_groups(user: CurrentUser, request: Request, params: PageDep,
                      scope: Annotated[str, Query(pattern="^(mine|public)$")] = "mine") -> Response:
    rows, cursor = await queries.groups(reads(request), me=user.id, scope=scope, page=params)
    return _page(GroupRead, rows, cursor)


@router.get("/groups/{group_id}", response_model=GroupRead, summary="A group you belong to, or a public one")
async def get_group(group_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    group = await _group(request, user.id, group_id)
    return json_response(group, headers={"ETag": etag(group.version)})


@router.patch("/groups/{group_id}", response_model=GroupRead, summary="Rename, describe, change visibility",
              responses=problem_responses(409, 412, 422))
async def patch_group(group_id: uuid.UUID, body: GroupUpdate, user: CurrentUser, session: SessionDep, now: NowDep,
                      if_match: IfMatch = None) -> GroupRead:
    changes = {k: (v.value if hasattr(v, "value") else v) for k, v in body.model_dump(exclude_unset=True).items()}
    if changes.get("name", "") is None or changes.get("visibility", "") is None:
        raise _null_username()
    group, member = await groups.update_group(session, group_id=group_id, actor_id=user.id, changes=changes,
                                              expected_version=if_match_version(if_match), now=now)
    return GroupRead(id=group.id, name=group.name, owner_id=group.owner_id, visibility=group.visibility,
                     status=group.status, description=group.description, my_role=member.role,
                     my_status=member.status, created_at=group.created_at, archived_at=group.archived_at,
                     version=group.version)


@router.post("/groups/{group_id}/archive", response_model=GroupRead, summary="Archive the group (creator)",
             responses=problem_responses(409))
async def archive_group(group_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> GroupRead:
    await groups.archive_group(session, group_id=group_id, actor_id=user.id, now=now)
    return await _group_after(session, user.id, group_id)


@router.post("/groups/{group_id}/unarchive", response_model=GroupRead, summary="Unarchive the group (creator)",
             responses=problem_responses(409))
async def unarchive_group(group_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> GroupRead:
    await groups.archive_group(session, group_id=group_id, actor_id=user.id, now=now, unarchive=True)
    return await _group_after(session, user.id, group_id)


async def _group_after(session: Any, me: uuid.UUID, group_id: uuid.UUID) -> GroupRead:
    from sqlalchemy import text

    row = (await session.execute(text(queries.sqlalchemy(queries.GROUP_SQL)), {"me": me, "id": group_id})
           ).mappings().one()
    return GroupRead.model_validate(dict(row))


@router.post("/groups/{group_id}/join", response_model=GroupMemberRead, summary="Join a public group",
             responses=problem_responses(409))
async def join_group(group_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep,
                     settings: SettingsDep) -> GroupMemberRead:
    member = await groups.join(session, group_id=group_id, user_id=user.id,
                               max_members=_own(settings).social_group_max_members, now=now)
    return GroupMemberRead.model_validate(member)


@router.get("/groups/{group_id}/members", response_model=Page[GroupMemberRead],
            summary="Current members, in the order they joined (members only)", responses=problem_responses(400))
async def list_members(group_id: uuid.UUID, user: CurrentUser, request: Request, params: PageDep) -> Response:
    rows, cursor = await queries.members(reads(request), me=user.id, group_id=group_id, page=params)
    return _page(GroupMemberRead, rows, cursor)


@router.post("/groups/{group_id}/invitations", status_code=status.HTTP_201_CREATED,
             response_model=GroupInvitationRead, summary="Invite a friend (creator and admins)",
             responses=problem_responses(409, 422, 429))
async def invite(group_id: uuid.UUID, body: GroupInvite, user: CurrentUser, session: SessionDep, now: NowDep,
                 settings: SettingsDep) -> GroupInvitationRead:
    own = _own(settings)
    message = await groups.invite(session, group_id=group_id, actor_id=user.id, user_id=body.user_id,
                                  inbox_limit=own.social_inbox_write_limit, max_members=own.social_group_max_members,
                                  now=now)
    return GroupInvitationRead(id=message.id, group_id=group_id, user_id=message.recipient_id,
                               invited_by=message.sender_id, status=message.status, created_at=message.created_at)


@router.get("/groups/{group_id}/invitations", response_model=Page[GroupInvitationRead],
            summary="Open invitations (members see their own)")
async def list_invitations(group_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    rows = await reads(request).all(queries.INVITATIONS_SQL, {"me": user.id, "id": group_id})
    if not rows:
        raise errors.GroupNotFound()
    return _page(GroupInvitationRead, [r for r in rows if r["id"] is not None], None)


@router.delete("/groups/{group_id}/invitations/{invitation_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Revoke an open invitation", responses=problem_responses(409))
async def revoke_invitation(group_id: uuid.UUID, invitation_id: uuid.UUID, user: CurrentUser, session: SessionDep,
                            now: NowDep) -> None:
    await groups.revoke_invitation(session, group_id=group_id, invitation_id=invitation_id, actor_id=user.id, now=now)


@router.patch("/groups/{group_id}/members/{user_id}", response_model=GroupMemberRead,
              summary="Change a role (creator; role creator hands the group over), or mute yourself",
              responses=problem_responses(409, 422))
async def patch_member(group_id: uuid.UUID, user_id: uuid.UUID, body: MemberUpdate, user: CurrentUser,
                       session: SessionDep, now: NowDep) -> GroupMemberRead:
    member = await groups.change_member(session, group_id=group_id, actor_id=user.id, user_id=user_id,
                                        role=body.role.value if body.role else None,
                                        status=body.status.value if body.status else None, now=now)
    return GroupMemberRead.model_validate(member)


@router.delete("/groups/{group_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a member, or leave when it is yourself", responses=problem_responses(409))
async def remove_member(group_id: uuid.UUID, user_id: uuid.UUID, user: CurrentUser, session: SessionDep,
                        now: NowDep) -> None:
    await groups.remove_member(session, group_id=group_id, actor_id=user.id, user_id=user_id, now=now)


# --- schedule items --------------------------------------------------------------------------------------


def _item_read(row: Any, bits: int | None = None) -> ScheduleItemRead:
    data = dict(row) if not hasattr(row, "__table__") else {c.name: getattr(row, c.name)
                                                             for c in row.__table__.columns}
    data["my_permission"] = items.names_of(int(bits if bits is not None else data.get("my_bits") or 0))
    return ScheduleItemRead.model_validate(data)


@router.post("/schedule-items", status_code=status.HTTP_201_CREATED, response_model=ScheduleItemRead,
             summary="Create a schedule item you own", responses=problem_responses(422))
async def create_item(body: ItemCreate, user: CurrentUser, session: SessionDep, now: NowDep,
                      request: Request) -> ScheduleItemRead:
    zone = body.timezone or await items.default_timezone_of(session, user.id, _default_zone(request))
    item = await items.create_item(session, owner_id=user.id, title=body.title, description=body.description,
                                   start_at=body.start_at, end_at=body.end_at, timezone=zone,
                                   recurrence_rule=body.recurrence_rule, source_type=body.source_type.value,
                                   status=body.status.value, now=now)
    return _item_read(item, items.ALL)


def _window(window_from: datetime | None, window_to: datetime | None, limit: timedelta = MAX_WINDOW
            ) -> tuple[datetime, datetime]:
    if window_from is None and window_to is None:
        return FAR_PAST, FAR_FUTURE
    if window_from is None or window_to is None:
        raise errors.ScheduleWindowInvalid("give both from and to, or neither")
    if window_from.tzinfo is None or window_to.tzinfo is None:
        raise errors.ScheduleWindowInvalid("from and to need a time zone offset")
    if not (recurrence.in_range(window_from) and recurrence.SUPPORTED_FROM < window_to <= recurrence.SUPPORTED_UNTIL):
        raise errors.ScheduleWindowInvalid(f"from and to lie {recurrence.RANGE_TEXT}")
    if window_to <= window_from or window_to - window_from > limit:
        raise errors.ScheduleWindowInvalid(f"from < to, at most {limit.days} days apart")
    return window_from, window_to


@router.get("/schedule-items", response_model=Page[ScheduleItemRead],
            summary="Items you own or are subscribed to (directly or through a group), by start",
            description="With `from` and `to` (at most 400 days apart) only items with an occurrence that may "
                        "overlap the window; a recurring series is listed once (its occurrences: "
                        "`/schedule-items/{id}/occurrences`).",
            responses=problem_responses(400, 422))
async def list_items(user: CurrentUser, request: Request, params: PageDep,
                     window_from: Annotated[datetime | None, Query(alias="from")] = None,
                     window_to: Annotated[datetime | None, Query(alias="to")] = None,
                     scope: Annotated[str, Query(pattern="^(owned|subscribed|all)$")] = "all",
                     status_filter: Annotated[ItemStatus | None, Query(alias="status")] = None) -> Response:
    start, end = _window(window_from, window_to)
    rows, cursor = await queries.window(reads(request), me=user.id, window_from=start, window_to=end, scope=scope,
                                        status=status_filter.value if status_filter else None, page=params)
    return json_response(Page[ScheduleItemRead](items=[_item_read(r) for r in rows], next_cursor=cursor))


@router.get("/schedule-items/{item_id}", response_model=ScheduleItemRead, summary="An item you may view")
async def get_item(item_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    row = await queries.item(reads(request), me=user.id, item_id=item_id)
    return json_response(_item_read(row), headers={"ETag": etag(row["version"])})


@router.patch("/schedule-items/{item_id}", response_model=ScheduleItemRead, summary="Change an item (edit)",
              responses=problem_responses(409, 412, 422))
async def patch_item(item_id: uuid.UUID, body: ItemUpdate, user: CurrentUser, session: SessionDep, now: NowDep,
                     if_match: IfMatch = None) -> ScheduleItemRead:
    changes = body.model_dump(exclude_unset=True)
    for name in ("title", "start_at", "end_at", "timezone", "source_type", "status"):
        if name in changes and changes[name] is None:
            raise errors.ScheduleItemInvalid(f"{name} cannot be null")
    changes = {k: (v.value if hasattr(v, "value") else v) for k, v in changes.items()}
    item, bits = await items.update_item(session, item_id=item_id, actor_id=user.id, changes=changes,
                                         expected_version=if_match_version(if_match), if_match=True, now=now)
    return _item_read(item, bits)


@router.delete("/schedule-items/{item_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete an item (owner): subscriptions go, todos taken from it are archived")
async def delete_item(item_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await items.delete_item(session, item_id=item_id, actor_id=user.id, now=now)


@router.get("/schedule-items/{item_id}/occurrences", response_model=Page[OccurrenceRead],
            summary="The item's occurrences in a window (DST-correct in the item's time zone)",
            responses=problem_responses(422))
async def list_occurrences(item_id: uuid.UUID, user: CurrentUser, request: Request,
                           window_from: Annotated[datetime, Query(alias="from")],
                           window_to: Annotated[datetime, Query(alias="to")],
                           limit: Annotated[int, Query(ge=1, le=200)] = 200) -> Response:
    start, end = _window(window_from, window_to)
    row = await queries.item(reads(request), me=user.id, item_id=item_id)
    found = await anyio.to_thread.run_sync(partial(
        recurrence.occurrences, start_at=row["start_at"], end_at=row["end_at"], timezone=row["timezone"],
        recurrence_rule=row["recurrence_rule"], series_end_at=row["series_end_at"], window_from=start, window_to=end,
        limit=limit))
    return json_response(Page[OccurrenceRead](items=[OccurrenceRead(item_id=item_id, **o.__dict__) for o in found],
                                              next_cursor=None))


@router.get("/schedule-items/{item_id}/subscriptions", response_model=Page[ScheduleSubscriptionRead],
            summary="Who is subscribed (pending offers: editors only)")
async def list_subscriptions(item_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    rows = await reads(request).all(queries.SUBSCRIPTIONS_SQL.format(permission=items.PERMISSION_SQL),
                                    {"me": user.id, "id": item_id})
    if not rows:
        raise errors.ScheduleItemNotFound()
    return _page(ScheduleSubscriptionRead, [r for r in rows if r["id"] is not None], None)


@router.post("/schedule-items/{item_id}/subscriptions", status_code=status.HTTP_201_CREATED,
             response_model=ScheduleSubscriptionRead,
             summary="Offer the item to a person (pending until they accept in their inbox) or share it with a "
                     "group you are in (active at once)", responses=problem_responses(409, 422, 429))
async def share_item(item_id: uuid.UUID, body: SubscriptionCreate, user: CurrentUser, session: SessionDep,
                     now: NowDep, settings: SettingsDep) -> ScheduleSubscriptionRead:
    subscription = await items.share(
        session, item_id=item_id, actor_id=user.id, subject_type=body.subject_type.value,
        subject_id=body.subject_id, permission=[p.value for p in body.permission] if body.permission else None,
        notify_level=body.notify_level.value, inbox_limit=_own(settings).social_inbox_write_limit, now=now)
    return ScheduleSubscriptionRead.model_validate(subscription)


@router.patch("/schedule-items/{item_id}/subscriptions/{subscription_id}", response_model=ScheduleSubscriptionRead,
              summary="Change a subscription's permission (edit) or notify level; pause or resume your own",
              responses=problem_responses(409, 422))
async def patch_subscription(item_id: uuid.UUID, subscription_id: uuid.UUID, body: SubscriptionUpdate,
                             user: CurrentUser, session: SessionDep, now: NowDep) -> ScheduleSubscriptionRead:
    subscription = await items.update_subscription(
        session, item_id=item_id, subscription_id=subscription_id, actor_id=user.id,
        permission=[p.value for p in body.permission] if body.permission is not None else None,
        notify_level=body.notify_level.value if body.notify_level else None,
        status=body.status.value if body.status else None, now=now)
    return ScheduleSubscriptionRead.model_validate(subscription)


@router.delete("/schedule-items/{item_id}/subscriptions/{subscription_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Unsubscribe, revoke (edit) or withdraw an offer")
async def delete_subscription(item_id: uuid.UUID, subscription_id: uuid.UUID, user: CurrentUser,
                              session: SessionDep, now: NowDep) -> None:
    await items.delete_subscription(session, item_id=item_id, subscription_id=subscription_id, actor_id=user.id,
                                    now=now)


# --- inbox ---------------------------------------------------------------------------------------------


@router.get("/inbox", response_model=Page[InboxMessageRead], summary="Your inbox, newest first",
            description="`status`: one or a comma-separated list (default: all).",
            responses=problem_responses(400, 422))
async def list_inbox(user: CurrentUser, request: Request, params: PageDep,
                     status_filter: Annotated[str | None, Query(alias="status", max_length=100)] = None,
                     message_type: Annotated[MessageType | None, Query()] = None) -> Response:
    statuses = None
    if status_filter:
        statuses = [s.strip() for s in status_filter.split(",") if s.strip()]
        known = {s.value for s in MessageStatus}
        if not statuses or not set(statuses) <= known:
            raise ValidationFailed(f"status: one or more of {', '.join(sorted(known))}")
    rows, cursor = await queries.inbox(reads(request), me=user.id, statuses=statuses,
                                       message_type=message_type.value if message_type else None, page=params)
    return _page(InboxMessageRead, rows, cursor)


@router.get("/inbox/summary", response_model=InboxSummary, summary="How many messages wait for you")
async def inbox_summary(user: CurrentUser, request: Request) -> Response:
    row = await reads(request).one(queries.INBOX_SUMMARY_SQL, {"me": user.id})
    return json_response(InboxSummary(pending_count=row["pending_count"] if row else 0))


@router.get("/inbox/{message_id}", response_model=InboxMessageRead, summary="One of your messages")
async def get_message(message_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.INBOX_ONE_SQL, {"me": user.id, "id": message_id},
                            errors.InboxMessageNotFound)
    return json_response(InboxMessageRead.model_validate(row))


@router.post("/inbox/{message_id}/read", response_model=InboxMessageRead, summary="Mark a message read",
             responses=problem_responses(409))
async def read_message(message_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep
                       ) -> InboxMessageRead:
    return InboxMessageRead.model_validate(await inbox.read(session, message_id=message_id, user_id=user.id, now=now))


@router.post("/inbox/{message_id}/dismiss", response_model=InboxMessageRead,
             summary="Dismiss an informational message (requests and offers are answered instead)",
             responses=problem_responses(409))
async def dismiss_message(message_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep
                          ) -> InboxMessageRead:
    return InboxMessageRead.model_validate(await inbox.dismiss(session, message_id=message_id, user_id=user.id,
                                                               now=now))


def _answer(accept: bool):
    async def handler(message_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep,
                      settings: SettingsDep) -> InboxActionRead:
        message, effect = await inbox.answer(session, message_id=message_id, user_id=user.id, accept=accept,
                                             max_members=_own(settings).social_group_max_members, now=now)
        return InboxActionRead.model_validate({**InboxMessageRead.model_validate(message).model_dump(),
                                               "effect": effect})

    handler.__name__ = "accept_message" if accept else "reject_message"
    return handler


router.post("/inbox/{message_id}/accept", response_model=InboxActionRead,
            summary="Accept: the friendship, the group membership or the subscription happens with it",
            responses=problem_responses(409))(_answer(True))
router.post("/inbox/{message_id}/reject", response_model=InboxActionRead, summary="Reject a request or offer",
            responses=problem_responses(409))(_answer(False))


# --- todos ---------------------------------------------------------------------------------------------


@router.post("/todos", status_code=status.HTTP_201_CREATED, response_model=TodoRead, summary="Create a todo",
             responses=problem_responses(422))
async def create_todo(body: TodoCreate, user: CurrentUser, session: SessionDep, now: NowDep) -> TodoRead:
    todo = await todos.create_todo(session, owner_id=user.id, title=body.title, description=body.description,
                                   due_at=body.due_at, priority=body.priority.value, source_ids=body.source_ids,
                                   now=now)
    return _todo_read(todo)


def _todo_read(todo: Any) -> TodoRead:
    return TodoRead.model_validate({**{c.name: getattr(todo, c.name) for c in todo.__table__.columns},
                                    "occurrence_start": todo.source_occurrence_start})


@router.get("/todos", response_model=Page[TodoRead], summary="Your todos",
            description="`status=pending` lists by due date (todos without one last), optionally only those due "
                        "before `due_before`; otherwise newest first.", responses=problem_responses(400, 422))
async def list_todos(user: CurrentUser, request: Request, params: PageDep,
                     status_filter: Annotated[TodoStatus | None, Query(alias="status")] = None,
                     due_before: Annotated[datetime | None, Query()] = None) -> Response:
    if due_before is not None and (status_filter != TodoStatus.PENDING or due_before.tzinfo is None):
        raise errors.ScheduleWindowInvalid("due_before needs status=pending and a time zone offset")
    rows, cursor = await queries.todos(reads(request), me=user.id,
                                       status=status_filter.value if status_filter else None, due_before=due_before,
                                       page=params)
    return _page(TodoRead, rows, cursor)


@router.post("/todos/extract", response_model=TodoExtracted,
             summary="Todos from items you may view (one per occurrence; never twice)",
             description="Without a window: a single item's todo, or a series' next occurrence that has not "
                         "ended; with `from`/`to` (at most 31 days): every occurrence starting in it.",
             responses=problem_responses(422))
async def extract_todos(body: TodoExtract, user: CurrentUser, session: SessionDep, now: NowDep) -> TodoExtracted:
    window = None
    if body.from_ is not None or body.to is not None:
        window = _window(body.from_, body.to, todos.MAX_WINDOW)
    found, created, existing = await todos.extract(session, owner_id=user.id, item_ids=body.schedule_item_ids,
                                                   window=window, priority=body.priority.value, now=now)
    return TodoExtracted(items=[_todo_read(t) for t in found], created_ids=created, existing_ids=existing)


@router.get("/todos/{todo_id}", response_model=TodoRead, summary="One of your todos")
async def get_todo(todo_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    row = await queries.one(reads(request), queries.TODO_ONE_SQL, {"me": user.id, "id": todo_id}, errors.TodoNotFound)
    return json_response(TodoRead.model_validate(row), headers={"ETag": etag(row["version"])})


@router.patch("/todos/{todo_id}", response_model=TodoRead, summary="Change a todo (status included)",
              responses=problem_responses(409, 412, 422))
async def patch_todo(todo_id: uuid.UUID, body: TodoUpdate, user: CurrentUser, session: SessionDep, now: NowDep,
                     if_match: IfMatch = None) -> TodoRead:
    changes = {k: (v.value if hasattr(v, "value") else v) for k, v in body.model_dump(exclude_unset=True).items()}
    for name in ("title", "priority", "status", "source_ids"):
        if name in changes and changes[name] is None:
            raise errors.ScheduleItemInvalid(f"{name} cannot be null")
    todo = await todos.update_todo(session, todo_id=todo_id, owner_id=user.id, changes=changes,
                                   expected_version=if_match_version(if_match), now=now)
    return _todo_read(todo)


@router.post("/todos/{todo_id}/complete", response_model=TodoRead, summary="Mark done (again: unchanged)",
             responses=problem_responses(409))
async def complete_todo(todo_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> TodoRead:
    return _todo_read(await todos.complete(session, todo_id=todo_id, owner_id=user.id, now=now))


@router.delete("/todos/{todo_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete one of your todos")
async def delete_todo(todo_id: uuid.UUID, user: CurrentUser, session: SessionDep) -> None:
    await todos.delete_todo(session, todo_id=todo_id, owner_id=user.id)


# --- automations ---------------------------------------------------------------------------------------


def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


@router.get("/automation-job-types", response_model=list[JobTypeRead], summary="What automations can do")
async def job_types(user: CurrentUser) -> list[JobTypeRead]:
    return [JobTypeRead(job_type=t.name, description=t.description, target_types=list(t.target_types),
                        params_schema=t.params_schema(), misfire_grace_seconds=int(t.grace.total_seconds()))
            for t in automations.REGISTRY.values()]


async def _job(session_or_reads: Any, me: uuid.UUID, job_id: uuid.UUID, zone: str) -> AutomationJobRead:
    row = await queries.one(session_or_reads, queries.JOB_SQL, {"me": me, "id": job_id, "tz": zone},
                            errors.AutomationNotFound)
    return AutomationJobRead.model_validate(row)


async def _job_in(session: Any, me: uuid.UUID, job_id: uuid.UUID, zone: str) -> AutomationJobRead:
    from sqlalchemy import text

    row = (await session.execute(text(queries.sqlalchemy(queries.JOB_SQL)), {"me": me, "id": job_id, "tz": zone})
           ).mappings().one()
    return AutomationJobRead.model_validate(dict(row))


@router.post("/automations", status_code=status.HTTP_201_CREATED, response_model=AutomationJobRead,
             summary="Create a daily or weekly automation (in your time zone)",
             responses=problem_responses(409, 422))
async def create_automation(body: AutomationCreate, user: CurrentUser, session: SessionDep, now: NowDep,
                            settings: SettingsDep, request: Request) -> AutomationJobRead:
    job = await automations.create_job(
        session, owner_id=user.id, name=body.name, job_type=body.job_type, target_type=body.target_type.value,
        target_id=body.target_id, params=body.params, schedule_type=body.schedule_type.value,
        schedule_time=_clock(body.schedule_time), schedule_weekday=body.schedule_weekday, status=body.status.value,
        limit=_own(settings).social_automations_per_user, default_timezone=_default_zone(request), now=now)
    return await _job_in(session, user.id, job.id, _default_zone(request))


@router.get("/automations", response_model=Page[AutomationJobRead], summary="Your automations",
            responses=problem_responses(400, 422))
async def list_automations(user: CurrentUser, request: Request, params: PageDep,
                           status_filter: Annotated[JobStatus | None, Query(alias="status")] = None) -> Response:
    keyset = queries.JOBS_KEYSET
    after, extra = keyset.after(params)
    rows = await reads(request).all(
        queries.JOBS_SQL.format(status="j.status = %(status)s" if status_filter else "TRUE", after=after,
                                order=keyset.order_by),
        {"me": user.id, "tz": _default_zone(request), "status": status_filter.value if status_filter else None,
         "limit": keyset.fetch_limit(params), **extra})
    found, cursor = keyset.page(rows, params, key=lambda r: (r["created_at"], r["id"]))
    return _page(AutomationJobRead, found, cursor)


@router.get("/automations/{job_id}", response_model=AutomationJobRead, summary="One of your automations")
async def get_automation(job_id: uuid.UUID, user: CurrentUser, request: Request) -> Response:
    job = await _job(reads(request), user.id, job_id, _default_zone(request))
    return json_response(job, headers={"ETag": etag(job.version)})


@router.patch("/automations/{job_id}", response_model=AutomationJobRead,
              summary="Change an automation (a new schedule moves its next run)",
              responses=problem_responses(409, 412, 422))
async def patch_automation(job_id: uuid.UUID, body: AutomationUpdate, user: CurrentUser, session: SessionDep,
                           now: NowDep, request: Request, if_match: IfMatch = None) -> AutomationJobRead:
    changes = {k: (v.value if hasattr(v, "value") else v) for k, v in body.model_dump(exclude_unset=True).items()}
    if any(changes.get(n, "") is None for n in ("name", "params", "schedule_type", "schedule_time", "target_type")):
        raise errors.AutomationInvalid("name, params, schedule_type, schedule_time and target_type cannot be null")
    if "schedule_time" in changes:
        changes["schedule_time"] = _clock(changes["schedule_time"])
    await automations.update_job(session, job_id=job_id, owner_id=user.id, changes=changes,
                                 expected_version=if_match_version(if_match),
                                 default_timezone=_default_zone(request), now=now)
    return await _job_in(session, user.id, job_id, _default_zone(request))


@router.delete("/automations/{job_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete an automation")
async def delete_automation(job_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep) -> None:
    await automations.delete_job(session, job_id=job_id, owner_id=user.id, now=now)


def _toggle(enabled: bool):
    async def handler(job_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep,
                      request: Request) -> AutomationJobRead:
        await automations.set_enabled(session, job_id=job_id, owner_id=user.id, enabled=enabled,
                                      default_timezone=_default_zone(request), now=now)
        return await _job_in(session, user.id, job_id, _default_zone(request))

    handler.__name__ = "enable_automation" if enabled else "disable_automation"
    return handler


router.post("/automations/{job_id}/enable", response_model=AutomationJobRead, summary="Enable (from the next slot)",
            responses=problem_responses(409))(_toggle(True))
router.post("/automations/{job_id}/disable", response_model=AutomationJobRead, summary="Disable",
            responses=problem_responses(409))(_toggle(False))


@router.post("/automations/{job_id}/run-now", status_code=status.HTTP_202_ACCEPTED,
             response_model=AutomationRunRead, summary="Queue a run now (the worker runs it within a minute)",
             description="One manual run of a job at a time: while one is queued or running (retries included), "
                         "another request answers 409 `AUTOMATION_RUN_IN_PROGRESS`.",
             responses=problem_responses(409))
async def run_automation_now(job_id: uuid.UUID, user: CurrentUser, session: SessionDep, now: NowDep,
                             settings: SettingsDep) -> AutomationRunRead:
    run = await automations.run_now(session, job_id=job_id, owner_id=user.id,
                                    max_attempts=_own(settings).automation_max_attempts, now=now)
    return AutomationRunRead.model_validate({**{c.name: getattr(run, c.name) for c in run.__table__.columns},
                                             "next_attempt_at": run.available_at})


@router.get("/automations/{job_id}/runs", response_model=Page[AutomationRunRead],
            summary="The automation's runs, newest first", responses=problem_responses(400, 422))
async def list_runs(job_id: uuid.UUID, user: CurrentUser, request: Request, params: PageDep,
                    status_filter: Annotated[RunStatus | None, Query(alias="status")] = None) -> Response:
    keyset = queries.RUNS_KEYSET
    after, extra = keyset.after(params)
    rows = await reads(request).all(
        queries.RUNS_SQL.format(status="r.status = %(status)s" if status_filter else "TRUE", after=after,
                                order=keyset.order_by),
        {"me": user.id, "id": job_id, "status": status_filter.value if status_filter else None,
         "limit": keyset.fetch_limit(params), **extra})
    if not rows:
        raise errors.AutomationNotFound()
    found = [r for r in rows if r["id"] is not None]
    page, cursor = keyset.page(found, params, key=lambda r: (r["scheduled_at"], r["id"]))
    return _page(AutomationRunRead, page, cursor)

