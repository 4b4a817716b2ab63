"""The rules of workspaces (spec 002's worked example), each with its enforcement and its detector.

WS-INV-01..07 are the spec's seven rules, refined; WS-INV-08 and -09 are the refinements the deletion
states need. Every detector returns the violating rows (empty = holds); `tenet invariants check` runs them.
"""

from tenet.kernel.invariants import register
from tenet.workspaces.models import (
    INVITATION_ACCEPT_TRIGGER,
    INVITATION_NEVER_DELETED_TRIGGER,
    INVITATION_PENDING_INDEX,
    INVITATION_TERMINAL_TRIGGER,
    INVITATION_TOKEN_UNIQUE,
    MEMBERSHIP_ACTIVE_INDEX,
    MEMBERSHIP_INVITATION_TRIGGER,
    MEMBERSHIP_NEVER_DELETED_TRIGGER,
    MEMBERSHIP_TERMINAL_TRIGGER,
    WORKSPACE_NEVER_DELETED_TRIGGER,
    WORKSPACE_TERMINAL_TRIGGER,
)


def _with_triggers_firing(detector: str, *triggers: tuple[str, str], leading_nulls: int) -> str:
    """`detector` UNION a row 'trigger <name> missing or disabled' for each (table of the workspace schema,
    trigger) that would not fire in an ordinary session: absent, disabled, or enabled for replicas only.
    `leading_nulls` pads those rows to the detector's columns."""
    wanted = ",\n                       ".join(f"('{table}', '{name}')" for table, name in triggers)
    return detector.rstrip() + f"""
        UNION ALL
        SELECT {"NULL, " * leading_nulls}'trigger ' || want.name || ' missing or disabled'
          FROM (VALUES {wanted}) AS want(table_name, name)
         WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                            JOIN pg_namespace n ON n.oid = c.relnamespace
                           WHERE n.nspname = 'workspace' AND c.relname = want.table_name
                             AND t.tgname = want.name AND t.tgenabled IN ('O', 'A'))
    """  # noqa: S608  (names of this module's constants, not input)


_LOCK = ("SELECT .. FOR UPDATE of the workspace row (`_lock_workspace`), taken first by every command that "
         "changes the workspace's memberships or invitations, so the check and the write of two commands never "
         "interleave.")

register(
    id="WS-INV-01",
    domain="workspaces",
    statement="Every workspace that is not DELETED has at least one active owner.",
    scope="workspace.workspace rows in ACTIVE or DELETING, with their ACTIVE memberships",
    counterexample="The two owners of a workspace leave at the same moment; each saw the other still there, "
                   "and the workspace is left with no owner to manage or delete it.",
    db=(),
    db_reason="a count across rows of another table; serialised by the workspace row lock instead",
    app="leave, remove, change role and transfer ownership count the other active owners under the lock and "
        "refuse with LAST_OWNER; creation makes the creator the first owner in the same transaction.",
    error_code="LAST_OWNER",
    concurrency=_LOCK + " Proven by tests/concurrency/test_workspace_races.py (fails without the lock).",
    detector="""
        SELECT w.id AS workspace_id, w.status FROM workspace.workspace w
         WHERE w.status IN ('ACTIVE', 'DELETING')
           AND NOT EXISTS (SELECT 1 FROM workspace.membership m
                            WHERE m.workspace_id = w.id AND m.status = 'ACTIVE' AND m.role = 'owner')
    """,
)

register(
    id="WS-INV-02",
    domain="workspaces",
    statement="At most one active membership per (workspace, user).",
    scope="workspace.membership where status = 'ACTIVE'",
    counterexample="A user accepts two invitations to the same workspace and holds two active memberships "
                   "with different roles.",
    db=(MEMBERSHIP_ACTIVE_INDEX,),
    app="Invite and accept look for an active membership first and answer ALREADY_MEMBER; a unique violation "
        "of uq_membership_active maps to the same code.",
    error_code="ALREADY_MEMBER",
    concurrency="Partial unique index (the arbiter) plus the workspace row lock (the friendly error).",
    detector="""
        SELECT workspace_id, user_id, count(*) AS active_memberships FROM workspace.membership
         WHERE status = 'ACTIVE' GROUP BY workspace_id, user_id HAVING count(*) > 1
    """,
)

