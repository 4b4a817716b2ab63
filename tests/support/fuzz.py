"""Schemathesis against the live server with real data: the fuzzed principal owns a real workspace (or
administers real users), and path parameters and id fields of bodies are drawn, most of the time, from rows
that exist. Random ids only ever reach "not found"; real ones reach the service's rules (roles, states, the
last owner, limits).

Each response is recorded as (generation mode, status, problem code) so a test can assert that the calls
got past the membership check, and that this does not silently regress to a wall of 404s.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx
import psycopg
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tenet.kernel.errors import KernelErrorCode

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
PASSWORD = "a long fuzzing password"
TOKEN_IN_LINK = re.compile(r"/invitations/accept\?token=(wsi_[A-Za-z0-9_\-]+)")
RESET_TOKEN_IN_LINK = re.compile(r"/console/password-reset/new\?token=([A-Za-z0-9_.~%\-]+)")
# Answers that say a request never reached the rules it was aimed at: refused by the HTTP layer (parsing,
# validation, authentication, permission points, idempotency keys, cursors), or naming nothing the caller
# may see (a workspace hides itself with 404 from non-members; an unknown id or token). A 404
# MEMBER_NOT_FOUND is past the membership check, so it counts as reached.
NOT_REACHED = ({str(code) for code in KernelErrorCode} - {"CONFLICT"}) | {
    "WORKSPACE_NOT_FOUND", "INVITATION_NOT_FOUND", "INVITATION_TOKEN_INVALID", "USER_NOT_FOUND",
    "API_CLIENT_NOT_FOUND"}
REAL_IN_TEN = 9  # how many of ten draws of a parameter or field with real values use one
# With nine real values in ten, ~80-100% of the calls of a route reach the service; half is the floor a
# regression (ids no longer fed, a principal locked out) falls through, and random variation does not.
LEAST_SHARE = 0.5


@dataclass
class World:
    """The principal's headers, and the real values each parameter or body field is drawn from."""

    headers: dict[str, str]
    path: dict[str, list[str]] = field(default_factory=dict)
    body: dict[str, list[str]] = field(default_factory=dict)
    # Optional parameters the fuzzer fills with noise that only ever meets the HTTP layer (a random cursor,
    # a random Idempotency-Key reused across bodies): mostly left out, so the call reaches the service.
    omit: tuple[str, ...] = ("cursor", "Idempotency-Key")
    # Requests known to succeed, by operation label (body, media type): sent as explicit schemathesis cases
    # before the generated ones, so a route whose success needs several real values at once (a sign-in: an
    # active account's email *and* its password *and* the password grant) is seen succeeding on every run.
    known_good: dict[str, list[tuple[dict[str, Any], str]]] = field(default_factory=dict)


@dataclass
class Tally:
    """(mode, status, code) of every response of one operation's run."""

    seen: Counter = field(default_factory=Counter)

    def add(self, mode: GenerationMode, response) -> None:
        code = ""
        if response.headers.get("content-type", [""])[0].startswith("application/problem+json"):
            code = response.json().get("code", "")
        self.seen[(mode.value, response.status_code, code)] += 1

    def share_reached(self, mode: GenerationMode) -> float:
        """The share of responses in `mode` that got past parsing, authentication and the membership check:
        a 2xx, or a refusal by a rule of the service (role, state, last owner, limit, ...)."""
        counts = {k: n for k, n in self.seen.items() if k[0] == mode.value}
        reached = sum(n for (_, status, code), n in counts.items() if status < 400 or (
            code and code not in NOT_REACHED))
        return reached / max(1, sum(counts.values()))

    def share_not_404(self, mode: GenerationMode) -> float:
        counts = {k: n for k, n in self.seen.items() if k[0] == mode.value}
        return sum(n for (_, status, _), n in counts.items() if status != 404) / max(1, sum(counts.values()))

    def successes(self, mode: GenerationMode) -> int:
        return sum(n for (m, status, _), n in self.seen.items() if m == mode.value and status < 300)

    def assert_calls_reached_the_service(self, *, consumes_ids: bool) -> None:
        """Of the schema-valid calls, at least LEAST_SHARE got past the membership check (and were not 404),
        and at least one succeeded. A route that consumes its ids (a removal, a deletion) rightly answers
        404 to every later call with the same id; for it only the success is required."""
        seen = sorted(self.seen.items())
        assert self.successes(GenerationMode.POSITIVE) >= 1, seen
        if not consumes_ids:
            assert self.share_reached(GenerationMode.POSITIVE) >= LEAST_SHARE, seen
            assert self.share_not_404(GenerationMode.POSITIVE) >= LEAST_SHARE, seen


def app_schema(path_regex: str) -> Any:
    """The service's OpenAPI document limited to the paths `path_regex` matches. The live server serves the one
    this app builds; reading it here (no database needed) lets pytest collect one test per operation."""
    from tenet.app import create_app
    from tests.conftest import test_settings

    return schemathesis.openapi.from_dict(create_app(test_settings()).openapi()).include(path_regex=path_regex)


