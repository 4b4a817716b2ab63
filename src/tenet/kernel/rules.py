"""The kernel's own invariants (catalog entries; see kernel/invariants.py for the registry)."""

from tenet.kernel.invariants import register

APPEND_ONLY_TRIGGER = "audit_log_append_only"

register(
    id="KERNEL-INV-01",
    domain="kernel",
    statement="Audit rows are never updated or deleted.",
    scope="kernel.audit_log, every row",
    counterexample="UPDATE kernel.audit_log SET actor_id = ... rewriting who did something.",
    db=(APPEND_ONLY_TRIGGER, "audit_log_no_truncate"),
    app="The audit writer only inserts.",
    error_code=None,
    concurrency="Not applicable: rows are only inserted.",
    detector="""
        SELECT 'append-only trigger missing or disabled' AS problem
         WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                            JOIN pg_namespace n ON n.oid = c.relnamespace
                           WHERE n.nspname = 'kernel' AND c.relname = 'audit_log'
                             AND t.tgname = 'audit_log_append_only' AND t.tgenabled <> 'D')
    """,
)

register(
    id="KERNEL-INV-02",
    domain="kernel",
    statement="One Idempotency-Key of one principal stands for one request; once completed it holds the "
              "response that every replay answers.",
    scope="kernel.idempotency_key, unexpired rows",
    counterexample="Two rows for (user:42, key-1), or a completed row without a stored status.",
    db=("pk_idempotency_key", "ck_idempotency_key_completed_has_response"),
    app="The middleware answers 422 IDEMPOTENCY_KEY_REUSED when the fingerprint differs.",
    error_code="IDEMPOTENCY_KEY_REUSED",
    concurrency="INSERT .. ON CONFLICT on the primary key: exactly one request claims a key; the rest "
                "replay, or get 409 while it is in flight.",
    detector="""
        SELECT principal, key FROM kernel.idempotency_key
         WHERE state = 'completed' AND response_status IS NULL
    """,
)

register(
    id="KERNEL-INV-03",
    domain="kernel",
    statement="Every table of the database has row-level security enabled, no permissive policy, and no "
              "privilege granted to the roles anon or authenticated (spec 000 P4).",
    scope="Tables in every schema but PostgreSQL's own (pg_*, information_schema): the kernel's, each domain's "
          "and public (procrastinate's too).",
    counterexample="A new table created without ENABLE ROW LEVEL SECURITY, readable by `authenticated`.",
    db=(),
    db_reason="a rule about the catalog itself; each migration enables RLS, this detector checks it",
    app="None: the service connects as the tables' owner.",
    error_code=None,
    concurrency="Not applicable: schema changes run in migrations.",
    detector="""
        SELECT n.nspname AS schema, c.relname AS table_name, 'rls disabled' AS problem
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p') AND NOT c.relrowsecurity
           AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
        UNION ALL
        SELECT schemaname, tablename, 'permissive policy ' || policyname
          FROM pg_policies WHERE permissive = 'PERMISSIVE'
           AND schemaname <> 'information_schema' AND schemaname !~ '^pg_'
        UNION ALL
        SELECT table_schema, table_name, 'granted ' || privilege_type || ' to ' || grantee
          FROM information_schema.role_table_grants
         WHERE grantee IN ('anon', 'authenticated')
    """,
)

register(
    id="KERNEL-INV-04",
    domain="kernel",
    statement="A mail has at most one live claim at a time (only a pending mail is claimed, and every claim "
              "has a lease), and a mail marked sent carries its send time. Delivery is at-least-once: a crash "
              "between the send and its mark re-sends the mail after the lease.",
    scope="kernel.email_outbox",
    counterexample="Two deliverers sending the same row at once; a sent or failed row still claimed; a claim "
                   "token without its lease (others would take the row while it is sent); status = 'sent' with "
                   "sent_at NULL.",
    db=("ck_email_outbox_sent_has_time", "ck_email_outbox_status", "ck_email_outbox_claim_has_lease",
        "ck_email_outbox_claim_only_pending"),
    app="Deliverers claim due rows whose lease ran out (FOR UPDATE SKIP LOCKED + UPDATE .. RETURNING) in a "
        "short transaction, send outside any transaction, start a send only when it ends inside the lease, "
        "and record each outcome with an UPDATE conditioned on their claim token.",
    error_code=None,
    concurrency="SKIP LOCKED gives concurrent claims disjoint rows; the lease condition, re-checked on the "
                "locked row, keeps a committed claim's rows from everyone else until the lease ends. Proven by "
                "tests/concurrency/test_outbox_races.py (two deliverers, a slow SMTP server: each mail arrives "
                "once; it fails without the lease condition).",
    detector="""
        SELECT id, 'sent without its time' AS problem FROM kernel.email_outbox
         WHERE (status = 'sent') <> (sent_at IS NOT NULL)
        UNION ALL
        SELECT id, 'claimed but not pending' FROM kernel.email_outbox
         WHERE claim_token IS NOT NULL AND status <> 'pending'
        UNION ALL
        SELECT id, 'claim without a lease' FROM kernel.email_outbox
         WHERE (claim_token IS NULL) <> (claimed_until IS NULL)
    """,
)
