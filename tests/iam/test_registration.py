"""POST /auth/register and the account rules."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tests.support.invariants import assert_invariants_hold

REGISTER = "/api/v1/auth/register"


def body(email="Ada.Lovelace@Example.com", password="correct horse battery", name="Ada Lovelace") -> dict:
    return {"email": email, "password": password, "display_name": name}


class TestRegister:
    async def test_new_account_is_201_with_typed_email_and_default_role(self, client):
        response = await client.post(REGISTER, json=body())
        assert response.status_code == 201
        user = response.json()
        assert user["email"] == "Ada.Lovelace@Example.com"
        assert user["roles"] == ["Employee"] and user["status"] == "active"
        assert "password" not in response.text and "argon2" not in response.text

    @pytest.mark.invariant("IAM-INV-01")
    @pytest.mark.parametrize("variant", ["ada.lovelace@example.com", "  ADA.LOVELACE@EXAMPLE.COM ",
                                         "Ada.Lovelace@Example.com"])
    async def test_case_and_space_variants_are_the_same_account(self, client, variant):
        assert (await client.post(REGISTER, json=body())).status_code == 201
        again = await client.post(REGISTER, json=body(email=variant))
        assert again.status_code == 409
        assert again.json()["code"] == "EMAIL_TAKEN"

    async def test_fullwidth_unicode_folds_by_nfkc(self, client):
        fullwidth_joe = "\uff4a\uff4f\uff45@example.com"
        assert (await client.post(REGISTER, json=body(email=fullwidth_joe))).status_code == 201
        assert (await client.post(REGISTER, json=body(email="joe@example.com"))).json()["code"] == "EMAIL_TAKEN"

    @pytest.mark.parametrize("email", ["not-an-email", "a@b", "@example.com", "a b@example.com"])
    async def test_invalid_email_is_422(self, client, email):
        response = await client.post(REGISTER, json=body(email=email))
        assert response.status_code == 422
        assert response.json()["code"] == "EMAIL_INVALID"

    @pytest.mark.parametrize("password", ["short", "aaaaaaaaaaaa", "ada.lovelace@example.com"])
    async def test_weak_password_is_422(self, client, password):
        response = await client.post(REGISTER, json=body(password=password))
        assert response.status_code == 422
        assert response.json()["code"] == "PASSWORD_TOO_WEAK"

    async def test_registration_writes_an_audit_row_without_names(self, client, db):
        user = (await client.post(REGISTER, json=body())).json()
        async with db.read_only() as session:
            row = (await session.execute(text(
                "SELECT actor_type, subject_id, data::text AS data FROM kernel.audit_log "
                "WHERE action = 'iam.user.created'"))).one()
        assert row.actor_type == "anonymous" and row.subject_id == user["id"]
        assert "Ada" not in row.data and "@" not in row.data


@pytest.mark.invariant("IAM-INV-03")
async def test_passwords_are_stored_as_argon2id_only(client, db):
    await client.post(REGISTER, json=body())
    async with db.unit_of_work() as session:
        stored = (await session.execute(text("SELECT password_hash FROM iam.user_account"))).scalar_one()
        assert stored.startswith("$argon2id$") and "correct horse" not in stored
        with pytest.raises(IntegrityError, match="ck_user_account_password_hash_argon2id"):
            async with session.begin_nested():
                await session.execute(text("UPDATE iam.user_account SET password_hash = 'plaintext'"))


@pytest.mark.invariant("IAM-INV-01")
async def test_the_database_refuses_a_second_live_account_for_an_email(users, db):
    user = await users.make(email="dup@example.com")
    async with db.unit_of_work() as session:
        with pytest.raises(IntegrityError, match="uq_user_account_email_live"):
            async with session.begin_nested():
                await session.execute(text(
                    "INSERT INTO iam.user_account (id, email, email_normalized, email_normalization, display_name,"
                    " password_hash, status, created_at, updated_at) SELECT gen_random_uuid(), email, "
                    " email_normalized, email_normalization, 'Twin', password_hash, 'active', now(), now()"
                    " FROM iam.user_account WHERE id = :id"), {"id": user.id})
        await assert_invariants_hold(session, prefix="IAM-")