def operations(schema: Any) -> list[Any]:
    """Every operation of `schema`, to parametrize a test with (one per route and method)."""
    return [result.ok() for result in schema.get_all_operations()]


def fuzz(operation, *, base_url: str, world: World, examples: dict[GenerationMode, int]) -> Tally:
    """Run schemathesis on `operation` in each generation mode; every response must pass CHECKS."""
    tally = Tally()
    for body, media_type in world.known_good.get(operation.label, []):
        case = operation.Case(body=dict(body), media_type=media_type)
        response = case.call(base_url=base_url, headers=world.headers)
        tally.add(GenerationMode.POSITIVE, response)
        case.validate_response(response, checks=CHECKS, headers=world.headers)
        assert response.status_code < 300, (operation.label, response.status_code, response.text)
    for mode, max_examples in examples.items():
        if mode is GenerationMode.NEGATIVE and not (list(operation.iter_parameters()) or operation.body):
            continue  # nothing to get wrong
        _fuzz_in(mode, max_examples, operation, base_url, world, tally)
    return tally


def _fuzz_in(mode: GenerationMode, max_examples: int, operation, base_url: str, world: World, tally: Tally) -> None:
    @given(case=operation.as_strategy(mode), data=st.data())
    @settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case, data):
        for name in list(case.path_parameters or {}):
            if name in world.path and data.draw(st.integers(0, 9)) < REAL_IN_TEN:
                case.path_parameters[name] = data.draw(st.sampled_from(world.path[name]), label=name)
        if isinstance(case.body, dict):
            for name in list(case.body):
                if name in world.body and data.draw(st.integers(0, 9)) < REAL_IN_TEN:
                    case.body[name] = data.draw(st.sampled_from(world.body[name]), label=name)
        for container in (case.query, case.headers):
            for name in [n for n in (container or {}) if n in world.omit]:
                if data.draw(st.integers(0, 9)) < REAL_IN_TEN:
                    del container[name]
        response = case.call(base_url=base_url, headers=world.headers)
        tally.add(mode, response)
        case.validate_response(response, checks=CHECKS, headers=world.headers)

    run()


# --- building worlds on the live server ------------------------------------------------------------------


def unique_email(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}@example.com"


class LiveApi:
    """Just enough of the API to set a scene on the live server (plain HTTP, like any client)."""

    def __init__(self, base_url: str, database_url: str) -> None:
        self.http = httpx.Client(base_url=f"{base_url}/api/v1", timeout=30)
        self.database_url = database_url

    def close(self) -> None:
        self.http.close()

    def person(self, prefix: str) -> tuple[str, str, dict[str, str]]:
        """Register and sign in someone new: (user id, email, headers)."""
        email = unique_email(prefix)
        created = self.http.post("/auth/register", json={"email": email, "password": PASSWORD,
                                                         "display_name": prefix.title()})
        assert created.status_code == 201, created.text
        tokens = self.http.post("/auth/token", data={"grant_type": "password", "username": email,
                                                     "password": PASSWORD})
        assert tokens.status_code == 200, tokens.text
        return created.json()["id"], email, {"Authorization": f"Bearer {tokens.json()['access_token']}"}

    def workspace(self, headers: dict[str, str], name: str) -> str:
        created = self.http.post("/workspaces", json={"name": name}, headers=headers)
        assert created.status_code == 201, created.text
        return created.json()["id"]

    def invite(self, headers: dict[str, str], workspace_id: str, email: str, role: str = "member") -> str:
        invited = self.http.post(f"/workspaces/{workspace_id}/invitations", json={"email": email, "role": role},
                                 headers=headers)
        assert invited.status_code == 201, invited.text
        return invited.json()["id"]

    def mailed_tokens(self, email: str, link: re.Pattern[str] = TOKEN_IN_LINK) -> list[str]:
        """Tokens of the invitation (or other `link`) mails to `email`, read from the outbox (the live server has
        no SMTP)."""
        with psycopg.connect(self.database_url) as connection:
            bodies = connection.execute("SELECT body_text FROM kernel.email_outbox WHERE to_address = %s",
                                        (email,)).fetchall()
        return [unquote(m.group(1)) for (body,) in bodies if (m := link.search(body))]

    def join(self, owner: dict[str, str], workspace_id: str, prefix: str, role: str) -> tuple[str, str]:
        """Someone new joins through an invitation as `role` (admin or member): (user id, email)."""
        user_id, email, headers = self.person(prefix)
        self.invite(owner, workspace_id, email, role)
        (token,) = self.mailed_tokens(email)
        accepted = self.http.post("/invitations/accept", json={"token": token}, headers=headers)
        assert accepted.status_code == 200, accepted.text
        return user_id, email


