"""Sign-in, tokens, refresh rotation and token refusal."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import jwt
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tests.conftest import TEST_SECRET
from tests.support.invariants import assert_invariants_hold
from tests.support.users import PASSWORD

TOKEN = "/api/v1/auth/token"
REFRESH = "/api/v1/auth/refresh"
ME = "/api/v1/auth/me"


async def sign_in(client, email: str, password: str = PASSWORD) -> dict:
    response = await client.post(TOKEN, data={"grant_type": "password", "username": email, "password": password})
    assert response.status_code == 200, response.text
    return response.json()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class TestPasswordGrant:
    async def test_answers_a_bearer_pair_and_no_store(self, client, users):
        user = await users.make()
        response = await client.post(TOKEN, data={"grant_type": "password", "username": user.email.upper(),
                                                  "password": PASSWORD})
        assert response.status_code == 200
        assert response.headers["cache-control"] == "no-store"
        tokens = response.json()
        assert tokens["token_type"] == "bearer" and tokens["expires_in"] == 900
        assert tokens["refresh_token"].startswith("rt_")

    async def test_wrong_password_and_unknown_user_answer_the_same(self, client, users):
        user = await users.make()
        wrong = await client.post(TOKEN, data={"grant_type": "password", "username": user.email, "password": "nope"})
        unknown = await client.post(TOKEN, data={"grant_type": "password", "username": "ghost@example.com",
                                                 "password": "nope"})
        assert wrong.status_code == unknown.status_code == 401
        assert wrong.json()["code"] == unknown.json()["code"] == "INVALID_CREDENTIALS"
        assert wrong.json()["detail"] == unknown.json()["detail"]
        assert wrong.json()["error"] == "invalid_grant"

    async def test_missing_fields_and_unknown_grants(self, client):
        missing = await client.post(TOKEN, data={"grant_type": "password", "username": "a@example.com"})
        assert missing.status_code == 401
        unsupported = await client.post(TOKEN, data={"grant_type": "implicit"})
        assert (unsupported.status_code, unsupported.json()["code"]) == (400, "UNSUPPORTED_GRANT_TYPE")
        no_grant = await client.post(TOKEN, data={"username": "a@example.com"})
        assert no_grant.status_code == 422

    async def test_me_shows_roles_and_permissions(self, client, users):
        user = await users.make()
        tokens = await sign_in(client, user.email)
        me = (await client.get(ME, headers=bearer(tokens["access_token"]))).json()
        assert me["principal_type"] == "user" and me["user"]["id"] == str(user.id)
        assert me["roles"] == ["Employee"]
        assert "meeting:check-in" in me["permissions"] and "iam:user:manage" not in me["permissions"]


class TestRefresh:
    async def test_rotation_answers_a_new_pair_and_spends_the_old_token(self, client, users):
        user = await users.make()
        first = await sign_in(client, user.email)
        second = (await client.post(REFRESH, json={"refresh_token": first["refresh_token"]})).json()
        assert second["refresh_token"] != first["refresh_token"]
        assert (await client.get(ME, headers=bearer(second["access_token"]))).status_code == 200

    @pytest.mark.invariant("IAM-INV-02")
    async def test_reusing_a_spent_token_revokes_the_whole_family(self, client, users, db):
        user = await users.make()
        first = await sign_in(client, user.email)
        second = (await client.post(REFRESH, json={"refresh_token": first["refresh_token"]})).json()
        reuse = await client.post(REFRESH, json={"refresh_token": first["refresh_token"]})
        assert (reuse.status_code, reuse.json()["code"]) == (401, "REFRESH_TOKEN_REUSED")
        # The revocation was committed although the request failed: the legitimate successor is dead too.
        after = await client.post(REFRESH, json={"refresh_token": second["refresh_token"]})
        assert (after.status_code, after.json()["code"]) == (401, "INVALID_REFRESH_TOKEN")
        async with db.read_only() as session:
            live = (await session.execute(text(
                "SELECT count(*) FROM iam.refresh_token WHERE user_id = :u AND used_at IS NULL "
                "AND revoked_at IS NULL"), {"u": user.id})).scalar_one()
            audited = (await session.execute(text(
                "SELECT count(*) FROM kernel.audit_log WHERE action = 'iam.refresh_token.reuse_detected'"
            ))).scalar_one()
            await assert_invariants_hold(session, prefix="IAM-")
        assert (live, audited) == (0, 1)

    async def test_other_sign_ins_survive_a_family_revocation(self, client, users):
        user = await users.make()
        laptop, phone = await sign_in(client, user.email), await sign_in(client, user.email)
        await client.post(REFRESH, json={"refresh_token": laptop["refresh_token"]})
        await client.post(REFRESH, json={"refresh_token": laptop["refresh_token"]})  # reuse: laptop family dies
        assert (await client.post(REFRESH, json={"refresh_token": phone["refresh_token"]})).status_code == 200

    async def test_expired_refresh_token_is_refused(self, client, users, clock, settings):
        user = await users.make()
        tokens = await sign_in(client, user.email)
        clock.advance(timedelta(days=settings.refresh_token_ttl_days, seconds=1))
        response = await client.post(REFRESH, json={"refresh_token": tokens["refresh_token"]})
        assert response.json()["code"] == "REFRESH_TOKEN_EXPIRED"

    async def test_refresh_grant_on_the_token_endpoint(self, client, users):
        user = await users.make()
        tokens = await sign_in(client, user.email)
        response = await client.post(TOKEN, data={"grant_type": "refresh_token",
                                                  "refresh_token": tokens["refresh_token"]})
        assert response.status_code == 200 and response.json()["refresh_token"] != tokens["refresh_token"]

    async def test_revoke_signs_out(self, client, users):
        user = await users.make()
        tokens = await sign_in(client, user.email)
        assert (await client.post("/api/v1/auth/revoke", json={"refresh_token": tokens["refresh_token"]})
                ).status_code == 204
        response = await client.post(REFRESH, json={"refresh_token": tokens["refresh_token"]})
        assert response.json()["code"] == "INVALID_REFRESH_TOKEN"

    @pytest.mark.invariant("IAM-INV-02")
    async def test_the_database_refuses_two_live_tokens_in_a_family(self, client, users, db):
        user = await users.make()
        await sign_in(client, user.email)
        async with db.unit_of_work() as session:
            with pytest.raises(IntegrityError, match="uq_refresh_token_family_live"):
                async with session.begin_nested():
                    await session.execute(text(
                        "INSERT INTO iam.refresh_token (id, family_id, user_id, token_digest, issued_at, expires_at)"
                        " SELECT gen_random_uuid(), family_id, user_id, 'sha256:' || repeat('a', 64), now(),"
                        " expires_at FROM iam.refresh_token"))


class TestClientCredentials:
    async def make_client(self, client, users, scopes=("reservations:ingest",)) -> dict:
        admin = await users.admin()
        response = await client.post("/api/v1/iam/api-clients", json={
            "name": "Extractor", "scopes": list(scopes), "hotel_ids": ["H1", "H2"]}, headers=admin.headers)
        assert response.status_code == 201, response.text
        return {**response.json(), "admin": admin}

    async def test_form_credentials_answer_a_scoped_token_without_refresh(self, client, users):
        api_client = await self.make_client(client, users)
        response = await client.post(TOKEN, data={"grant_type": "client_credentials",
                                                  "client_id": api_client["client_id"],
                                                  "client_secret": api_client["client_secret"]})
        assert response.status_code == 200
        tokens = response.json()
        assert tokens["scope"] == "reservations:ingest" and "refresh_token" not in tokens
        me = (await client.get(ME, headers=bearer(tokens["access_token"]))).json()
        assert me["principal_type"] == "client" and me["scopes"] == ["reservations:ingest"]
        assert me["client"]["hotel_ids"] == ["H1", "H2"]

    async def test_basic_auth_credentials_work_too(self, client, users):
        api_client = await self.make_client(client, users)
        basic = base64.b64encode(f"{api_client['client_id']}:{api_client['client_secret']}".encode()).decode()
        response = await client.post(TOKEN, data={"grant_type": "client_credentials"},
                                     headers={"Authorization": f"Basic {basic}"})
        assert response.status_code == 200

    async def test_a_wrong_secret_is_invalid_client(self, client, users):
        api_client = await self.make_client(client, users)
        response = await client.post(TOKEN, data={"grant_type": "client_credentials",
                                                  "client_id": api_client["client_id"], "client_secret": "tcs_x"})
        assert (response.status_code, response.json()["code"]) == (401, "INVALID_CLIENT")

    async def test_a_revoked_client_loses_its_live_tokens_at_once(self, client, users):
        api_client = await self.make_client(client, users)
        tokens = (await client.post(TOKEN, data={"grant_type": "client_credentials",
                                                 "client_id": api_client["client_id"],
                                                 "client_secret": api_client["client_secret"]})).json()
        deleted = await client.delete(f"/api/v1/iam/api-clients/{api_client['id']}",
                                      headers=api_client["admin"].headers)
        assert deleted.status_code == 204
        assert (await client.get(ME, headers=bearer(tokens["access_token"]))).status_code == 401

    @pytest.mark.invariant("IAM-INV-04")
    async def test_only_a_digest_of_the_secret_is_stored(self, client, users, db):
        api_client = await self.make_client(client, users)
        async with db.unit_of_work() as session:
            stored = (await session.execute(text("SELECT secret_digest FROM iam.api_client"))).scalar_one()
            tokens = (await session.execute(text("SELECT token_digest FROM iam.refresh_token"))).scalars().all()
            assert stored.startswith("sha256:") and api_client["client_secret"] not in stored
            assert all(t.startswith("sha256:") for t in tokens)
            with pytest.raises(IntegrityError, match="ck_api_client_secret_is_digest"):
                async with session.begin_nested():
                    await session.execute(text("UPDATE iam.api_client SET secret_digest = :s"),
                                          {"s": api_client["client_secret"]})
            await assert_invariants_hold(session, prefix="IAM-")

    async def test_a_client_token_cannot_use_user_routes(self, client, users):
        api_client = await self.make_client(client, users)
        tokens = (await client.post(TOKEN, data={"grant_type": "client_credentials",
                                                 "client_id": api_client["client_id"],
                                                 "client_secret": api_client["client_secret"]})).json()
        response = await client.get("/api/v1/iam/users", headers=bearer(tokens["access_token"]))
        assert response.status_code == 403


class TestRefusedTokens:
    async def test_no_token_is_401_with_www_authenticate(self, client):
        response = await client.get(ME)
        assert (response.status_code, response.json()["code"]) == (401, "NOT_AUTHENTICATED")
        assert response.headers["www-authenticate"] == "Bearer"

    async def test_bad_signature_is_refused(self, client, users):
        user = await users.make()
        claims = jwt.decode(user.token, options={"verify_signature": False})
        forged = jwt.encode(claims, "another key, long enough to be a real HS256 key!", algorithm="HS256")
        response = await client.get(ME, headers=bearer(forged))
        assert (response.status_code, response.json()["code"]) == (401, "INVALID_TOKEN")

    async def test_alg_none_is_refused(self, client, users):
        user = await users.make()
        claims = jwt.decode(user.token, options={"verify_signature": False})

        def part(data: dict) -> str:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

        unsigned = f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."
        response = await client.get(ME, headers=bearer(unsigned))
        assert (response.status_code, response.json()["code"]) == (401, "INVALID_TOKEN")

    async def test_expired_token_is_refused(self, client, users, clock, settings):
        user = await users.make()
        clock.advance(timedelta(seconds=settings.access_token_ttl_seconds + 1))
        response = await client.get(ME, headers=user.headers)
        assert (response.status_code, response.json()["code"]) == (401, "TOKEN_EXPIRED")

    async def test_a_token_signed_with_our_key_but_not_an_access_token_is_refused(self, client, users):
        user = await users.make()
        claims = {**jwt.decode(user.token, options={"verify_signature": False}), "typ": "refresh"}
        response = await client.get(ME, headers=bearer(jwt.encode(claims, TEST_SECRET, algorithm="HS256")))
        assert response.status_code == 401

    @pytest.mark.invariant("IAM-INV-06")
    async def test_a_deleted_users_tokens_are_refused(self, client, users, db):
        admin, user = await users.admin(), await users.make()
        tokens = await sign_in(client, user.email)
        assert (await client.delete(f"/api/v1/iam/users/{user.id}", headers=admin.headers)).status_code == 204
        me = await client.get(ME, headers=bearer(tokens["access_token"]))
        assert (me.status_code, me.json()["code"]) == (401, "INVALID_TOKEN")
        refresh = await client.post(REFRESH, json={"refresh_token": tokens["refresh_token"]})
        assert refresh.status_code == 401
        relogin = await client.post(TOKEN, data={"grant_type": "password", "username": user.email,
                                                 "password": PASSWORD})
        assert relogin.status_code == 401
        async with db.read_only() as session:
            await assert_invariants_hold(session, prefix="IAM-")

    @pytest.mark.invariant("IAM-INV-01")
    async def test_a_deleted_users_email_can_register_again(self, client, users):
        admin, user = await users.admin(), await users.make(email="again@example.com")
        await client.delete(f"/api/v1/iam/users/{user.id}", headers=admin.headers)
        response = await client.post("/api/v1/auth/register", json={
            "email": "again@example.com", "password": "another long password", "display_name": "New"})
        assert response.status_code == 201 and response.json()["id"] != str(user.id)
