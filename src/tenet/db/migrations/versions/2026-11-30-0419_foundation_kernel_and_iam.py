"""foundation: kernel and iam schemas, roles and permission points, procrastinate, RLS baseline

Revision ID: 708dd2c70366
Revises:
Create Date: 2026-11-30 04:19:26.974820+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenet.db.migration_helpers import allow_again, create_schema, deny_all, ensure_db_roles

revision: str = "708dd2c70366"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Seed data as literals: this migration must not change when tenet.iam.permissions does.
PERMISSIONS = [
    "iam:user:read", "iam:user:manage", "iam:role:assign", "iam:api-client:manage",
    "meeting:read", "meeting:create", "meeting:update", "meeting:delete", "meeting:check-in",
    "meeting:attendance:manage", "meeting:series:manage", "meeting:template:manage", "meeting:report:read",
    "meeting:audit:read", "meeting:agenda:update", "meeting:upload-task:assign",
    "meeting:attachment:upload:any", "meeting:attachment:upload:assigned", "meeting:attachment:download",
    "meeting:attachment:restore", "meeting:outlook:manage",
    "reservation:order:read", "reservation:order:manage", "reservation:task:edit", "reservation:task:confirm",
    "reservation:task:execute", "reservation:task:move", "reservation:audit:read",
]
_ATTENDEE = ["meeting:attachment:download", "meeting:attachment:upload:assigned", "meeting:check-in", "meeting:read"]
ROLES = {
    "Administrator": ("Everything, including users, roles and API clients", PERMISSIONS),
    "MeetingManager": ("Creates and runs meetings, series, agendas and reports",
                       [p for p in PERMISSIONS if p.startswith("meeting:")]),
    "Leader": ("Attends meetings, uploads assigned materials, reads team reports", [*_ATTENDEE, "meeting:report:read"]),
    "Employee": ("Attends meetings and uploads assigned materials (the default role)", _ATTENDEE),
    "ReservationAgent": ("Works the hotel reservation task queue",
                         [p for p in PERMISSIONS if p.startswith("reservation:")]),
}

KERNEL_TABLES = ["kernel.audit_log", "kernel.email_outbox", "kernel.idempotency_key", "kernel.rate_limit_counter"]
IAM_TABLES = ["iam.permission", "iam.role", "iam.user_account", "iam.api_client", "iam.refresh_token",
              "iam.role_permission", "iam.user_role"]
PROCRASTINATE_TABLES = ["public.procrastinate_workers", "public.procrastinate_jobs",
                        "public.procrastinate_periodic_defers", "public.procrastinate_events"]


def upgrade() -> None:
    ensure_db_roles()
    create_schema("kernel")
    create_schema("iam")

    # --- iam -------------------------------------------------------------------------------------
    op.create_table(
        "permission",
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_permission")),
        schema="iam",
    )
    op.create_table(
        "role",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_role")),
        schema="iam",
    )
    op.create_table(
        "user_account",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("email_normalized", sa.Text(), nullable=False),
        sa.Column("email_normalization", sa.Text(), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'active'"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("(status = 'deleted') = (deleted_at IS NOT NULL)", name=op.f("ck_user_account_deleted_has_time")),
        sa.CheckConstraint("email_normalized <> '' AND email_normalized = btrim(email_normalized)", name=op.f("ck_user_account_email_normalized_trimmed")),
        sa.CheckConstraint("password_hash LIKE '$argon2id$%'", name=op.f("ck_user_account_password_hash_argon2id")),
        sa.CheckConstraint("status IN ('active', 'disabled', 'deleted')", name=op.f("ck_user_account_status")),
        sa.CheckConstraint("length(display_name) BETWEEN 1 AND 200", name=op.f("ck_user_account_display_name_length")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_account")),
        schema="iam",
    )
    op.create_index("uq_user_account_email_live", "user_account", ["email_normalized"], unique=True, schema="iam",
                    postgresql_where=sa.text("status <> 'deleted'"))
    op.create_table(
        "api_client",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("client_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("secret_digest", sa.Text(), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("hotel_ids", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.UUID(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("secret_digest ~ '^sha256:[0-9a-f]{64}$'", name=op.f("ck_api_client_secret_is_digest")),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 200", name=op.f("ck_api_client_name_length")),
        sa.ForeignKeyConstraint(["created_by"], ["iam.user_account.id"], name=op.f("fk_api_client_created_by_user_account")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_client")),
        sa.UniqueConstraint("client_id", name=op.f("uq_api_client_client_id")),
        schema="iam",
    )
    op.create_table(
        "refresh_token",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("family_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("token_digest", sa.Text(), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("token_digest ~ '^sha256:[0-9a-f]{64}$'", name=op.f("ck_refresh_token_token_is_digest")),
        sa.ForeignKeyConstraint(["user_id"], ["iam.user_account.id"], name=op.f("fk_refresh_token_user_id_user_account"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_refresh_token")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_refresh_token_token_digest")),
        schema="iam",
    )
    op.create_index("ix_refresh_token_user_id", "refresh_token", ["user_id"], unique=False, schema="iam")
    op.create_index("uq_refresh_token_family_live", "refresh_token", ["family_id"], unique=True, schema="iam",
                    postgresql_where=sa.text("used_at IS NULL AND revoked_at IS NULL"))
    op.create_table(
        "role_permission",
        sa.Column("role_name", sa.Text(), nullable=False),
        sa.Column("permission_name", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["permission_name"], ["iam.permission.name"], name=op.f("fk_role_permission_permission_name_permission"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["role_name"], ["iam.role.name"], name=op.f("fk_role_permission_role_name_role"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("role_name", "permission_name", name=op.f("pk_role_permission")),
        schema="iam",
    )
    op.create_table(
        "user_role",
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("role_name", sa.Text(), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["role_name"], ["iam.role.name"], name=op.f("fk_user_role_role_name_role")),
        sa.ForeignKeyConstraint(["user_id"], ["iam.user_account.id"], name=op.f("fk_user_role_user_id_user_account"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "role_name", name=op.f("pk_user_role")),
        schema="iam",
    )
    op.create_index("ix_user_role_role_name", "user_role", ["role_name"], unique=False, schema="iam")

    permission = sa.table("permission", sa.column("name"), schema="iam")
    role = sa.table("role", sa.column("name"), sa.column("description"), schema="iam")
    role_permission = sa.table("role_permission", sa.column("role_name"), sa.column("permission_name"), schema="iam")
    op.bulk_insert(permission, [{"name": p} for p in PERMISSIONS])
    op.bulk_insert(role, [{"name": name, "description": description} for name, (description, _) in ROLES.items()])
    op.bulk_insert(role_permission, [{"role_name": name, "permission_name": p}
                                     for name, (_, points) in ROLES.items() for p in points])

    # --- kernel ----------------------------------------------------------------------------------
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("actor_type", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Text(), nullable=True),
        sa.Column("subject_type", sa.Text(), nullable=False),
        sa.Column("subject_id", sa.Text(), nullable=False),
        sa.Column("scope_type", sa.Text(), nullable=True),
        sa.Column("scope_id", sa.Text(), nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.CheckConstraint("(actor_type IN ('system', 'anonymous')) OR actor_id IS NOT NULL", name=op.f("ck_audit_log_actor_named")),
        sa.CheckConstraint("actor_type IN ('user', 'client', 'system', 'anonymous')", name=op.f("ck_audit_log_actor_type")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
        schema="kernel",
    )
    op.create_index("ix_audit_log_action", "audit_log", ["action", "id"], unique=False, schema="kernel")
    op.create_index("ix_audit_log_scope", "audit_log", ["scope_type", "scope_id", "id"], unique=False, schema="kernel")
    op.create_index("ix_audit_log_subject", "audit_log", ["subject_type", "subject_id", "id"], unique=False, schema="kernel")
    # KERNEL-INV-01: the log is append-only, whoever connects.
    op.execute("""
        CREATE FUNCTION kernel.refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'kernel.audit_log is append-only (% refused)', TG_OP
            USING ERRCODE = 'restrict_violation';
        END $$""")
    op.execute("""
        CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON kernel.audit_log
        FOR EACH ROW EXECUTE FUNCTION kernel.refuse_audit_change()""")
    op.execute("""
        CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON kernel.audit_log
        FOR EACH STATEMENT EXECUTE FUNCTION kernel.refuse_audit_change()""")

    op.create_table(
        "email_outbox",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("to_address", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body_text", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.CheckConstraint("(status = 'sent') = (sent_at IS NOT NULL)", name=op.f("ck_email_outbox_sent_has_time")),
        sa.CheckConstraint("status IN ('pending', 'sent', 'failed')", name=op.f("ck_email_outbox_status")),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_email_outbox_attempts_non_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_outbox")),
        schema="kernel",
    )
    op.create_index("ix_email_outbox_due", "email_outbox", ["next_attempt_at"], unique=False, schema="kernel",
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_table(
        "idempotency_key",
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("lock_token", sa.UUID(), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("response_status", sa.SmallInteger(), nullable=True),
        sa.Column("response_headers", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.CheckConstraint("(state = 'completed') = (response_status IS NOT NULL)", name=op.f("ck_idempotency_key_completed_has_response")),
        sa.CheckConstraint("state IN ('in_flight', 'completed')", name=op.f("ck_idempotency_key_state")),
        sa.CheckConstraint("length(key) BETWEEN 1 AND 255", name=op.f("ck_idempotency_key_key_length")),
        sa.PrimaryKeyConstraint("principal", "key", name=op.f("pk_idempotency_key")),
        schema="kernel",
    )
    op.create_index("ix_idempotency_key_expires_at", "idempotency_key", ["expires_at"], unique=False, schema="kernel")
    op.create_table(
        "rate_limit_counter",
        sa.Column("bucket", sa.Text(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("hits > 0", name=op.f("ck_rate_limit_counter_hits_positive")),
        sa.PrimaryKeyConstraint("bucket", "window_start", name=op.f("pk_rate_limit_counter")),
        schema="kernel",
    )
    op.create_index("ix_rate_limit_counter_expires_at", "rate_limit_counter", ["expires_at"], unique=False, schema="kernel")

    # --- procrastinate (background jobs), its own schema verbatim in `public` -----------------------
    from procrastinate.schema import SchemaManager

    # Executed as driver SQL: "%" must be doubled because the driver formats parameters.
    op.get_bind().exec_driver_sql(SchemaManager.get_schema().replace("%", "%%"))

    # --- RLS baseline: every table, deny-all for anon/authenticated (KERNEL-INV-03) ------------------
    for table in KERNEL_TABLES + IAM_TABLES + PROCRASTINATE_TABLES:
        deny_all(table)
    op.execute("ALTER TABLE public.alembic_version ENABLE ROW LEVEL SECURITY")


def downgrade() -> None:
    op.execute("ALTER TABLE public.alembic_version DISABLE ROW LEVEL SECURITY")
    for table in PROCRASTINATE_TABLES:
        allow_again(table)
    op.execute("""
        DO $$ DECLARE item record;
        BEGIN
          FOR item IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'procrastinate%' LOOP
            EXECUTE format('DROP TABLE IF EXISTS public.%I CASCADE', item.relname);
          END LOOP;
          FOR item IN SELECT p.oid::regprocedure AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                       WHERE n.nspname = 'public' AND p.proname LIKE 'procrastinate%' LOOP
            EXECUTE format('DROP ROUTINE IF EXISTS %s CASCADE', item.signature);
          END LOOP;
          FOR item IN SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                       WHERE n.nspname = 'public' AND t.typname LIKE 'procrastinate%' AND t.typtype IN ('e', 'c') LOOP
            EXECUTE format('DROP TYPE IF EXISTS public.%I CASCADE', item.typname);
          END LOOP;
        END $$""")
    op.execute("DROP SCHEMA kernel CASCADE")
    op.execute("DROP SCHEMA iam CASCADE")
    # The roles anon and authenticated are cluster-wide and may serve other databases: kept.