def workspace_world(base_url: str, database_url: str) -> World:
    """The only owner (the fuzzed principal) of a workspace with an admin and two members, three pending
    invitations, and two pending invitations to the owner from someone else's workspaces (their tokens feed
    `POST /invitations/accept`). A single owner cannot leave, so the principal stays a member for the run
    (a transfer makes it an admin, which is still past the membership check)."""
    api = LiveApi(base_url, database_url)
    try:
        owner_id, owner_email, owner = api.person("owner")
        workspace_id = api.workspace(owner, "Fuzzed")
        joined = [api.join(owner, workspace_id, prefix, role) for prefix, role in
                  [("admin", "admin"), ("member", "member"), ("member", "member")]]
        members = [user_id for user_id, _ in joined]
        pending_emails = [unique_email("pending") for _ in range(3)]
        pending = [api.invite(owner, workspace_id, email, role)
                   for email, role in zip(pending_emails, ("member", "member", "admin"), strict=True)]
        _, _, stranger = api.person("stranger")
        for name in ("Elsewhere", "Elsewhere too"):
            api.invite(stranger, api.workspace(stranger, name), owner_email)
        tokens = api.mailed_tokens(owner_email)
        assert len(tokens) == 2
    finally:
        api.close()
    # Invitation emails: new addresses (created, then pending), pending ones, members' and the owner's own.
    emails = [unique_email("new") for _ in range(3)] + pending_emails + [e for _, e in joined] + [owner_email]
    return World(headers=owner,
                 path={"workspace_id": [workspace_id], "user_id": [owner_id, *members], "invitation_id": pending},
                 body={"user_id": [owner_id, *members], "token": tokens, "email": emails})


def identity_world(base_url: str, database_url: str, admin_token: str) -> World:
    """A fresh administrator (the fuzzed principal, made by the live server's first one), six signed-in users
    (the last three then disabled, so enabling can succeed) and two API clients. Real values: the users' ids,
    emails, password and refresh tokens, the clients' ids. The principal's own id is left out of the pool,
    so the run does not lock itself out."""
    api = LiveApi(base_url, database_url)
    first_admin = {"Authorization": f"Bearer {admin_token}"}
    try:
        email = unique_email("admin")
        made = api.http.post("/iam/users", headers=first_admin, json={
            "email": email, "password": PASSWORD, "display_name": "Fuzzing Admin", "roles": ["Administrator"]})
        assert made.status_code == 201, made.text
        signed_in = api.http.post("/auth/token", data={"grant_type": "password", "username": email,
                                                       "password": PASSWORD})
        assert signed_in.status_code == 200, signed_in.text
        admin = {"Authorization": f"Bearer {signed_in.json()['access_token']}"}
        people = [api.person(prefix) for prefix in ("ada", "bob", "cy", "dee", "eve", "fay")]
        refresh_tokens = [api.http.post("/auth/token", data={
            "grant_type": "password", "username": person_email, "password": PASSWORD}).json()["refresh_token"]
            for _, person_email, _ in people]
        # Half of them disabled, so enabling (and disabling) can both succeed within one run.
        for person in people[3:]:
            disabled = api.http.post(f"/iam/users/{person[0]}/disable", headers=admin)
            assert disabled.status_code == 200, disabled.text
        # A live reset secret for each of two active people (a newer request spends the older ones of the same
        # account), so completing a reset can succeed within the run; the first person keeps the sign-in below.
        reset_tokens = []
        for _, person_email, _ in people[1:3]:
            asked = api.http.post("/auth/password-reset", json={"email": person_email})
            assert asked.status_code == 202, asked.text
            reset_tokens += api.mailed_tokens(person_email, RESET_TOKEN_IN_LINK)
        assert len(reset_tokens) == 2, reset_tokens
        clients = []
        for name in ("Extractor", "Reporter"):
            client = api.http.post("/iam/api-clients", headers=admin,
                                   json={"name": name, "scopes": ["reservations:ingest"]})
            assert client.status_code == 201, client.text
            clients.append(client.json()["id"])
    finally:
        api.close()
    emails = [person_email for _, person_email, _ in people]
    # Random draws sign in only when grant, active account and password coincide (about one draw in ten, so
    # some runs of 20 never did): one explicit sign-in of an active account shows the success path every run.
    sign_in = {"grant_type": "password", "username": emails[0], "password": PASSWORD}
    return World(headers=admin,
                 known_good={"POST /api/v1/auth/token": [(sign_in, "application/x-www-form-urlencoded")],
                             "POST /api/v1/auth/password-reset/complete": [
                                 ({"token": reset_tokens[0], "password": PASSWORD}, "application/json")]},
                 path={"user_id": [user_id for user_id, _, _ in people], "api_client_id": clients},
                 body={"email": emails + [unique_email("new") for _ in range(12)], "username": emails,
                       "password": [PASSWORD], "refresh_token": refresh_tokens, "token": reset_tokens,
                       "grant_type": ["password", "refresh_token", "client_credentials"]})