register(
    id="WS-INV-03",
    domain="workspaces",
    statement="At most one PENDING invitation per (workspace, normalised email).",
    scope="workspace.invitation where status = 'PENDING'; the key is email-v1 (tenet.kernel.emails)",
    counterexample="Ada@Example.com and ' ada@example.com' are both invited to one workspace and get two "
                   "live tokens.",
    db=(INVITATION_PENDING_INDEX,),
    app="create_invitation looks for a pending invitation with the same key under the lock only to answer "
        "INVITATION_ALREADY_PENDING with its id (a PENDING one past its time is expired first); a unique "
        "violation of uq_invitation_pending_email maps to the same code.",
    error_code="INVITATION_ALREADY_PENDING",
    concurrency="Partial unique index decides; the workspace row lock makes the loser see the winner first.",
    detector="""
        SELECT workspace_id, email_normalized, count(*) AS pending FROM workspace.invitation
         WHERE status = 'PENDING' GROUP BY workspace_id, email_normalized HAVING count(*) > 1
    """,
)

register(
    id="WS-INV-04",
    domain="workspaces",
    statement="Invitations go PENDING -> ACCEPTED | REVOKED | EXPIRED; terminal states are final, each "
              "state carries its time, and no invitation is ever deleted.",
    scope="workspace.invitation, every row",
    counterexample="A revoked invitation is set back to PENDING and accepted; an EXPIRED row without "
                   "expired_at; an accepted invitation deleted, and its history with it.",
    db=(INVITATION_TERMINAL_TRIGGER, INVITATION_NEVER_DELETED_TRIGGER, "ck_invitation_status",
        "ck_invitation_accepted_has_time", "ck_invitation_revoked_has_time", "ck_invitation_expired_has_time"),
    app="Every change is a declared transition (lifecycles.INVITATION) applied as a conditional UPDATE on "
        "status = 'PENDING'; zero rows answers the terminal state's code.",
    error_code="INVITATION_ALREADY_ACCEPTED",
    concurrency="Conditional UPDATE (row lock) under the workspace row lock; the triggers refuse any write "
                "that leaves a terminal state, and any DELETE or TRUNCATE, whoever connects.",
    detector=_with_triggers_firing("""
        SELECT id::text AS invitation_id, status AS problem FROM workspace.invitation
         WHERE status NOT IN ('PENDING', 'ACCEPTED', 'REVOKED', 'EXPIRED')
            OR (status = 'ACCEPTED') <> (accepted_at IS NOT NULL)
            OR (status = 'REVOKED') <> (revoked_at IS NOT NULL)
            OR (status = 'EXPIRED') <> (expired_at IS NOT NULL)
    """, ("invitation", INVITATION_TERMINAL_TRIGGER), ("invitation", INVITATION_NEVER_DELETED_TRIGGER),
        leading_nulls=1),
)

register(
    id="WS-INV-05",
    domain="workspaces",
    statement="Accepting creates the membership and closes the invitation in one transaction: an ACCEPTED "
              "invitation has exactly the membership of its acceptor, and a membership made from an "
              "invitation points at an ACCEPTED one.",
    scope="workspace.invitation where status = 'ACCEPTED'; workspace.membership where invitation_id IS NOT NULL",
    counterexample="The invitation is marked ACCEPTED but the process dies before the membership is written "
                   "(or the other way round); the membership of an accepted invitation is deleted later.",
    db=(INVITATION_ACCEPT_TRIGGER, MEMBERSHIP_INVITATION_TRIGGER, "uq_membership_invitation_id",
        "fk_membership_invitation_id_invitation", MEMBERSHIP_NEVER_DELETED_TRIGGER, INVITATION_NEVER_DELETED_TRIGGER),
    app="accept_invitation performs both writes in the caller's single unit of work.",
    error_code=None,
    concurrency="One transaction; deferred constraint triggers check both directions at commit, and neither "
                "row can be deleted afterwards (DELETE and TRUNCATE refused by trigger).",
    detector=_with_triggers_firing("""
        SELECT i.id AS invitation_id, 'accepted without membership' AS problem FROM workspace.invitation i
         WHERE i.status = 'ACCEPTED'
           AND NOT EXISTS (SELECT 1 FROM workspace.membership m WHERE m.invitation_id = i.id
                            AND m.user_id = i.accepted_by AND m.workspace_id = i.workspace_id)
        UNION ALL
        SELECT i.id, 'membership from an invitation that is not accepted' FROM workspace.membership m
          JOIN workspace.invitation i ON i.id = m.invitation_id
         WHERE i.status <> 'ACCEPTED' OR i.accepted_by <> m.user_id OR i.workspace_id <> m.workspace_id
    """, ("invitation", INVITATION_ACCEPT_TRIGGER), ("membership", MEMBERSHIP_INVITATION_TRIGGER),
        ("membership", MEMBERSHIP_NEVER_DELETED_TRIGGER), ("invitation", INVITATION_NEVER_DELETED_TRIGGER),
        leading_nulls=1),
)

