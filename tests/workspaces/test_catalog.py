"""The rules as code: catalog entries, detectors that can fail, state machines, error codes, the
documented permission table and the OpenAPI description."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from tenet.kernel.invariants import REGISTRY, all_invariants, check
from tenet.kernel.transitions import STATE_MACHINES
from tenet.workspaces import lifecycles
from tenet.workspaces.errors import WorkspaceErrorCode
from tenet.workspaces.permissions import permission_table_markdown
from tests.workspaces.conftest import add_member, token_for

ROOT = Path(__file__).resolve().parents[2]
WS_IDS = [f"WS-INV-{n:02d}" for n in range(1, 11)]
# (rule, table, trigger): each trigger a rule names, which its detector must see firing.
TRIGGERS_OF_RULES = [
    ("WS-INV-04", "invitation", "invitation_terminal_is_final"),
    ("WS-INV-04", "invitation", "invitation_never_deleted"),
    ("WS-INV-05", "invitation", "invitation_accepted_has_membership"),
    ("WS-INV-05", "membership", "membership_invitation_is_accepted"),
    ("WS-INV-05", "membership", "membership_never_deleted"),
    ("WS-INV-05", "invitation", "invitation_never_deleted"),
    ("WS-INV-09", "workspace", "workspace_terminal_is_final"),
    ("WS-INV-09", "membership", "membership_terminal_is_final"),
    ("WS-INV-09", "workspace", "workspace_never_deleted"),
    ("WS-INV-09", "membership", "membership_never_deleted"),
]

# Codes clients may have seen; a code removed from WorkspaceErrorCode fails here (values never change).
KNOWN_CODES = {
    "WORKSPACE_NOT_FOUND", "WORKSPACE_NOT_ACTIVE", "WORKSPACE_ROLE_FORBIDDEN", "MEMBER_NOT_FOUND", "ALREADY_MEMBER",
    "LAST_OWNER", "ALREADY_OWNER", "OWNERSHIP_TRANSFER_TO_SELF", "INVITATION_NOT_FOUND", "INVITATION_EMAIL_INVALID",
    "INVITATION_ALREADY_PENDING", "INVITATION_TOKEN_INVALID", "INVITATION_ALREADY_ACCEPTED", "INVITATION_REVOKED",
    "INVITATION_EXPIRED", "INVITATION_EMAIL_MISMATCH", "INVITATION_LIMIT_REACHED",
    "WORKSPACE_CREATION_LIMIT_REACHED", "INVITATION_SENDER_LIMIT_REACHED",
}


class TestCatalog:
    def test_every_workspace_rule_is_registered_completely(self):
        registered = sorted(i.id for i in all_invariants() if i.id.startswith("WS-"))
        assert registered == WS_IDS
        for invariant_id in WS_IDS:
            entry = REGISTRY[invariant_id]
            assert entry.domain == "workspaces"
            for field in ("statement", "scope", "counterexample", "app", "concurrency", "detector"):
                assert getattr(entry, field).strip(), (invariant_id, field)
            assert entry.db or entry.db_reason

    def test_error_codes_of_the_catalog_exist(self):
        codes = {str(c) for c in WorkspaceErrorCode}
        for invariant_id in WS_IDS:
            error_code = REGISTRY[invariant_id].error_code
            assert error_code is None or error_code in codes, (invariant_id, error_code)

    def test_no_error_code_disappears(self):
        assert {str(c) for c in WorkspaceErrorCode} == KNOWN_CODES

    async def test_named_database_objects_exist(self, db):
        async with db.read_only() as session:
            names = set((await session.execute(text(
                "SELECT conname FROM pg_constraint UNION SELECT relname FROM pg_class "
                "UNION SELECT tgname FROM pg_trigger"))).scalars())
        for invariant_id in WS_IDS:
            assert set(REGISTRY[invariant_id].db) <= names, invariant_id


async def _violations(session, invariant_id: str) -> list[dict]:
    found = await check(await session.connection(), [REGISTRY[invariant_id]])
    return found[0].sample if found else []


class TestDetectorsFindPlantedViolations:
    """Each detector, shown an illegal state planted with raw SQL (constraints dropped inside the test's
    rolled-back transaction where needed), reports it: a detector that cannot fail proves nothing."""

    @pytest.mark.invariant("WS-INV-01")
    async def test_workspace_without_owner(self, owner, workspace_id, db):
        async with db.unit_of_work() as session:
            assert await _violations(session, "WS-INV-01") == []
            await session.execute(text("UPDATE workspace.membership SET role = 'admin' WHERE workspace_id = :w"),
                                  {"w": workspace_id})
            assert [str(v["workspace_id"]) for v in await _violations(session, "WS-INV-01")] == [workspace_id]
            await session.rollback()

    @pytest.mark.invariant("WS-INV-02")
    async def test_two_active_memberships(self, owner, workspace_id, db):
        async with db.unit_of_work() as session:
            await session.execute(text("DROP INDEX workspace.uq_membership_active"))
            await session.execute(text(
                "INSERT INTO workspace.membership (id, workspace_id, user_id, role, status, joined_at, updated_at) "
                "VALUES (gen_random_uuid(), :w, :u, 'member', 'ACTIVE', now(), now())"),
                {"w": workspace_id, "u": owner.id})
            assert len(await _violations(session, "WS-INV-02")) == 1
            await session.rollback()

    @pytest.mark.invariant("WS-INV-03")
    async def test_two_pending_invitations(self, ws, owner, workspace_id, db):
        invitation_id = await ws.invite_ok(owner, workspace_id, "ada@example.com")
        async with db.unit_of_work() as session:
            await session.execute(text("DROP INDEX workspace.uq_invitation_pending_email"))
            await session.execute(text(
                "INSERT INTO workspace.invitation (id, workspace_id, email, email_normalized, email_normalization, "
                "role, status, token_digest, invited_by, created_at, expires_at, last_sent_at) "
                "SELECT gen_random_uuid(), workspace_id, 'ADA@example.com', email_normalized, email_normalization, "
                "role, status, 'sha256:' || repeat('0', 64), invited_by, created_at, expires_at, last_sent_at "
                "FROM workspace.invitation WHERE id = :id"), {"id": invitation_id})
            assert [v["email_normalized"] for v in await _violations(session, "WS-INV-03")] == ["ada@example.com"]
            await session.rollback()

    @pytest.mark.parametrize(("invariant_id", "table", "trigger"), [
        pytest.param(invariant_id, table, trigger, id=f"{invariant_id}-{trigger}",
                     marks=pytest.mark.invariant(invariant_id))
        for invariant_id, table, trigger in TRIGGERS_OF_RULES
    ])
    @pytest.mark.parametrize("how", ["DISABLE", "ENABLE REPLICA"])
    async def test_trigger_disabled(self, db, invariant_id, table, trigger, how):
        """A trigger that does not fire in an ordinary session (disabled, or firing only for replicas) is
        reported by each rule it holds."""
        async with db.unit_of_work() as session:
            assert await _violations(session, invariant_id) == []
            await session.execute(text(f"ALTER TABLE workspace.{table} {how} TRIGGER {trigger}"))
            assert [v["problem"] for v in await _violations(session, invariant_id)] == [
                f"trigger {trigger} missing or disabled"]
            await session.rollback()

    @pytest.mark.invariant("WS-INV-05")
    async def test_accepted_invitation_without_its_membership(self, ws, owner, workspace_id, users, db):
        invitee = await users.make()
        invitation_id = await ws.invite_ok(owner, workspace_id, invitee.email)
        await ws.accept(invitee, await token_for(db, invitee.email))
        async with db.unit_of_work() as session:
            assert await _violations(session, "WS-INV-05") == []
            await session.execute(text(
                "UPDATE workspace.membership SET invitation_id = NULL WHERE invitation_id = :id"),
                {"id": invitation_id})
            assert [str(v["invitation_id"]) for v in await _violations(session, "WS-INV-05")] == [invitation_id]
            await session.rollback()

    @pytest.mark.invariant("WS-INV-06")
    async def test_token_in_clear(self, ws, owner, workspace_id, db):
        invitation_id = await ws.invite_ok(owner, workspace_id, "ada@example.com")
        async with db.unit_of_work() as session:
            # Run the queued commit-time checks of the insert first: ALTER TABLE refuses pending trigger events.
            await session.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))
            await session.execute(text(
                "ALTER TABLE workspace.invitation DROP CONSTRAINT ck_invitation_token_is_digest"))
            await session.execute(text("UPDATE workspace.invitation SET token_digest = 'wsi_clear' WHERE id = :id"),
                                  {"id": invitation_id})
            (violation,) = await _violations(session, "WS-INV-06")
            assert (str(violation["invitation_id"]), violation["problem"]) == (
                invitation_id, "token not stored as a digest")
            await session.rollback()

    @pytest.mark.invariant("WS-INV-06")
    async def test_acceptance_by_an_account_with_another_email(self, ws, owner, workspace_id, users, db):
        invitee = await users.make(email="ada@example.com")
        invitation_id = await ws.invite_ok(owner, workspace_id, "Ada@Example.com")
        assert (await ws.accept(invitee, await token_for(db, "Ada@Example.com"))).status_code == 200
        async with db.unit_of_work() as session:
            # Deleting the account keeps its email: the acceptance still matches.
            await session.execute(text(
                "UPDATE iam.user_account SET status = 'deleted', deleted_at = now() WHERE id = :u"), {"u": invitee.id})
            assert await _violations(session, "WS-INV-06") == []
            await session.execute(text(
                "UPDATE iam.user_account SET email = 'bob@example.com', email_normalized = 'bob@example.com' "
                "WHERE id = :u"), {"u": invitee.id})
            assert [(str(v["invitation_id"]), v["problem"]) for v in await _violations(session, "WS-INV-06")] == [
                (invitation_id, "accepted by an account with another email")]
            # Keys of different algorithm versions are not comparable: the detector does not judge them.
            await session.execute(text("UPDATE iam.user_account SET email_normalization = 'email-v2' WHERE id = :u"),
                                  {"u": invitee.id})
            assert await _violations(session, "WS-INV-06") == []
            await session.rollback()

    @pytest.mark.invariant("WS-INV-07")
    async def test_audit_row_with_an_email(self, owner, workspace_id, db):
        async with db.unit_of_work() as session:
            assert await _violations(session, "WS-INV-07") == []
            await session.execute(text(
                "INSERT INTO kernel.audit_log (occurred_at, action, actor_type, actor_id, subject_type, subject_id, "
                "data) "
                "VALUES (now(), 'workspace.invitation.created', 'user', :u, 'invitation', :w, "
                "'{\"invited\": \"ada@example.com\"}')"), {"u": str(owner.id), "w": workspace_id})
            assert len(await _violations(session, "WS-INV-07")) == 1
            await session.rollback()

    @pytest.mark.invariant("WS-INV-08")
    async def test_pending_invitation_in_a_deleting_workspace(self, ws, owner, workspace_id, db):
        await ws.invite_ok(owner, workspace_id, "ada@example.com")
        async with db.unit_of_work() as session:
            await session.execute(text(
                "UPDATE workspace.workspace SET status = 'DELETING', deletion_requested_at = now() WHERE id = :w"),
                {"w": workspace_id})
            assert [v["status"] for v in await _violations(session, "WS-INV-08")] == ["DELETING"]
            await session.rollback()

    @pytest.mark.invariant("WS-INV-09")
    async def test_active_membership_in_a_deleted_workspace(self, ws, owner, workspace_id, users, db):
        await add_member(ws, db, users, owner, workspace_id)
        async with db.unit_of_work() as session:
            await session.execute(text(
                "UPDATE workspace.workspace SET status = 'DELETED', deletion_requested_at = now(), deleted_at = now() "
                "WHERE id = :w"), {"w": workspace_id})
            assert [v["problem"] for v in await _violations(session, "WS-INV-09")] == [
                "active membership in a deleted workspace"] * 2
            await session.rollback()


class TestStateMachines:
    def test_lifecycles_are_declared_with_the_kernel(self):
        for machine in (lifecycles.WORKSPACE, lifecycles.INVITATION, lifecycles.MEMBERSHIP):
            assert STATE_MACHINES[machine.name] is machine

    @pytest.mark.invariant("WS-INV-04")
    def test_invitation_terminal_states_have_no_way_out(self):
        machine = lifecycles.INVITATION
        assert machine.terminal == {"ACCEPTED", "REVOKED", "EXPIRED"}
        for terminal in machine.terminal:
            for state in machine.states:
                assert not machine.allows(terminal, state)
        assert {t: machine.allows("PENDING", t) for t in machine.states} == {
            "PENDING": True, "ACCEPTED": True, "REVOKED": True, "EXPIRED": True}

    def test_workspace_deletion_goes_through_deleting(self):
        machine = lifecycles.WORKSPACE
        assert machine.allows("ACTIVE", "DELETING") and machine.allows("DELETING", "DELETED")
        assert not machine.allows("ACTIVE", "DELETED") and not machine.allows("DELETED", "ACTIVE")


class TestDocumentation:
    def test_decisions_document_the_permission_table(self):
        decisions = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
        section = decisions[decisions.index("\n## Workspaces"):]
        assert permission_table_markdown() in section, "docs/decisions.md ## Workspaces: paste the new table"

    def test_openapi_describes_roles_permissions_and_enums(self, app):
        document = app.openapi()
        (tag,) = [t for t in document["tags"] if t["name"] == "workspaces"]
        assert permission_table_markdown() in tag["description"]
        schemas = document["components"]["schemas"]
        assert schemas["WorkspaceRole"]["enum"] == ["owner", "admin", "member"]
        assert schemas["InvitationRole"]["enum"] == ["admin", "member"]
        assert schemas["InvitationStatus"]["enum"] == ["PENDING", "ACCEPTED", "REVOKED", "EXPIRED"]
        assert schemas["InvitationCreate"]["additionalProperties"] is False
        assert "examples" in schemas["InvitationRead"]
        accept = document["paths"]["/api/v1/invitations/accept"]["post"]
        assert {"401", "403", "404", "409", "422"} <= set(accept["responses"])
        invite = document["paths"]["/api/v1/workspaces/{workspace_id}/invitations"]["post"]
        assert "429" in invite["responses"]
