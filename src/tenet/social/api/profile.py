"""Routes of your profile, settings and agent, another person's profile, and the calendar feed."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import NowDep, SessionDep, reads
from tenet.deps import now as clock_now
from tenet.iam.auth import CurrentUser
from tenet.kernel.http import TenetRoute, etag, json_response, problem_responses
from tenet.kernel.idempotency import not_idempotent
from tenet.kernel.settings import KernelSettings
from tenet.social import calendar, errors, profiles, queries, settings_schema
from tenet.social.api._common import PREFIX, TAG, default_zone, null_field, own, reread, social_router
from tenet.social.schemas import (
    AgentUpdate,
    CalendarFeedRead,
    ProfilePublicRead,
    ProfileRead,
    ProfileUpdate,
    SettingsRead,
    UserAgentRead,
)

router = social_router()
# The feed is public (its token is the credential): none of the signed-in routes' statuses apply.
feed_router = APIRouter(prefix=PREFIX, tags=[TAG], route_class=TenetRoute)


@router.get("/me/profile", response_model=ProfileRead, summary="Your profile")
async def get_profile(principal: CurrentUser, request: Request) -> Response:
    row = await queries.profile(reads(request), principal_id=principal.id)
    return json_response(ProfileRead.model_validate(row), headers={"ETag": etag(row["version"])})


@router.patch("/me/profile", response_model=ProfileRead, summary="Change your username, avatar or bio",
              responses=problem_responses(422))
async def patch_profile(body: ProfileUpdate, principal: CurrentUser, session: SessionDep, now: NowDep) -> ProfileRead:
    changes = body.model_dump(exclude_unset=True)
    if "username" in changes and changes["username"] is None:
        raise null_field()
    await profiles.update_profile(session, principal_id=principal.id, changes=changes, now=now)
    return ProfileRead.model_validate(await queries.profile(await reread(session), principal_id=principal.id))


@router.get("/users/{user_id}/profile", response_model=ProfilePublicRead,
            summary="Another person's profile, as their privacy setting allows (else 404)")
async def get_public_profile(user_id: uuid.UUID, principal: CurrentUser, request: Request) -> Response:
    row = await queries.public_profile(reads(request), principal_id=principal.id, user_id=user_id)
    return json_response(ProfilePublicRead.model_validate(row))


def _settings(row: dict[str, Any], request: Request) -> SettingsRead:
    return SettingsRead(settings=settings_schema.effective(row["settings"], default_zone(request)),
                        settings_version=row["settings_version"])


@router.get("/me/settings", response_model=SettingsRead, summary="Your settings (defaults filled in)")
async def get_settings(principal: CurrentUser, request: Request) -> Response:
    return json_response(_settings(await queries.settings(reads(request), principal_id=principal.id), request))


@router.patch("/me/settings", response_model=SettingsRead,
              summary="Merge a JSON merge patch (RFC 7396) into your settings, atomically",
              description="Sections `preferences` (theme, language, timezone), `privacy` (profile_visible_to, "
                          "activity_visible_to, allow_friend_requests), `notification` (enabled, push_enabled, "
                          "email_enabled, quiet_hours_start, quiet_hours_end). `null` resets a key to its default. "
                          "Unknown keys or wrong types answer 422. Applied in one SQL statement: concurrent "
                          "patches of different keys all survive.",
              responses=problem_responses(409, 422))
async def patch_settings(body: dict[str, Any], principal: CurrentUser, session: SessionDep, now: NowDep,
                         request: Request) -> Response:
    await profiles.patch_settings(session, principal_id=principal.id, patch=body,
                                  default_timezone=default_zone(request), now=now)
    return json_response(_settings(await queries.settings(await reread(session), principal_id=principal.id), request))


@router.get("/me/agent", response_model=UserAgentRead, summary="Your agent")
async def get_agent(principal: CurrentUser, request: Request) -> Response:
    return json_response(UserAgentRead.model_validate(await queries.agent(reads(request), principal_id=principal.id)))


@router.patch("/me/agent", response_model=UserAgentRead, summary="Change your agent (config is merged)",
              responses=problem_responses(409, 422))
async def patch_agent(body: AgentUpdate, principal: CurrentUser, session: SessionDep, now: NowDep) -> UserAgentRead:
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    await profiles.update_agent(session, principal_id=principal.id, changes=changes, now=now)
    return UserAgentRead.model_validate(await queries.agent(await reread(session), principal_id=principal.id))


def _feed(request: Request, feed_id: str) -> CalendarFeedRead:
    settings: KernelSettings = request.app.state.settings
    token = profiles.feed_token(settings.signing_key(), feed_id)
    return CalendarFeedRead(url=f"{settings.public_base_url.rstrip('/')}{PREFIX}/me/calendar.ics?token={token}",
                            token=token)


@router.get("/me/calendar-feed", response_model=CalendarFeedRead, summary="Your secret calendar feed address")
async def get_calendar_feed(principal: CurrentUser, request: Request) -> Response:
    feed_id = await queries.feed_id(reads(request), principal_id=principal.id)
    return json_response(_feed(request, feed_id), headers={"Cache-Control": "no-store"})


@router.post("/me/calendar-feed/reset", response_model=CalendarFeedRead,
             summary="A new feed address; the old one stops working at once",
             description="The answer is a secret (`Cache-Control: no-store`): an `Idempotency-Key` is not honoured, "
                         "so a retried reset makes another address (the one answered last works).")
@not_idempotent
async def reset_calendar_feed(principal: CurrentUser, session: SessionDep, now: NowDep, request: Request) -> Response:
    await profiles.reset_feed(session, principal_id=principal.id, now=now)
    feed_id = await queries.feed_id(await reread(session), principal_id=principal.id)
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
        f"social-calendar-feed:{feed_id}", own(settings).calendar_feed_limit, at, "calendar feed requests",
        only_if=profiles.feed_exists(feed_id))
    if counted is None:
        raise errors.CalendarFeedNotFound()
    body = await calendar.feed(reads(request), feed_id=feed_id, now=at)
    return Response(content=body, media_type="text/calendar; charset=utf-8",
                    headers={"Cache-Control": "private, max-age=300"})
