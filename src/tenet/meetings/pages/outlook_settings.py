"""The Outlook sync's policy in the console (issues 17 and 18), `/console/outlook/settings`, for holders of
`meeting:outlook:manage` (the point `GET|PUT /outlook/settings` check): subscription lifetime and renewal margin, the
delta window, the reconciliation schedule, the batch size, concurrent Graph requests per mailbox and the retry policy,
each labelled with its unit and range; whether the Graph credentials and the notifications' client state are set
(never a secret). Saving calls the API's command (`policy.update_policy`) with the version the form showed: a value
out of range comes back as the command's `OUTLOOK_POLICY_INVALID` next to its field, in words; a stale form (412) says
someone else changed the policy and shows the values as they are now. Like the API's routes it answers while the
sync is off: an operator may prepare the policy before the secret is deployed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from tenet.deps import reads
from tenet.kernel.errors import DomainError
from tenet.meetings import queries as meeting_queries
from tenet.meetings.outlook import policy, queries
from tenet.meetings.outlook.models import POLICY_DEFAULTS, POLICY_RANGES
from tenet.meetings.pages.outlook import graph_settings, manager
from tenet.web import console, words
from tenet.web.console import PREFIX, ConsoleRoute, Viewer
from tenet.web.i18n import N_

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)
PAGE = f"{PREFIX}/outlook/settings"
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,9}\Z")


@dataclass(frozen=True)
class Field:
    """One field of the form: its label (with the unit and, for numbers, `%(low)s`-`%(high)s` filled from
    POLICY_RANGES, the ranges the command checks)."""

    name: str
    label: str
    low: int | None = None
    high: int | None = None


def _number(name: str, label: str) -> Field:
    low, high = POLICY_RANGES[name]
    return Field(name, label, low, high)


# The policy's fields by what they govern, in the order the form shows them.
GROUPS: tuple[tuple[str, tuple[Field, ...]], ...] = (
    (N_("Subscriptions (Graph's change notifications)"), (
        _number("subscription_lifetime_minutes", N_("Subscription lifetime (minutes, %(low)s to %(high)s)")),
        _number("renewal_margin_minutes",
                N_("Renew this long before expiry (minutes, %(low)s to %(high)s, less than the lifetime)")),
    )),
    (N_("Delta window"), (
        _number("window_days_back", N_("Days before today (days, %(low)s to %(high)s)")),
        _number("window_days_ahead", N_("Days after today (days, %(low)s to %(high)s)")),
    )),
    (N_("Reconciliation"), (
        Field("reconcile_cron", N_("When reconciliation runs (five cron fields: minute hour day month weekday, "
                                   "in UTC)")),
    )),
    (N_("Graph requests"), (
        _number("batch_size", N_("Batch size (events per Graph page, %(low)s to %(high)s)")),
        _number("max_concurrent_requests",
                N_("Concurrent Graph requests per mailbox (requests, %(low)s to %(high)s)")),
    )),
    (N_("Retries of a failing job"), (
        _number("retry_max_attempts", N_("Attempts (attempts, %(low)s to %(high)s)")),
        _number("retry_base_seconds", N_("Base of the growing wait between attempts (seconds, %(low)s to %(high)s)")),
    )),
)
FIELDS = {f.name: f for _, group in GROUPS for f in group}
assert set(FIELDS) == set(POLICY_DEFAULTS), "every policy field is on the form"

# What each refusal says next to its field (the command's `errors`: loc, msg, type).
RANGE_WORDS = N_("Give a whole number from %(low)s to %(high)s.")
MARGIN_WORDS = N_("Renewal must start before the subscription expires: make this shorter than the lifetime.")
CRON_WORDS = N_("Give five cron fields separated by spaces, such as 17 * * * * (minute 17 of every hour).")


@dataclass(frozen=True)
class Problem:
    message: str  # a msgid, with `low` and `high` when it names them
    low: int | None = None
    high: int | None = None


def _values_of(row: Any) -> dict[str, str]:
    return {name: str(row[name]) for name in FIELDS}


def _problem_of(error: dict[str, Any], fields: dict[str, Any]) -> tuple[str, Problem]:
    """The field an error of OUTLOOK_POLICY_INVALID names, and its words."""
    loc = error.get("loc") or []
    name = str(loc[-1]) if loc else "form"
    if error.get("type") == "cron" or name == "reconcile_cron":
        return name, Problem(CRON_WORDS)
    field = FIELDS.get(name)
    if field is None or field.low is None or field.high is None:
        return "form", Problem(words.sentence("OUTLOOK_POLICY_INVALID"))
    value = fields.get(name)
    if name == "renewal_margin_minutes" and isinstance(value, int) and field.low <= value <= field.high:
        return name, Problem(MARGIN_WORDS)  # in its own range: the rule it breaks is "below the lifetime"
    return name, Problem(RANGE_WORDS, field.low, field.high)


async def _page(request: Request, viewer: Viewer, *, values: dict[str, str] | None = None,
                problems: dict[str, Problem] | None = None, notice: str | None = None, saved: bool = False,
                status_code: int = 200) -> Response:
    """The form: the stored policy (or what was typed, with its problems), the version it is a change of."""
    row = await queries.policy(reads(request))
    settings = graph_settings(request)
    changed_by = None
    if row["updated_by_id"] is not None:
        names = await meeting_queries.display_names(reads(request), user_ids=[row["updated_by_id"]])
        changed_by = names.get(row["updated_by_id"])
    return console.render(
        request, viewer, "meetings/outlook_settings.html", status_code=status_code, active="outlook",
        groups=GROUPS, values=values if values is not None else _values_of(row), problems=problems or {},
        version=row["version"], updated_at=row["updated_at"], changed_by=changed_by, notice=notice, saved=saved,
        sync_on=settings.graph_configured,
        client_state_set=settings.graph_notification_client_state is not None,
        graph_base_url=settings.graph_base_url)


@router.get("/outlook/settings")
async def settings_page(request: Request, saved: Annotated[int | None, Query(ge=0, le=1)] = None) -> Response:
    """After a save (a redirect, so a reload does not send it again) the page says it was saved."""
    viewer = await console.signed_in(request)
    manager(viewer)
    return await _page(request, viewer, saved=bool(saved))


@router.post("/outlook/settings")
async def save_settings(request: Request) -> Response:
    """Every field, as `PUT /outlook/settings` takes them, with the version the form showed (If-Match)."""
    viewer = await console.signed_in(request)
    form = await console.posted(request, viewer)
    principal = manager(viewer)
    values = {name: str(form.get(name, ""))[:200].strip() for name in FIELDS}
    problems: dict[str, Problem] = {}
    fields: dict[str, Any] = {}
    for name, field in FIELDS.items():
        if field.low is None:
            fields[name] = " ".join(values[name].split())
        elif _WHOLE_NUMBER.match(values[name].replace(",", "")):
            fields[name] = int(values[name].replace(",", ""))
        else:
            assert field.high is not None
            problems[name] = Problem(RANGE_WORDS, field.low, field.high)
    if problems:
        return await _page(request, viewer, values=values, problems=problems, status_code=422)
    version = str(form.get("version", ""))
    try:
        async with request.app.state.db.unit_of_work() as session:
            await policy.update_policy(session, principal_id=principal.id, fields=fields,
                                       expected_version=int(version) if version.isdigit() else None,
                                       now=console.now(request))
    except DomainError as exc:
        if exc.status >= 500 or exc.status in (401, 403):
            raise
        if str(exc.code) in ("PRECONDITION_FAILED", "VERSION_CONFLICT"):  # the policy as it is now
            return await _page(request, viewer, notice=str(exc.code), status_code=exc.status)
        found = dict(_problem_of(error, fields) for error in reversed(exc.data.get("errors") or []))
        return await _page(request, viewer, values=values, status_code=exc.status,
                           problems=found or {"form": Problem(words.sentence(str(exc.code)))})
    return console.see_other(f"{PAGE}?saved=1")
