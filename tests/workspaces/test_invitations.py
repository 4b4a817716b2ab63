"""Invitations: invite, list, revoke, resend, accept. Spec 002 fixture group 1 (normal path) and group 2
(duplicates, case-variant emails, expiry, revoked/used/superseded tokens, wrong acceptor)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from tenet.iam.tokens import digest
from tests.conftest import test_settings
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.workspaces.conftest import add_member, mails_to, token_for


async def _invitation_row(db, invitation_id: str) -> dict:
    async with db.read_only() as session:
        row = (await session.execute(text("SELECT * FROM workspace.invitation WHERE id = :id"),
                                     {"id": invitation_id})).one()
        return dict(row._mapping)


async def _memberships_from(db, invitation_id: str) -> list[dict]:
    async with db.read_only() as session:
        rows = await session.execute(text("SELECT * FROM workspace.membership WHERE invitation_id = :id"),
                                     {"id": invitation_id})
        return [dict(r._mapping) for r in rows]


class TestCreateInvitation:
    @pytest.mark.invariant("WS-INV-06", "WS-INV-07")
    async def test_owner_invites_and_only_the_mail_carries_the_token(self, ws, owner, workspace_id, db, client):
        response = await ws.invite(owner, workspace_id, "Ada.Lovelace@Example.com", "admin")
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["status"] == "PENDING" and body["role"] == "admin"
        assert body["email"] == "Ada.Lovelace@Example.com"
        assert body["expires_at"] == "2026-01-12T09:00:00Z"  # invitation_ttl_days = 7
        assert not any("token" in key for key in body)
        (mail,) = await mails_to(db, "Ada.Lovelace@Example.com")
        token = await token_for(db, "Ada.Lovelace@Example.com")
        assert token.startswith("wsi_") and token not in response.text
        assert f"http://127.0.0.1:8000/invitations/accept?token={token}" in mail["body_text"]
        assert f"invitation code in Tenet: {token}" in mail["body_text"]
        assert "Olga Owner" in mail["body_text"] and "Research" in mail["body_text"]
        assert mail["subject"] == "Olga Owner invited you to Research on Tenet"
        row = await _invitation_row(db, body["id"])
        assert row["token_digest"] == digest(token) and token not in str(row)
        assert (row["email_normalized"], row["email_normalization"]) == ("ada.lovelace@example.com", "email-v1")
        async with db.read_only() as session:
            audit = (await session.execute(text(
                "SELECT data::text FROM kernel.audit_log WHERE action = 'workspace.invitation.created'"))).scalar_one()
        assert "@" not in audit and token not in audit
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-03")
    @pytest.mark.parametrize("second", ["ada@example.com ", "ADA@EXAMPLE.COM", "\uff21da@example.com"])
    async def test_case_variant_email_conflicts_with_the_pending_invitation(self, ws, owner, workspace_id, db, second):
        first = await ws.invite_ok(owner, workspace_id, "Ada@Example.com")
        response = await ws.invite(owner, workspace_id, second)
        assert response.status_code == 409
        assert code(response) == "INVITATION_ALREADY_PENDING"
        assert response.json()["invitation_id"] == first
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-03")
    async def test_same_email_in_another_workspace_is_independent(self, ws, owner, workspace_id):
        other = await ws.create_ok(owner, "Other")
        await ws.invite_ok(owner, workspace_id, "ada@example.com")
        assert (await ws.invite(owner, other, "ada@example.com")).status_code == 201

    @pytest.mark.invariant("WS-INV-03", "WS-INV-04")
    async def test_pending_invitation_past_expiry_does_not_block_a_new_one(self, ws, owner, workspace_id, db, clock):
        old = await ws.invite_ok(owner, workspace_id, "ada@example.com")
        clock.advance(timedelta(days=7))
        new = await ws.invite_ok(owner, workspace_id, "ada@example.com")
        assert (await _invitation_row(db, old))["status"] == "EXPIRED"
        assert (await _invitation_row(db, new))["status"] == "PENDING"
        await rules_hold(db, "WS-")

    @pytest.mark.parametrize(("email", "expected"), [
        # Well-formed JSON the schema accepts, refused by the address check: the domain's own code.
        ("not-an-email", "INVITATION_EMAIL_INVALID"), ("a@b", "INVITATION_EMAIL_INVALID"),
        ("ada@@example.com", "INVITATION_EMAIL_INVALID"), ("   ", "INVITATION_EMAIL_INVALID"),
        # Outside the schema's 3..320 characters: refused before the service runs.
        ("ab", "VALIDATION_FAILED"), ("a" * 310 + "@example.com", "VALIDATION_FAILED"),
    ])
    async def test_invalid_email_answers_422(self, ws, owner, workspace_id, email, expected):
        response = await ws.invite(owner, workspace_id, email)
        assert (response.status_code, code(response)) == (422, expected), response.text

    @pytest.mark.invariant("WS-INV-02")
    async def test_inviting_an_active_member_answers_409(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        response = await ws.invite(owner, workspace_id, member.email.upper())
        assert response.status_code == 409
        assert code(response) == "ALREADY_MEMBER"

    async def test_owner_role_cannot_be_invited(self, ws, owner, workspace_id):
        response = await ws.invite(owner, workspace_id, "boss@example.com", "owner")
        assert response.status_code == 422

    async def test_admin_invites_members_but_not_admins(self, ws, owner, workspace_id, users, db):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        assert (await ws.invite(admin, workspace_id, "m@example.com", "member")).status_code == 201
        refused = await ws.invite(admin, workspace_id, "a@example.com", "admin")
        assert refused.status_code == 403
        assert code(refused) == "WORKSPACE_ROLE_FORBIDDEN"

    async def test_non_member_gets_404(self, ws, workspace_id, users):
        response = await ws.invite(await users.make(), workspace_id, "x@example.com")
        assert code(response) == "WORKSPACE_NOT_FOUND"


class TestInvitationDailyLimit:
    @pytest.fixture
    def settings(self, tmp_path):
        return test_settings(data_dir=tmp_path, invitations_per_workspace_per_day=2)

    async def test_invitation_beyond_the_limit_answers_429_with_retry_after(self, ws, owner, workspace_id, clock):
        await ws.invite_ok(owner, workspace_id, "one@example.com")
        clock.advance(timedelta(hours=1))
        await ws.invite_ok(owner, workspace_id, "two@example.com")
        clock.advance(timedelta(hours=1))
        response = await ws.invite(owner, workspace_id, "three@example.com")
        assert response.status_code == 429
        assert code(response) == "INVITATION_LIMIT_REACHED"
        # The first send ages out of the 24-hour window 22 hours from now.
        assert int(response.headers["retry-after"]) == 22 * 3600 + 1
        clock.advance(timedelta(hours=22, seconds=1))
        assert (await ws.invite(owner, workspace_id, "three@example.com")).status_code == 201

    async def test_resends_count_against_the_limit(self, ws, owner, workspace_id):
        invitation_id = await ws.invite_ok(owner, workspace_id, "one@example.com")
        assert (await ws.resend(owner, invitation_id)).status_code == 200
        refused = await ws.resend(owner, invitation_id)
        assert refused.status_code == 429 and "retry-after" in refused.headers

    async def test_limit_is_per_workspace(self, ws, owner, workspace_id):
        other = await ws.create_ok(owner, "Other")
        await ws.invite_ok(owner, workspace_id, "one@example.com")
        await ws.invite_ok(owner, workspace_id, "two@example.com")
        assert (await ws.invite(owner, other, "one@example.com")).status_code == 201


class TestListInvitations:
    async def test_owner_lists_newest_first_and_filters_by_status(self, ws, owner, workspace_id, clock):
        first = await ws.invite_ok(owner, workspace_id, "one@example.com")
        clock.advance(timedelta(minutes=1))
        second = await ws.invite_ok(owner, workspace_id, "two@example.com")
        await ws.revoke(owner, first)
        everything = (await ws.invitations(owner, workspace_id)).json()["items"]
        assert [i["id"] for i in everything] == [second, first]
        pending = (await ws.invitations(owner, workspace_id, status="PENDING")).json()["items"]
        assert [i["id"] for i in pending] == [second]
        revoked = (await ws.invitations(owner, workspace_id, status="REVOKED")).json()["items"]
        assert [i["id"] for i in revoked] == [first]

    async def test_pending_past_expiry_is_listed_as_expired(self, ws, owner, workspace_id, clock):
        invitation_id = await ws.invite_ok(owner, workspace_id, "one@example.com")
        clock.advance(timedelta(days=7))
        assert (await ws.invitations(owner, workspace_id, status="PENDING")).json()["items"] == []
        (listed,) = (await ws.invitations(owner, workspace_id, status="EXPIRED")).json()["items"]
        assert (listed["id"], listed["status"]) == (invitation_id, "EXPIRED")

    async def test_member_gets_403(self, ws, owner, workspace_id, users, db):
        member = await add_member(ws, db, users, owner, workspace_id)
        assert (await ws.invitations(member, workspace_id)).status_code == 403

    async def test_unknown_status_answers_422(self, ws, owner, workspace_id):
        assert (await ws.invitations(owner, workspace_id, status="LOST")).status_code == 422


class TestRevokeInvitation:
    @pytest.mark.invariant("WS-INV-06")
    async def test_revoked_token_never_yields_membership(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        response = await ws.revoke(owner, invitation_id)
        assert response.status_code == 200 and response.json()["status"] == "REVOKED"
        refused = await ws.accept(invitee, token)
        assert refused.status_code == 409
        assert code(refused) == "INVITATION_REVOKED"
        assert await _memberships_from(db, invitation_id) == []
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-04")
    async def test_terminal_invitation_cannot_be_revoked(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        response = await ws.revoke(owner, invitation_id)
        assert response.status_code == 409
        assert code(response) == "INVITATION_ALREADY_ACCEPTED"
        assert response.json()["invitation_status"] == "ACCEPTED"
        revoked = await ws.invite_ok(owner, workspace_id, "other@example.com")
        await ws.revoke(owner, revoked)
        assert code(await ws.revoke(owner, revoked)) == "INVITATION_REVOKED"

    async def test_admin_revokes_member_invitation_but_not_admin_invitation(self, ws, owner, workspace_id, users, db):
        admin = await add_member(ws, db, users, owner, workspace_id, "admin")
        member_invitation = await ws.invite_ok(owner, workspace_id, "m@example.com", "member")
        admin_invitation = await ws.invite_ok(owner, workspace_id, "a@example.com", "admin")
        assert (await ws.revoke(admin, member_invitation)).status_code == 200
        assert (await ws.revoke(admin, admin_invitation)).status_code == 403

    async def test_outsider_gets_404(self, ws, owner, workspace_id, users):
        invitation_id = await ws.invite_ok(owner, workspace_id, "m@example.com")
        response = await ws.revoke(await users.make(), invitation_id)
        assert response.status_code == 404
        assert code(response) == "INVITATION_NOT_FOUND"
        assert code(await ws.revoke(owner, str(uuid.uuid4()))) == "INVITATION_NOT_FOUND"


class TestResendInvitation:
    @pytest.mark.invariant("WS-INV-06")
    async def test_resend_kills_the_old_token_and_the_new_one_works(self, ws, owner, workspace_id, users, db, clock):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        old_token = await token_for(db, invitee.email)
        clock.advance(timedelta(days=3))
        response = await ws.resend(owner, invitation_id)
        assert response.status_code == 200, response.text
        assert response.json()["expires_at"] == "2026-01-15T09:00:00Z"
        assert response.json()["last_sent_at"] == "2026-01-08T09:00:00Z"
        new_token = await token_for(db, invitee.email)
        assert new_token != old_token and len(await mails_to(db, invitee.email)) == 2
        refused = await ws.accept(invitee, old_token)
        assert refused.status_code == 404
        assert code(refused) == "INVITATION_TOKEN_INVALID"
        assert (await ws.accept(invitee, new_token)).status_code == 200
        await rules_hold(db, "WS-")

    async def test_resend_past_expiry_is_refused(self, ws, owner, workspace_id, clock):
        invitation_id = await ws.invite_ok(owner, workspace_id, "m@example.com")
        clock.advance(timedelta(days=8))
        response = await ws.resend(owner, invitation_id)
        assert response.status_code == 409
        assert code(response) == "INVITATION_EXPIRED"

    async def test_resend_of_revoked_is_refused(self, ws, owner, workspace_id):
        invitation_id = await ws.invite_ok(owner, workspace_id, "m@example.com")
        await ws.revoke(owner, invitation_id)
        assert code(await ws.resend(owner, invitation_id)) == "INVITATION_REVOKED"


class TestAcceptInvitation:
    @pytest.mark.invariant("WS-INV-05")
    async def test_invited_user_joins_with_the_invited_role(self, ws, owner, workspace_id, users, db, clock):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email, "admin")
        clock.advance(timedelta(hours=2))
        response = await ws.accept(invitee, await token_for(db, invitee.email))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["invitation_id"] == invitation_id
        assert (body["workspace"]["id"], body["workspace"]["role"]) == (workspace_id, "admin")
        (membership,) = await _memberships_from(db, invitation_id)
        assert (membership["id"], membership["user_id"], membership["status"]) == (
            uuid.UUID(body["membership_id"]), invitee.id, "ACTIVE")
        invitation = await _invitation_row(db, invitation_id)
        assert (invitation["status"], invitation["accepted_by"]) == ("ACCEPTED", invitee.id)
        assert invitation["accepted_at"].isoformat() == "2026-01-05T11:00:00+00:00"
        listed = (await ws.members(owner, workspace_id)).json()["items"]
        assert {m["user_id"] for m in listed} == {str(owner.id), str(invitee.id)}
        await rules_hold(db, "WS-")

    @pytest.mark.invariant("WS-INV-06")
    async def test_used_token_is_refused(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        assert (await ws.accept(invitee, token)).status_code == 200
        again = await ws.accept(invitee, token)
        assert again.status_code == 409
        assert code(again) == "INVITATION_ALREADY_ACCEPTED"
        await ws.leave(invitee, workspace_id)
        assert code(await ws.accept(invitee, token)) == "INVITATION_ALREADY_ACCEPTED"

    @pytest.mark.invariant("WS-INV-06")
    async def test_another_account_is_refused_with_403(self, ws, owner, workspace_id, users, db):
        invitee, other = await users.make(), await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        response = await ws.accept(other, await token_for(db, invitee.email))
        assert response.status_code == 403
        assert code(response) == "INVITATION_EMAIL_MISMATCH"
        assert (await _invitation_row(db, invitation_id))["status"] == "PENDING"

    @pytest.mark.invariant("WS-INV-06")
    async def test_case_variant_account_email_is_the_invited_person(self, ws, owner, workspace_id, users, db):
        invitee = await users.make(email="ada.lovelace@example.com")
        await ws.invite_ok(owner, workspace_id, "  Ada.Lovelace@EXAMPLE.com")
        response = await ws.accept(invitee, await token_for(db, "Ada.Lovelace@EXAMPLE.com"))
        assert response.status_code == 200, response.text

    @pytest.mark.invariant("WS-INV-06")
    @pytest.mark.parametrize("late", [timedelta(days=7), timedelta(days=7, seconds=1), timedelta(days=30)])
    async def test_token_past_expiry_is_refused_before_any_sweep(self, ws, owner, workspace_id, users, db, clock,
                                                                 late):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        clock.advance(late)
        response = await ws.accept(invitee, token)
        assert response.status_code == 409
        assert code(response) == "INVITATION_EXPIRED"
        assert await _memberships_from(db, invitation_id) == []
        await rules_hold(db, "WS-")

    async def test_token_just_before_expiry_is_accepted(self, ws, owner, workspace_id, users, db, clock):
        invitee = await users.make()
        await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        clock.advance(timedelta(days=7) - timedelta(seconds=1))
        assert (await ws.accept(invitee, token)).status_code == 200

    @pytest.mark.invariant("WS-INV-06")
    @pytest.mark.parametrize("token", ["wsi_" + "A" * 43, "wsi_unknown-token"])
    async def test_unknown_token_answers_404(self, ws, owner, token):
        response = await ws.accept(owner, token)
        assert response.status_code == 404
        assert code(response) == "INVITATION_TOKEN_INVALID"

    @pytest.mark.parametrize("body", [{}, {"token": ""}, {"token": "has spaces in it"}, {"token": "x" * 201},
                                      {"token": "wsi_abcdefgh", "user_id": "someone"}])
    async def test_malformed_body_answers_422(self, client, owner, body):
        response = await client.post("/api/v1/invitations/accept", json=body, headers=owner.headers)
        assert response.status_code == 422

    @pytest.mark.invariant("WS-INV-02")
    async def test_existing_active_member_is_refused(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        token = await token_for(db, invitee.email)
        # Reachable only through a path that bypasses invite's check (say, a future import).
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO workspace.membership (id, workspace_id, user_id, role, status, joined_at, updated_at) "
                "VALUES (gen_random_uuid(), :w, :u, 'member', 'ACTIVE', now(), now())"),
                {"w": workspace_id, "u": invitee.id})
        response = await ws.accept(invitee, token)
        assert response.status_code == 409
        assert code(response) == "ALREADY_MEMBER"
        assert (await _invitation_row(db, invitation_id))["status"] == "PENDING"
