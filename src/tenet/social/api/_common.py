"""What the social route modules share (no routes here): the prefix and tag, the dependencies they take, how an
answer is re-read, and the parsing of a few query and body values."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from tenet.kernel.errors import ValidationFailed
from tenet.kernel.http import API_PREFIX, TenetRoute, json_response, problem_responses
from tenet.kernel.pagination import Page, PageParams, page_params
from tenet.kernel.reads import Runner
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.social import errors, recurrence
from tenet.social.settings import SocialSettings

TAG = "social"
PREFIX = API_PREFIX + "/social"

PageDep = Annotated[PageParams, Depends(page_params)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description='The ETag you read, like "3"')]
FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
MAX_WINDOW = timedelta(days=400)


def social_router() -> APIRouter:
    """A router of the social tag (signed-in users; others' rows answer 404)."""
    return APIRouter(prefix=PREFIX, tags=[TAG], route_class=TenetRoute, responses=problem_responses(401, 403, 404))


def own(settings: KernelSettings) -> SocialSettings:
    return section(settings, SocialSettings)


def default_zone(request: Request) -> str:
    settings: KernelSettings = request.app.state.settings
    return settings.default_timezone


async def reread(session: AsyncSession) -> Runner:
    """The unit of work as a query runner: a command's answer is read back through the query function its GET
    uses, inside the command's transaction (after what the session holds is flushed), so the two answer the
    same body."""
    await session.flush()
    return await statements(session)


def page(model: Any, rows: list[Any], cursor: str | None) -> Response:
    return json_response(Page[model](items=[model.model_validate(r) for r in rows], next_cursor=cursor))


def values_of(changes: dict[str, Any]) -> dict[str, Any]:
    """A body's fields with enum members as their values (what the commands store)."""
    return {k: (v.value if hasattr(v, "value") else v) for k, v in changes.items()}


def null_field() -> ValidationFailed:
    return ValidationFailed("a required field cannot be null", errors=[{"loc": ["body"], "msg": "cannot be null",
                                                                         "type": "value_error"}])


def clock_time(value: str) -> time:
    """A validated `HH:MM` body value as a wall time."""
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def window(window_from: datetime | None, window_to: datetime | None, limit: timedelta = MAX_WINDOW
           ) -> tuple[datetime, datetime]:
    """A `from`/`to` pair: both or neither (everything), with offsets, in the supported range, at most `limit`
    apart."""
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
