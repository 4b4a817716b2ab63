"""Identity's invariants (INVARIANTS.md)."""

from tenet.kernel.invariants import register

register(
    id="IAM-INV-01",
    domain="iam",
    statement="At most one account that is not deleted per normalised email (email-v1).",
    scope="iam.user_account where status <> 'deleted'",
    counterexample="Ada@Example.com and ada@example.com registered as two live accounts.",
    db=("uq_user_account_email_live",),
    app="Registration looks the email up first for a friendly 409; the unique index decides.",
    error_code="EMAIL_TAKEN",
    concurrency="Partial unique index: of two racing registrations exactly one inserts; the other's "
                "unique violation maps to EMAIL_TAKEN.",
    detector="""
        SELECT email_normalized, count(*) AS accounts FROM iam.user_account
         WHERE status <> 'deleted' GROUP BY email_normalized HAVING count(*) > 1
    """,
)

register(
    id="IAM-INV-02",
    domain="iam",
    statement="A refresh-token family has at most one live token; a spent token never yields a new one.",
    scope="iam.refresh_token where used_at IS NULL AND revoked_at IS NULL",
    counterexample="Two requests spend the same refresh token and both receive a successor.",
    db=("uq_refresh_token_family_live",),
    app="Rotation is a conditional UPDATE on used_at IS NULL; reuse of a spent token revokes the family.",
    error_code="REFRESH_TOKEN_REUSED",
    concurrency="Conditional UPDATE (row lock): one spender wins; the loser sees a spent token.",
    detector="""
        SELECT family_id, count(*) AS live FROM iam.refresh_token
         WHERE used_at IS NULL AND revoked_at IS NULL GROUP BY family_id HAVING count(*) > 1
    """,
)

register(
    id="IAM-INV-03",
    domain="iam",
    statement="Passwords are stored only as argon2id hashes.",
    scope="iam.user_account.password_hash",
    counterexample="A plaintext or MD5 password in password_hash.",
    db=("ck_user_account_password_hash_argon2id",),
    app="Passwords are hashed with argon2-cffi before any write.",
    error_code=None,
    concurrency="Not applicable: a row-level CHECK.",
    detector="SELECT id FROM iam.user_account WHERE password_hash NOT LIKE '$argon2id$%'",
)

register(
    id="IAM-INV-04",
    domain="iam",
    statement="API client secrets and refresh tokens are stored only as SHA-256 digests.",
    scope="iam.api_client.secret_digest, iam.refresh_token.token_digest",
    counterexample="A client secret stored as issued, readable by anyone with database access.",
    db=("ck_api_client_secret_is_digest", "ck_refresh_token_token_is_digest"),
    app="Secrets are generated, shown once, and digested before the insert.",
    error_code=None,
    concurrency="Not applicable: a row-level CHECK.",
    detector="""
        SELECT id FROM iam.api_client WHERE secret_digest !~ '^sha256:[0-9a-f]{64}$'
        UNION ALL
        SELECT id FROM iam.refresh_token WHERE token_digest !~ '^sha256:[0-9a-f]{64}$'
    """,
)

register(
    id="IAM-INV-05",
    domain="iam",
    statement="Once an Administrator exists, an active one remains: the last active Administrator cannot "
              "lose the role or be deleted.",
    scope="iam.user_role rows of the Administrator role",
    counterexample="Two administrators demote each other at the same moment and nobody can manage users.",
    db=(),
    db_reason="a count across rows; serialised by locking the Administrator role row (iam.role) FOR UPDATE",
    app="set_user_roles and delete_user lock the role row, then count the other active Administrators.",
    error_code="LAST_ADMINISTRATOR",
    concurrency="SELECT .. FOR UPDATE on iam.role('Administrator') serialises every change that could "
                "remove an Administrator.",
    detector="""
        SELECT 'administrator grants exist but none is active' AS problem
         WHERE EXISTS (SELECT 1 FROM iam.user_role WHERE role_name = 'Administrator')
           AND NOT EXISTS (SELECT 1 FROM iam.user_role ur JOIN iam.user_account u ON u.id = ur.user_id
                            WHERE ur.role_name = 'Administrator' AND u.status = 'active')
    """,
)

register(
    id="IAM-INV-06",
    domain="iam",
    statement="A deleted account has no live refresh token, and its access tokens are refused.",
    scope="iam.refresh_token of users with status 'deleted'",
    counterexample="A deleted user keeps refreshing tokens and acting for days.",
    db=(),
    db_reason="a rule across two tables kept by one command; access tokens are checked against the "
              "account on every request",
    app="delete_user revokes the user's refresh tokens in the same transaction; every request loads the "
        "account and refuses a token whose account is not active.",
    error_code="INVALID_TOKEN",
    concurrency="One transaction; rotation re-checks the account after spending the token.",
    detector="""
        SELECT t.id FROM iam.refresh_token t JOIN iam.user_account u ON u.id = t.user_id
         WHERE u.status = 'deleted' AND t.used_at IS NULL AND t.revoked_at IS NULL
    """,
)
