"""The invitation travels through a real SMTP server (aiosmtpd on 127.0.0.1): invite over HTTP, deliver the
outbox, read the link out of the received message, accept with it."""

from __future__ import annotations

import re
import uuid

import pytest

from tenet.kernel.outbox import SmtpSender, deliver_due
from tests.conftest import test_settings
from tests.support.invariants import rules_hold
from tests.support.users import PASSWORD, TestUser

LINK = re.compile(r"https://tenet\.example\.org/invitations/accept\?token=(wsi_[A-Za-z0-9_\-]+)")


@pytest.fixture
def settings(tmp_path, smtp_server):
    return test_settings(data_dir=tmp_path, smtp_host="127.0.0.1", smtp_port=smtp_server.port,
                         public_base_url="https://tenet.example.org/")


class TestInvitationMail:
    @pytest.mark.invariant("WS-INV-06")
    async def test_invitee_accepts_with_the_link_from_the_delivered_mail(self, ws, owner, workspace_id, users, db,
                                                                         settings, smtp_server, clock):
        invitee = await users.make(email="Grace.Hopper@Example.com")
        response = await ws.invite(owner, workspace_id, "grace.hopper@example.com ", "admin")
        assert response.status_code == 201, response.text

        assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 1
        (message,) = smtp_server.wait_for(1)
        assert message["To"] == "grace.hopper@example.com"
        assert message["Subject"] == "Olga Owner invited you to Research on Tenet"
        body = message.get_payload(decode=True).decode()
        assert "as an admin" in body and "expires on 2026-01-12 09:00 UTC" in body
        (token,) = set(LINK.findall(body))
        assert f"invitation code in Tenet: {token}" in body

        accepted = await ws.accept(invitee, token)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["workspace"]["role"] == "admin"
        assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 0  # sent once
        await rules_hold(db, "WS-")

    async def test_resend_delivers_a_new_link_and_the_first_one_is_dead(self, ws, owner, workspace_id, users, db,
                                                                         settings, smtp_server, clock):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        assert (await ws.resend(owner, invitation_id)).status_code == 200
        assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 2
        first, second = (LINK.search(m.get_payload(decode=True).decode()).group(1) for m in smtp_server.wait_for(2))
        tokens = {first, second}
        assert len(tokens) == 2
        outcomes = sorted([(await ws.accept(invitee, token)).status_code for token in tokens])
        assert outcomes == [200, 404]

    async def test_the_subject_arrives_without_bidi_or_control_characters_from_names(self, ws, client, db, settings,
                                                                                    smtp_server, clock):
        """A display name with RIGHT-TO-LEFT OVERRIDE and a C1 control (both accepted at registration) and a
        workspace name with an isolate: the subject and the text arrive without them."""
        registered = await client.post("/api/v1/auth/register", json={
            "email": "mallory@example.com", "password": PASSWORD, "display_name": "Mallory\u202eexe.txt\u009b Ops"})
        assert registered.status_code == 201, registered.text
        mallory = TestUser(uuid.UUID(registered.json()["id"]), "mallory@example.com", "")
        workspace_id = await ws.create_ok(mallory, "Pay\u2066roll\u2069")
        await ws.invite_ok(mallory, workspace_id, "target@example.com")

        assert await deliver_due(db, SmtpSender(settings.mail()), clock) == 1
        (message,) = smtp_server.wait_for(1)
        assert message["Subject"] == "Malloryexe.txt Ops invited you to Payroll on Tenet"
        body = message.get_payload(decode=True).decode()
        assert "Malloryexe.txt Ops invited you to join the workspace \"Payroll\"" in body