register(
    id="WS-INV-06",
    domain="workspaces",
    statement="A revoked, expired, superseded (resent) or used token never yields membership; only a SHA-256 "
              "digest of a token is stored; the accepting account's normalised email equals the invitation's.",
    scope="workspace.invitation tokens and acceptances. The detector compares the stored email keys of the "
          "invitation and of its acceptor's account as it is now, which is the email it accepted with (an "
          "account's email never changes and is kept when the account is deleted), and only keys of one algorithm "
          "version (every row is email-v1 today)",
    counterexample="A token from the first mail still works after a resend; an invitation for ada@example.com "
                   "accepted by bob@example.com; a token readable in the database.",
    db=("ck_invitation_token_is_digest", INVITATION_TOKEN_UNIQUE, "ck_invitation_accepted_before_expiry",
        INVITATION_TERMINAL_TRIGGER),
    app="accept_invitation looks the token up by digest, compares email-v1 keys of the account and the "
        "invitation (INVITATION_EMAIL_MISMATCH), and accepts with a conditional UPDATE on status = 'PENDING', "
        "the digest and expires_at > now. A resend replaces the digest, so the old token matches no row "
        "(INVITATION_TOKEN_INVALID).",
    error_code="INVITATION_TOKEN_INVALID",
    concurrency="The accept's conditional UPDATE and the workspace row lock: a revoke or resend that commits "
                "first makes the accept match nothing.",
    detector="""
        SELECT id AS invitation_id, 'token not stored as a digest' AS problem FROM workspace.invitation
         WHERE token_digest !~ '^sha256:[0-9a-f]{64}$'
        UNION ALL
        SELECT id, 'accepted after expiry' FROM workspace.invitation
         WHERE status = 'ACCEPTED' AND accepted_at >= expires_at
        UNION ALL
        SELECT id, 'accepted after being revoked or expired' FROM workspace.invitation
         WHERE status = 'ACCEPTED' AND (revoked_at IS NOT NULL OR expired_at IS NOT NULL)
        UNION ALL
        SELECT i.id, 'accepted by an account with another email' FROM workspace.invitation i
          JOIN iam.user_account u ON u.id = i.accepted_by
         WHERE i.status = 'ACCEPTED' AND u.email_normalization = i.email_normalization
           AND u.email_normalized <> i.email_normalized
    """,
)

register(
    id="WS-INV-07",
    domain="workspaces",
    statement="Audit rows of workspaces reference stable ids, never display names, emails or tokens.",
    scope="kernel.audit_log rows whose action starts with 'workspace.'",
    counterexample="An audit row 'Ada Lovelace invited bob@example.com (token wsi_...)' that changes meaning "
                   "when Ada renames herself and leaks a live token.",
    db=(),
    db_reason="the audit log is the kernel's (append-only, KERNEL-INV-01); its writer refuses keys such as "
              "token and name, and this detector checks the rows",
    app="The service passes only ids, roles, states and counts to tenet.kernel.audit.record.",
    error_code=None,
    concurrency="Not applicable: rows are only inserted.",
    detector=r"""
        SELECT id, action FROM kernel.audit_log
         WHERE action LIKE 'workspace.%'
           AND (subject_id !~ '^[0-9a-f-]{36}$'
                OR (scope_id IS NOT NULL AND scope_id !~ '^[0-9a-f-]{36}$')
                OR (actor_type = 'user' AND actor_id !~ '^[0-9a-f-]{36}$')
                OR data::text ~* '(token|name|email)"\s*:'
                OR data::text ~ '@'
                OR data::text ~ 'wsi_')
    """,
)

