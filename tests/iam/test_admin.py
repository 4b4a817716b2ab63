"""Administration routes: users, roles, API clients, and who may use them."""

from __future__ import annotations

import pytest

from tenet.iam.permissions import ROLE_PERMISSIONS, Permission, Role
from tenet.kernel import permissions as permission_catalog
from tests.support.invariants import assert_invariants_hold


async def test_employees_may_not_administer(client, users):
    employee = await users.make()
    for method, path in [("GET", "/api/v1/iam/users"), ("POST", "/api/v1/iam/users"),
                         ("GET", "/api/v1/iam/api-clients"), ("GET", "/api/v1/iam/roles")]:
        response = await client.request(method, path, headers=employee.headers, json={} if method == "POST" else None)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["code"] == "PERMISSION_DENIED"


async def test_admin_creates_a_user_with_roles(client, users):
    admin = await users.admin()
    response = await client.post("/api/v1/iam/users", headers=admin.headers, json={
        "email": "mgr@example.com", "password": "a long password 1", "display_name": "Manager",
        "roles": ["MeetingManager", "Leader"]})
    assert response.status_code == 201
    assert response.json()["roles"] == ["Leader", "MeetingManager"]


async def test_unknown_role_is_422(client, users):
    admin, user = await users.admin(), await users.make()
    response = await client.put(f"/api/v1/iam/users/{user.id}/roles", headers=admin.headers,
                                json={"roles": ["Superuser"]})
    assert response.status_code == 422


async def test_changing_roles_changes_permissions_at_once(client, users):
    admin, user = await users.admin(), await users.make()
    response = await client.put(f"/api/v1/iam/users/{user.id}/roles", headers=admin.headers,
                                json={"roles": ["ReservationAgent"]})
    assert response.json()["roles"] == ["ReservationAgent"]
    me = (await client.get("/api/v1/auth/me", headers=user.headers)).json()
    assert "reservation:task:confirm" in me["permissions"] and "meeting:read" not in me["permissions"]


async def test_roles_list_matches_the_catalog(client, users):
    admin = await users.admin()
    roles = {r["name"]: r for r in (await client.get("/api/v1/iam/roles", headers=admin.headers)).json()}
    assert set(roles) == {r.value for r in Role}
    assert set(roles["Employee"]["permissions"]) == permission_catalog.points_of_role("Employee")
    assert {p.value for p in ROLE_PERMISSIONS[Role.EMPLOYEE]} <= set(roles["Employee"]["permissions"])


async def test_unknown_user_is_404(client, users):
    admin = await users.admin()
    response = await client.get("/api/v1/iam/users/00000000-0000-0000-0000-000000000000", headers=admin.headers)
    assert (response.status_code, response.json()["code"]) == (404, "USER_NOT_FOUND")


async def test_users_page_through_with_a_cursor(client, users):
    admin = await users.admin()
    for _ in range(4):
        await users.make()
    seen, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/api/v1/iam/users", params=params, headers=admin.headers)).json()
        seen += [u["id"] for u in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 5 and str(admin.id) in seen


class TestLastAdministrator:
    @pytest.mark.invariant("IAM-INV-05")
    async def test_the_last_admin_cannot_drop_the_role(self, client, users, db):
        admin = await users.admin()
        response = await client.put(f"/api/v1/iam/users/{admin.id}/roles", headers=admin.headers,
                                    json={"roles": ["Employee"]})
        assert (response.status_code, response.json()["code"]) == (409, "LAST_ADMINISTRATOR")

    @pytest.mark.invariant("IAM-INV-05")
    async def test_the_last_admin_cannot_be_deleted(self, client, users, db):
        admin = await users.admin()
        response = await client.delete(f"/api/v1/iam/users/{admin.id}", headers=admin.headers)
        assert (response.status_code, response.json()["code"]) == (409, "LAST_ADMINISTRATOR")

    @pytest.mark.invariant("IAM-INV-05")
    async def test_with_two_admins_one_may_step_down(self, client, users, db):
        first, second = await users.admin(), await users.admin()
        response = await client.put(f"/api/v1/iam/users/{first.id}/roles", headers=second.headers,
                                    json={"roles": ["Employee"]})
        assert response.status_code == 200
        async with db.read_only() as session:
            await assert_invariants_hold(session, prefix="IAM-")


async def test_every_permission_in_code_is_seeded(db):
    """The catalog every domain declares (tenet.domains) and the seed (migrations) agree; a mismatch needs a
    migration."""
    from sqlalchemy import text

    async with db.read_only() as session:
        seeded = set((await session.execute(text("SELECT name FROM iam.permission"))).scalars())
        grants = set((await session.execute(text("SELECT role_name, permission_name FROM iam.role_permission"))).all())
    catalog = permission_catalog.catalog()
    assert {p.value for p in Permission} <= set(catalog)
    assert seeded == set(catalog)
    assert grants == {(role, name) for name, point in catalog.items() for role in point.granted_to}


class TestSuspension:
    async def test_a_disabled_account_loses_its_tokens_at_once(self, client, users):
        admin, user = await users.admin(), await users.make()
        tokens = (await client.post("/api/v1/auth/token", data={
            "grant_type": "password", "username": user.email, "password": "a-long-test-password"})).json()
        response = await client.post(f"/api/v1/iam/users/{user.id}/disable", headers=admin.headers)
        assert (response.status_code, response.json()["status"]) == (200, "disabled")
        assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 401
        refresh = await client.post("/api/v1/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
        assert refresh.status_code == 401
        sign_in = await client.post("/api/v1/auth/token", data={
            "grant_type": "password", "username": user.email, "password": "a-long-test-password"})
        assert sign_in.status_code == 401

    async def test_enabling_restores_sign_in(self, client, users):
        admin, user = await users.admin(), await users.make()
        await client.post(f"/api/v1/iam/users/{user.id}/disable", headers=admin.headers)
        response = await client.post(f"/api/v1/iam/users/{user.id}/enable", headers=admin.headers)
        assert (response.status_code, response.json()["status"]) == (200, "active")
        sign_in = await client.post("/api/v1/auth/token", data={
            "grant_type": "password", "username": user.email, "password": "a-long-test-password"})
        assert sign_in.status_code == 200

    async def test_enabling_an_active_account_is_a_state_conflict(self, client, users):
        admin, user = await users.admin(), await users.make()
        response = await client.post(f"/api/v1/iam/users/{user.id}/enable", headers=admin.headers)
        assert (response.status_code, response.json()["code"]) == (409, "USER_STATE_CONFLICT")
        assert response.json()["current_status"] == "active"

    @pytest.mark.invariant("IAM-INV-05")
    async def test_the_last_admin_cannot_be_disabled(self, client, users):
        admin = await users.admin()
        response = await client.post(f"/api/v1/iam/users/{admin.id}/disable", headers=admin.headers)
        assert (response.status_code, response.json()["code"]) == (409, "LAST_ADMINISTRATOR")

    async def test_a_deleted_account_cannot_be_enabled(self, client, users):
        admin, user = await users.admin(), await users.make()
        await client.delete(f"/api/v1/iam/users/{user.id}", headers=admin.headers)
        response = await client.post(f"/api/v1/iam/users/{user.id}/enable", headers=admin.headers)
        assert response.status_code == 404
