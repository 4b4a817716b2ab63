"""Racing requests on real parallel connections: exactly one winner, a stable code for the loser."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from tests.support.invariants import assert_invariants_hold
from tests.support.rows import scalar
from tests.support.users import PASSWORD, UserFactory


@pytest.fixture
async def http(committed_app):
    transport = httpx.ASGITransport(app=committed_app, client=("192.0.2.77", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client


@pytest.mark.invariant("IAM-INV-01")
async def test_two_registrations_of_one_email_one_wins(http, committed_db):
    responses = await asyncio.gather(*(
        http.post("/api/v1/auth/register", json={"email": email, "password": PASSWORD, "display_name": "Twin"})
        for email in ("twin@example.com", "TWIN@example.com", "Twin@Example.com ")
    ))
    assert sorted(r.status_code for r in responses) == [201, 409, 409], [r.text for r in responses]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"EMAIL_TAKEN"}
    async with committed_db.read_only() as session:
        await assert_invariants_hold(session, prefix="IAM-")


@pytest.mark.invariant("IAM-INV-02")
async def test_two_refreshes_with_one_token_one_wins(http, committed_app, committed_db, clock):
    user = await UserFactory(committed_app, committed_db, clock).make()
    tokens = (await http.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": user.email, "password": PASSWORD})).json()
    responses = await asyncio.gather(*(
        http.post("/api/v1/auth/refresh", json={"refresh_token": tokens["refresh_token"]}) for _ in range(2)
    ))
    assert sorted(r.status_code for r in responses) == [200, 401]
    loser = next(r for r in responses if r.status_code == 401)
    assert loser.json()["code"] == "REFRESH_TOKEN_REUSED"
    async with committed_db.read_only() as session:
        await assert_invariants_hold(session, prefix="IAM-")


@pytest.mark.invariant("IAM-INV-05")
async def test_two_admins_demoting_each_other_leave_one_admin(http, committed_app, committed_db, clock):
    factory = UserFactory(committed_app, committed_db, clock)
    alice, bob = await factory.admin(), await factory.admin()
    responses = await asyncio.gather(
        http.put(f"/api/v1/iam/users/{bob.id}/roles", headers=alice.headers, json={"roles": ["Employee"]}),
        http.put(f"/api/v1/iam/users/{alice.id}/roles", headers=bob.headers, json={"roles": ["Employee"]}),
    )
    codes = sorted((r.status_code, r.json().get("code")) for r in responses)
    # Either one demotion wins and the other finds the last admin (409), or the demoted admin's second
    # request is refused because they no longer hold the permission (403). Never both succeed.
    assert codes[0][0] == 200 and codes[1][0] in (403, 409), codes
    async with committed_db.read_only() as session:
        await assert_invariants_hold(session, prefix="IAM-")
        from sqlalchemy import text

        admins = (await session.execute(text(
            "SELECT count(*) FROM iam.user_role ur JOIN iam.user_account u ON u.id = ur.user_id "
            "WHERE role_name = 'Administrator' AND u.status = 'active'"))).scalar_one()
    assert admins == 1


async def test_two_completions_of_one_reset_link_one_wins(http, committed_app, committed_db, clock):
    """The reset secret is spent by one conditional UPDATE: of two completions racing with different passwords,
    exactly one sets its password; the other is refused and changes nothing."""
    user = await UserFactory(committed_app, committed_db, clock).make()
    asked = await http.post("/api/v1/auth/password-reset", json={"email": user.email})
    assert asked.status_code == 202, asked.text
    body = await scalar(committed_db, "SELECT body_text FROM kernel.email_outbox WHERE to_address = :to "
                                      "AND kind = 'iam.password_reset'", to=user.email)
    (token,) = set(re.findall(r"token=(prr_[A-Za-z0-9_\-]+)", body))
    passwords = ("first racing password 1", "second racing password 2")
    responses = await asyncio.gather(*(
        http.post("/api/v1/auth/password-reset/complete", json={"token": token, "password": p}) for p in passwords))
    assert sorted(r.status_code for r in responses) == [204, 400], [r.text for r in responses]
    loser = next(r for r in responses if r.status_code == 400)
    assert loser.json()["code"] == "RESET_TOKEN_INVALID"
    winner = passwords[[r.status_code for r in responses].index(204)]
    signed_in = [(await http.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": user.email, "password": p})).status_code for p in passwords]
    assert signed_in == [200 if p == winner else 401 for p in passwords]