register(
    id="WS-INV-08",
    domain="workspaces",
    statement="A workspace that is not ACTIVE has no PENDING invitation: deletion blocks new invitations and "
              "acceptance.",
    scope="workspace.invitation where status = 'PENDING', with its workspace",
    counterexample="A workspace being deleted still holds a live invitation, and someone joins it mid-deletion.",
    db=(),
    db_reason="a rule across two tables kept by one command under the workspace row lock",
    app="request_workspace_deletion revokes every PENDING invitation in the transaction that moves the "
        "workspace to DELETING; invite, resend and accept check the status under the lock "
        "(WORKSPACE_NOT_ACTIVE).",
    error_code="WORKSPACE_NOT_ACTIVE",
    concurrency=_LOCK,
    detector="""
        SELECT i.id AS invitation_id, w.status FROM workspace.invitation i
          JOIN workspace.workspace w ON w.id = i.workspace_id
         WHERE i.status = 'PENDING' AND w.status <> 'ACTIVE'
    """,
)

register(
    id="WS-INV-09",
    domain="workspaces",
    statement="A DELETED workspace has no active membership; DELETED is final for workspaces, and LEFT, "
              "REMOVED and CLOSED are final for memberships; neither workspaces nor memberships are ever deleted.",
    scope="workspace.workspace where status = 'DELETED'; workspace.membership, every row",
    counterexample="A deleted workspace still lists active members, or a removed membership is reactivated "
                   "by an UPDATE instead of a new invitation, or deleted so that nobody can tell it existed.",
    db=(WORKSPACE_TERMINAL_TRIGGER, MEMBERSHIP_TERMINAL_TRIGGER, WORKSPACE_NEVER_DELETED_TRIGGER,
        MEMBERSHIP_NEVER_DELETED_TRIGGER, "ck_workspace_deleted_has_time", "ck_membership_ended_has_time"),
    app="finish_workspace_deletions closes every ACTIVE membership in the transaction that moves the "
        "workspace to DELETED.",
    error_code="WORKSPACE_NOT_FOUND",
    concurrency="The sweep locks each workspace (SKIP LOCKED) before closing its memberships; the triggers "
                "refuse leaving a terminal state, DELETE and TRUNCATE, whoever connects.",
    detector=_with_triggers_firing("""
        SELECT m.id AS membership_id, w.id AS workspace_id, 'active membership in a deleted workspace' AS problem
          FROM workspace.membership m JOIN workspace.workspace w ON w.id = m.workspace_id
         WHERE w.status = 'DELETED' AND m.status = 'ACTIVE'
    """, ("workspace", WORKSPACE_TERMINAL_TRIGGER), ("membership", MEMBERSHIP_TERMINAL_TRIGGER),
        ("workspace", WORKSPACE_NEVER_DELETED_TRIGGER), ("membership", MEMBERSHIP_NEVER_DELETED_TRIGGER),
        leading_nulls=2),
)

register(
    id="WS-INV-10",
    domain="workspaces",
    statement="A deleted account holds no active membership; deleting the last active owner of a workspace "
              "that is not DELETED is refused.",
    scope="workspace.membership where status = 'ACTIVE', against iam.user_account",
    counterexample="An administrator deletes the only owner of a workspace: nobody can manage it again, and "
                   "the deleted account still shows as a member.",
    db=(),
    db_reason="a rule across two schemas kept by one transaction: identity's delete_user publishes "
              "AccountDeleted, which workspaces handles in the same transaction before the account is marked deleted",
    app="end_memberships_of_deleted_account (the AccountDeleted handler, tenet.workspaces.events) ends every "
        "active membership as REMOVED, refusing with LAST_OWNER where the account is the last active owner. "
        "Joining (accept), creating a workspace and receiving ownership (transfer, promotion to owner) refuse "
        "an account that is not active with ACCOUNT_NOT_ACTIVE.",
    error_code="LAST_OWNER",
    concurrency="Lock order account, then workspaces. delete_user locks the account row FOR UPDATE before "
                "publishing; accept, create_workspace and ownership changes share-lock the accounts they rely on "
                "(iam.service.require_active_accounts) before locking the workspace. So a deletion and a join "
                "of the same account run one after the other: the deletion sees the new membership and ends "
                "it, or the join sees the deleted account and is refused. Each workspace is then locked (id "
                "order) before its owner count is read. Proven by tests/concurrency/test_account_races.py "
                "(which fails with the share lock made a no-op).",
    detector="""
        SELECT m.id AS membership_id, m.workspace_id FROM workspace.membership m
          JOIN iam.user_account u ON u.id = m.user_id
         WHERE m.status = 'ACTIVE' AND u.status = 'deleted'
    """,
)
