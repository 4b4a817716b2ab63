"""The series recurrence builder (issue 18): weekly on chosen days, every N weeks, ending after a count or on a date.
The page builds the RFC 5545 RRULE, shows it with the dates it gives (the series commands' own `series.dates`, with
the same limits), and creates the series through the API's request model and command (`SeriesCreate`,
`series.create_series`). Offered to holders of `meeting:series:manage`, the point `POST /series` checks."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from tenet.kernel.errors import DomainError
from tenet.kernel.settings import KernelSettings
from tenet.meetings import series, service
from tenet.meetings.permissions import Permission
from tenet.meetings.schemas import SeriesCreate
from tenet.web import console
from tenet.web.console import PREFIX, ConsoleRoute, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
TEXT_FIELDS = ("title", "location", "city", "timezone", "start_date", "start_local_time", "duration_minutes",
               "interval", "count", "until", "ends")
FIELD_OF_CODE = {"RECURRENCE_INVALID": "days", "RECURRENCE_TOO_LONG": "ends", "MEETING_TIME_INVALID": "start_date",
                 "TIMEZONE_INVALID": "timezone"}
PREVIEW = 12  # dates shown under the rule


class FormProblems(Exception):
    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(problems)
        self.problems = problems


def rrule(values: dict[str, Any]) -> str:
    """The RRULE the builder's choices mean (FREQ=WEEKLY;INTERVAL=n;BYDAY=...;COUNT=c or UNTIL=yyyymmdd)."""
    days = [d for d in DAYS if d in values["days"]]
    if not days:
        raise FormProblems({"days": "RECURRENCE_INVALID"})
    interval = values["interval"] or "1"
    if not interval.isdigit() or not 1 <= int(interval) <= 52:
        raise FormProblems({"interval": "VALIDATION_FAILED"})
    parts = ["FREQ=WEEKLY"] + ([f"INTERVAL={int(interval)}"] if int(interval) > 1 else []) + [f"BYDAY={','.join(days)}"]
    if values["ends"] == "until":
        try:
            parts.append(f"UNTIL={date.fromisoformat(values['until']):%Y%m%d}")
        except ValueError:
            raise FormProblems({"until": "VALIDATION_FAILED"}) from None
    else:
        if not values["count"].isdigit() or int(values["count"]) < 1:
            raise FormProblems({"count": "VALIDATION_FAILED"})
        parts.append(f"COUNT={int(values['count'])}")
    return ";".join(parts)


def _posted(form: Any) -> dict[str, Any]:
    values: dict[str, Any] = {name: str(form.get(name, ""))[:200].strip() for name in TEXT_FIELDS}
    values["days"] = [d for d in form.getlist("days") if d in DAYS]
    values["ends"] = "until" if values["ends"] == "until" else "count"
    return values


def _body(values: dict[str, Any], rule: str) -> dict[str, Any]:
    body: dict[str, Any] = {"rrule": rule, "title": values["title"]}
    for name in ("location", "city", "timezone", "start_date", "start_local_time", "duration_minutes"):
        if values[name]:
            body[name] = values[name]
    try:
        parsed = SeriesCreate.model_validate(body)
    except ValidationError as exc:
        raise FormProblems({str(e["loc"][0]) if e["loc"] else "form": "VALIDATION_FAILED"
                            for e in exc.errors()}) from None
    return parsed.model_dump(exclude={"template_id"})


def _form(request: Request, viewer: Viewer, values: dict[str, Any], *, rule: str | None = None,
          dates: list[date] | None = None, problems: dict[str, str] | None = None, status_code: int = 200) -> Response:
    return console.render(request, viewer, "meetings/series_form.html", status_code=status_code, active="meetings",
                          values=values, days=DAYS, rule=rule, dates=(dates or [])[:PREVIEW],
                          total=len(dates or []), problems=problems or {},
                          day_names=viewer.formats.weekday_names())


@router.get("/series/new")
async def new_series_form(request: Request) -> Response:
    viewer = await console.signed_in(request)
    viewer.require(Permission.SERIES_MANAGE)
    settings: KernelSettings = request.app.state.settings
    values: dict[str, Any] = {name: "" for name in TEXT_FIELDS}
    values.update(timezone=viewer.zone or settings.default_timezone, days=[], interval="1", count="10",
                  ends="count", duration_minutes="60", start_local_time="10:00")
    return _form(request, viewer, values)


@router.post("/series/new")
async def build_series(request: Request) -> Response:
    """`intent=preview` shows the rule and its dates; `intent=create` makes the series and its meetings."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    viewer.require(Permission.SERIES_MANAGE)
    assert viewer.principal is not None
    values = _posted(form)
    policy = service.MeetingPolicy.from_settings(request.app.state.settings)
    rule = None
    try:
        rule = rrule(values)
        fields = _body(values, rule)
        dates = series.dates(rule, fields["start_date"], fields["timezone"] or policy.default_timezone,
                             limit=policy.series_max_occurrences)
        if form.get("intent") != "create":
            return _form(request, viewer, values, rule=rule, dates=dates)
        async with request.app.state.db.unit_of_work() as session:
            made, _, _ = await series.create_series(session, principal_id=viewer.principal.id, fields=fields,
                                                    template_id=None, policy=policy, now=console.now(request))
    except FormProblems as exc:
        return _form(request, viewer, values, rule=rule, problems=exc.problems, status_code=422)
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403, 404):
            raise
        return _form(request, viewer, values, rule=rule, status_code=exc.status,
                     problems={FIELD_OF_CODE.get(str(exc.code), "form"): str(exc.code)})
    return console.see_other(f"{PREFIX}/meetings?scope=all&series={made.id}")
