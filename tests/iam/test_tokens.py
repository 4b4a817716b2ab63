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
from tests.support.api import bearer
from tests.support.invariants import assert_invariants_hold
from tests.support.users import PASSWORD

TOKEN = "/api/v1/auth/token"
REFRESH = "/api/v1/auth/refresh"
ME = "/api/v1/auth/me"


async def sign_in(client, email: str, password: str = PASSWORD) -> dict:
    response = await client.post(TOKEN, data={"grant_type": "password", "username": email, "password": password})
    assert response.status_code == 200, response.text
    return response.json()


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


def _forged(claims: dict) -> str:
    """A token signed with the real key (what an insider or a bug could produce), with these claims."""
    return jwt.encode(claims, TEST_SECRET, algorithm="HS256")


class TestMalformedClaims:
    """Issue 6.7: any malformed claim in a token signed with the real key is 401 INVALID_TOKEN, never a 500."""

    def _claims(self, user_id, **overrides) -> dict:
        base = {"iss": "tenet", "sub": str(user_id), "typ": "access", "pk": "user", "iat": 1767600000,
                "exp": 1767603600, "ep": 0}
        base.update(overrides)
        return {k: v for k, v in base.items() if v is not ...}

    @pytest.mark.parametrize("overrides", [
        {"exp": "1767603600"}, {"exp": 1e20}, {"exp": -1}, {"exp": True}, {"exp": None}, {"exp": [1]},
        {"iat": "now"}, {"iat": 1e300}, {"sub": 42}, {"sub": "not-a-uuid"}, {"sub": ["x"]},
        {"pk": "admin"}, {"typ": "refresh"}, {"ep": "0"}, {"ep": -1}, {"ep": 2**40}, {"ep": 1.5},
        {"scope": ["a"]}, {"fam": "nope"}, {"fam": 7}, {"exp": ...}, {"sub": ...}, {"iss": "someone-else"},
    ])
    async def test_each_malformed_claim_is_invalid_token(self, client, users, overrides):
        user = await users.make()
        response = await client.get(ME, headers=bearer(_forged(self._claims(user.id, **overrides))))
        assert response.status_code == 401, response.text
        assert response.json()["code"] == "INVALID_TOKEN"

    async def test_a_non_object_payload_is_invalid(self, client):
        token = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode() + "." + \
            base64.urlsafe_b64encode(b"[1,2,3]").rstrip(b"=").decode() + ".sig"
        response = await client.get(ME, headers=bearer(token))
        assert response.status_code == 401 and response.json()["code"] == "INVALID_TOKEN"


class TestTokensDieWithTheirAccountOrSignIn:
    """Issue 6.6: disabled accounts' tokens replay nothing and stay dead after a re-enable; a revoked sign-in's
    access tokens die with it."""

    async def test_tokens_issued_before_a_disable_stay_dead_after_the_enable(self, client, users):
        admin, user = await users.admin(), await users.make()
        old = (await sign_in(client, user.email))["access_token"]
        assert (await client.get(ME, headers=bearer(old))).status_code == 200
        assert (await client.post(f"/api/v1/iam/users/{user.id}/disable", headers=admin.headers)).status_code == 200
        assert (await client.get(ME, headers=bearer(old))).status_code == 401
        assert (await client.post(f"/api/v1/iam/users/{user.id}/enable", headers=admin.headers)).status_code == 200
        refused = await client.get(ME, headers=bearer(old))
        assert refused.status_code == 401 and refused.json()["code"] == "INVALID_TOKEN"
        fresh = (await sign_in(client, user.email))["access_token"]
        assert (await client.get(ME, headers=bearer(fresh))).status_code == 200

    async def test_a_disabled_accounts_token_replays_no_stored_answer(self, client, users):
        admin, user = await users.admin(), await users.make()
        token = (await sign_in(client, user.email))["access_token"]
        headers = {**bearer(token), "Idempotency-Key": "create-1"}
        first = await client.post("/api/v1/workspaces", json={"name": "W"}, headers=headers)
        assert first.status_code == 201
        replayed = await client.post("/api/v1/workspaces", json={"name": "W"}, headers=headers)
        assert replayed.headers.get("idempotent-replayed") == "true"
        await client.post(f"/api/v1/iam/users/{user.id}/disable", headers=admin.headers)
        refused = await client.post("/api/v1/workspaces", json={"name": "W"}, headers=headers)
        assert refused.status_code == 401 and "idempotent-replayed" not in refused.headers
        assert refused.json()["code"] == "INVALID_TOKEN"

    async def test_signing_out_kills_that_sign_ins_access_tokens_only(self, client, users):
        user = await users.make()
        laptop, phone = await sign_in(client, user.email), await sign_in(client, user.email)
        assert (await client.post("/api/v1/auth/revoke", json={"refresh_token": laptop["refresh_token"]})).status_code \
            == 204
        assert (await client.get(ME, headers=bearer(laptop["access_token"]))).status_code == 401
        assert (await client.get(ME, headers=bearer(phone["access_token"]))).status_code == 200

    async def test_a_reused_refresh_token_kills_its_familys_access_tokens(self, client, users):
        user = await users.make()
        tokens = await sign_in(client, user.email)
        rotated = (await client.post(REFRESH, json={"refresh_token": tokens["refresh_token"]})).json()
        assert (await client.get(ME, headers=bearer(rotated["access_token"]))).status_code == 200
        reused = await client.post(REFRESH, json={"refresh_token": tokens["refresh_token"]})
        assert reused.json()["code"] == "REFRESH_TOKEN_REUSED"
        for access in (tokens["access_token"], rotated["access_token"]):
            assert (await client.get(ME, headers=bearer(access))).status_code == 401


class TestVerifiedTokenCache:
    async def test_a_cached_token_still_expires_and_still_needs_an_active_account(self, client, users, clock, db):
        admin, user = await users.admin(), await users.make()
        token = (await sign_in(client, user.email))["access_token"]
        assert (await client.get(ME, headers=bearer(token))).status_code == 200  # verified and cached
        await client.delete(f"/api/v1/iam/users/{user.id}", headers=admin.headers)
        assert (await client.get(ME, headers=bearer(token))).status_code == 401
        other = await users.make()
        token = (await sign_in(client, other.email))["access_token"]
        assert (await client.get(ME, headers=bearer(token))).status_code == 200
        clock.advance(timedelta(hours=1))
        expired = await client.get(ME, headers=bearer(token))
        assert expired.status_code == 401 and expired.json()["code"] == "TOKEN_EXPIRED"

    def test_the_cache_is_bounded_and_keyed_by_the_whole_token(self):
        from datetime import UTC, datetime

        from tenet.iam.tokens import AccessTokens

        tokens = AccessTokens(TEST_SECRET, timedelta(minutes=15), cache_size=3)
        now = datetime(2026, 1, 5, tzinfo=UTC)
        issued = [tokens.issue(subject=__import__("uuid").uuid4(), kind="user", now=now) for _ in range(5)]
        for token in issued:
            tokens.verify(token, now=now)
        assert len(tokens._cache) == 3 and set(tokens._cache) == set(issued[2:])
        tampered = issued[4][:-2] + ("A" if issued[4][-2] != "A" else "B") + issued[4][-1]
        with pytest.raises(Exception) as raised:
            tokens.verify(tampered, now=now)
        assert getattr(raised.value, "code", None) == "INVALID_TOKEN"
