"""social: schema `social` (spec 000): profiles and agents (back-filled for existing accounts), friendships,
groups and members, schedule items and subscriptions, inbox, todos, automation jobs and runs; the SQL functions
the rules use (settings validation, RFC 7396 merge, permission bits), the terminal-state, group-creator and
inbox-acceptance triggers, and the RLS baseline

Revision ID: 5e0c1a1b2c3d
Revises: 96c961fcbb1c
Create Date: 2026-12-01 11:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tenet.db.migration_helpers import create_schema, deny_all

revision: str = "5e0c1a1b2c3d"
down_revision: str | Sequence[str] | None = "96c961fcbb1c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ["profiles", "user_agents", "friendships", "groups", "group_members", "schedule_items",
          "schedule_subscriptions", "inbox_messages", "todos", "automation_jobs", "automation_runs"]

# SOC-INV-03: RFC 7396 JSON merge patch computed inside the UPDATE, so concurrent merges of different keys
# all survive (no read-modify-write in the application).
MERGE_PATCH = """
CREATE FUNCTION social.jsonb_merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE result jsonb; k text; v jsonb;
BEGIN
  IF patch IS NULL OR jsonb_typeof(patch) <> 'object' THEN RETURN patch; END IF;
  result := CASE WHEN jsonb_typeof(target) = 'object' THEN target ELSE '{}'::jsonb END;
  FOR k, v IN SELECT * FROM jsonb_each(patch) LOOP
    IF jsonb_typeof(v) = 'null' THEN result := result - k;
    ELSE result := jsonb_set(result, ARRAY[k], social.jsonb_merge_patch(result -> k, v));
    END IF;
  END LOOP;
  RETURN result;
END $$"""

# SOC-INV-02: the settings document of schema version 1, mirrored by tenet.social.settings_schema (a test
# feeds both the same documents). plpgsql, so the CHECK that calls it is never inlined.
SETTINGS_VALID = r"""
CREATE FUNCTION social.settings_valid(s jsonb, v int) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE section text; allowed text[]; k text; val jsonb;
BEGIN
  IF v <> 1 OR s IS NULL OR jsonb_typeof(s) <> 'object' THEN RETURN false; END IF;
  FOR section, val IN SELECT * FROM jsonb_each(s) LOOP
    allowed := CASE section
      WHEN 'preferences' THEN ARRAY['theme', 'language', 'timezone']
      WHEN 'privacy' THEN ARRAY['profile_visible_to', 'activity_visible_to', 'allow_friend_requests']
      WHEN 'notification' THEN ARRAY['enabled', 'push_enabled', 'email_enabled', 'quiet_hours_start',
                                     'quiet_hours_end']
    END;
    IF allowed IS NULL OR jsonb_typeof(val) <> 'object' THEN RETURN false; END IF;
    FOR k IN SELECT jsonb_object_keys(val) LOOP
      IF NOT k = ANY (allowed) THEN RETURN false; END IF;
    END LOOP;
  END LOOP;
  FOR k, val IN SELECT * FROM jsonb_each(coalesce(s -> 'preferences', '{}')) LOOP
    IF jsonb_typeof(val) <> 'string' THEN RETURN false; END IF;
    IF k = 'theme' AND val #>> '{}' NOT IN ('light', 'dark', 'system') THEN RETURN false; END IF;
    IF k = 'language' AND val #>> '{}' !~ '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$' THEN RETURN false; END IF;
    IF k = 'timezone' AND val #>> '{}' !~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$' THEN RETURN false; END IF;
  END LOOP;
  FOR k, val IN SELECT * FROM jsonb_each(coalesce(s -> 'privacy', '{}')) LOOP
    IF k = 'allow_friend_requests' THEN
      IF jsonb_typeof(val) <> 'boolean' THEN RETURN false; END IF;
    ELSIF jsonb_typeof(val) <> 'string' OR val #>> '{}' NOT IN ('everyone', 'friends', 'nobody') THEN
      RETURN false;
    END IF;
  END LOOP;
  FOR k, val IN SELECT * FROM jsonb_each(coalesce(s -> 'notification', '{}')) LOOP
    IF k LIKE 'quiet_hours_%' THEN
      IF jsonb_typeof(val) <> 'string' OR val #>> '{}' !~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' THEN RETURN false; END IF;
    ELSIF jsonb_typeof(val) <> 'boolean' THEN
      RETURN false;
    END IF;
  END LOOP;
  -- Quiet hours are a span: both ends or neither.
  RETURN (s #> '{notification,quiet_hours_start}' IS NULL) = (s #> '{notification,quiet_hours_end}' IS NULL);
END $$"""

# SOC-INV-13: one encoding of permissions for reads, writes and detectors (view 1, invite 2, edit 4) and the
# spec's role table (§C.2: creator view+invite+edit, admin view+invite, member view).
PERMISSION_FUNCTIONS = [
    """CREATE FUNCTION social.permission_bits(p jsonb) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
         SELECT (CASE WHEN p ? 'view' THEN 1 ELSE 0 END) | (CASE WHEN p ? 'invite' THEN 2 ELSE 0 END)
              | (CASE WHEN p ? 'edit' THEN 4 ELSE 0 END) $$""",
    """CREATE FUNCTION social.role_bits(r text) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
         SELECT CASE r WHEN 'creator' THEN 7 WHEN 'admin' THEN 3 WHEN 'member' THEN 1 ELSE 0 END $$""",
]

# SOC-INV-16: todos.source_ids is an array of at most `m` distinct UUID strings.
IS_UUID_ARRAY = r"""
CREATE FUNCTION social.is_uuid_array(a jsonb, m int) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF a IS NULL OR jsonb_typeof(a) <> 'array' OR jsonb_array_length(a) > m THEN RETURN false; END IF;
  RETURN NOT EXISTS (SELECT 1 FROM jsonb_array_elements(a) e
                      WHERE jsonb_typeof(e) <> 'string'
                         OR e #>> '{}' !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
     AND (SELECT count(DISTINCT e) FROM jsonb_array_elements(a) e) = jsonb_array_length(a);
END $$"""


def upgrade() -> None:
    create_schema("social")
    op.execute(MERGE_PATCH)
    op.execute(SETTINGS_VALID)
    for statement in PERMISSION_FUNCTIONS:
        op.execute(statement)
    op.execute(IS_UUID_ARRAY)

    # --- tables (autogenerated from tenet.social.models, then read by hand) -----------------------------
    op.create_table('automation_jobs',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('owner_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('job_type', sa.Text(), nullable=False),
    sa.Column('target_type', sa.Text(), server_default=sa.text("'user'"), nullable=False),
    sa.Column('target_id', sa.UUID(), nullable=False),
    sa.Column('params', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('schedule_type', sa.Text(), nullable=False),
    sa.Column('schedule_time', sa.Time(), nullable=False),
    sa.Column('schedule_weekday', sa.SmallInteger(), nullable=True),
    sa.Column('status', sa.Text(), server_default=sa.text("'active'"), nullable=False),
    sa.Column('next_run_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(schedule_type = 'weekly') = (schedule_weekday IS NOT NULL) AND (schedule_weekday IS NULL OR schedule_weekday BETWEEN 1 AND 7)", name=op.f('ck_automation_jobs_weekday_for_weekly')),
    sa.CheckConstraint("(status = 'active') = (next_run_at IS NOT NULL)", name=op.f('ck_automation_jobs_next_run_when_active')),
    sa.CheckConstraint("(target_type = 'user' AND target_id = owner_id) OR (target_type = 'schedule_item' AND job_type = 'schedule_reminder')", name=op.f('ck_automation_jobs_target')),
    sa.CheckConstraint("date_trunc('minute', schedule_time) = schedule_time", name=op.f('ck_automation_jobs_whole_minutes')),
    sa.CheckConstraint("job_type IN ('todo_digest', 'schedule_reminder', 'todo_from_schedule')", name=op.f('ck_automation_jobs_job_type')),
    sa.CheckConstraint("jsonb_typeof(params) = 'object' AND octet_length(params::text) <= 4096", name=op.f('ck_automation_jobs_params_object')),
    sa.CheckConstraint("schedule_type IN ('daily', 'weekly')", name=op.f('ck_automation_jobs_schedule_type')),
    sa.CheckConstraint("status IN ('active', 'disabled')", name=op.f('ck_automation_jobs_status')),
    sa.CheckConstraint('length(name) BETWEEN 1 AND 200', name=op.f('ck_automation_jobs_name_length')),
    sa.CheckConstraint('version > 0', name=op.f('ck_automation_jobs_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_automation_jobs_created_by_user_account')),
    sa.ForeignKeyConstraint(['owner_id'], ['iam.user_account.id'], name=op.f('fk_automation_jobs_owner_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_automation_jobs')),
    schema='social'
    )
    op.create_index('ix_automation_jobs_due', 'automation_jobs', ['next_run_at', 'id'], unique=False, schema='social', postgresql_where=sa.text("status = 'active'"))
    op.create_index('ix_automation_jobs_item_target', 'automation_jobs', ['target_id'], unique=False, schema='social', postgresql_where=sa.text("target_type = 'schedule_item'"))
    op.create_index('ix_automation_jobs_owner_id_status', 'automation_jobs', ['owner_id', 'status'], unique=False, schema='social')
    op.create_table('friendships',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('user_low_id', sa.UUID(), nullable=False),
    sa.Column('user_high_id', sa.UUID(), nullable=False),
    sa.Column('initiator_id', sa.UUID(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('blocked_by', sa.UUID(), nullable=True),
    sa.Column('blocked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('closed_reason', sa.Text(), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(status = 'accepted') = (accepted_at IS NOT NULL)", name=op.f('ck_friendships_accepted_has_time')),
    sa.CheckConstraint("(status = 'blocked') = (blocked_by IS NOT NULL AND blocked_at IS NOT NULL)", name=op.f('ck_friendships_blocked_has_blocker')),
    sa.CheckConstraint("(status IN ('declined', 'canceled')) = (closed_at IS NOT NULL AND closed_reason IS NOT NULL) AND (status <> 'declined' OR closed_reason = 'declined') AND (status <> 'canceled' OR closed_reason IN ('withdrawn', 'unfriended', 'unblocked', 'account_deleted'))", name=op.f('ck_friendships_closed_has_reason')),
    sa.CheckConstraint("status <> 'pending' OR requested_at IS NOT NULL", name=op.f('ck_friendships_pending_has_request')),
    sa.CheckConstraint("status IN ('pending', 'accepted', 'declined', 'canceled', 'blocked')", name=op.f('ck_friendships_status')),
    sa.CheckConstraint('blocked_by IS NULL OR blocked_by IN (user_low_id, user_high_id)', name=op.f('ck_friendships_blocker_in_pair')),
    sa.CheckConstraint('initiator_id IN (user_low_id, user_high_id)', name=op.f('ck_friendships_initiator_in_pair')),
    sa.CheckConstraint('user_low_id < user_high_id', name=op.f('ck_friendships_pair_ordered')),
    sa.CheckConstraint('version > 0', name=op.f('ck_friendships_version_positive')),
    sa.ForeignKeyConstraint(['blocked_by'], ['iam.user_account.id'], name=op.f('fk_friendships_blocked_by_user_account')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_friendships_created_by_user_account')),
    sa.ForeignKeyConstraint(['initiator_id'], ['iam.user_account.id'], name=op.f('fk_friendships_initiator_id_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_friendships_updated_by_user_account')),
    sa.ForeignKeyConstraint(['user_high_id'], ['iam.user_account.id'], name=op.f('fk_friendships_user_high_id_user_account')),
    sa.ForeignKeyConstraint(['user_low_id'], ['iam.user_account.id'], name=op.f('fk_friendships_user_low_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_friendships')),
    sa.UniqueConstraint('user_low_id', 'user_high_id', name=op.f('uq_friendships_user_low_id_user_high_id')),
    schema='social'
    )
    op.create_index('ix_friendships_pending', 'friendships', ['status'], unique=False, schema='social', postgresql_where=sa.text("status = 'pending'"))
    op.create_index('ix_friendships_user_high_id_status_id', 'friendships', ['user_high_id', 'status', 'id'], unique=False, schema='social')
    op.create_index('ix_friendships_user_low_id_status_id', 'friendships', ['user_low_id', 'status', 'id'], unique=False, schema='social')
    op.create_table('groups',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('visibility', sa.Text(), server_default=sa.text("'private'"), nullable=False),
    sa.Column('owner_id', sa.UUID(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'active'"), nullable=False),
    sa.Column('archived_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(status = 'archived') = (archived_at IS NOT NULL)", name=op.f('ck_groups_archived_has_time')),
    sa.CheckConstraint("status IN ('active', 'archived')", name=op.f('ck_groups_status')),
    sa.CheckConstraint("visibility IN ('public', 'private')", name=op.f('ck_groups_visibility')),
    sa.CheckConstraint('description IS NULL OR length(description) <= 2000', name=op.f('ck_groups_description_length')),
    sa.CheckConstraint('length(name) BETWEEN 1 AND 200 AND name = btrim(name)', name=op.f('ck_groups_name_length')),
    sa.CheckConstraint('version > 0', name=op.f('ck_groups_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_groups_created_by_user_account')),
    sa.ForeignKeyConstraint(['owner_id'], ['iam.user_account.id'], name=op.f('fk_groups_owner_id_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_groups_updated_by_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_groups')),
    schema='social'
    )
    op.create_index('ix_groups_owner_id_status', 'groups', ['owner_id', 'status'], unique=False, schema='social')
    op.create_index('ix_groups_visibility', 'groups', ['visibility'], unique=False, schema='social')
    op.create_table('profiles',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('username', sa.Text(), nullable=False),
    sa.Column('avatar_url', sa.Text(), nullable=True),
    sa.Column('bio', sa.Text(), nullable=True),
    sa.Column('settings', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('settings_version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('calendar_feed_id', sa.Text(), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(deleted_at IS NULL) = (calendar_feed_id IS NOT NULL) AND (calendar_feed_id IS NULL OR calendar_feed_id ~ '^[A-Za-z0-9_-]{22}$')", name=op.f('ck_profiles_calendar_feed')),
    sa.CheckConstraint("avatar_url IS NULL OR (avatar_url ~ '^https://' AND length(avatar_url) <= 2048)", name=op.f('ck_profiles_avatar_url')),
    sa.CheckConstraint("length(username) BETWEEN 1 AND 200 AND username = btrim(username) AND username !~ '[[:cntrl:]]'", name=op.f('ck_profiles_username_length')),
    sa.CheckConstraint('bio IS NULL OR length(bio) <= 2000', name=op.f('ck_profiles_bio_length')),
    sa.CheckConstraint('settings_version IN (1)', name=op.f('ck_profiles_settings_version_known')),
    sa.CheckConstraint('social.settings_valid(settings, settings_version)', name=op.f('ck_profiles_settings_valid')),
    sa.CheckConstraint('version > 0', name=op.f('ck_profiles_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_profiles_created_by_user_account')),
    sa.ForeignKeyConstraint(['id'], ['iam.user_account.id'], name=op.f('fk_profiles_id_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_profiles_updated_by_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_profiles')),
    schema='social'
    )
    op.create_index('ix_profiles_notification_enabled', 'profiles', [sa.literal_column("(settings #>> '{notification,enabled}')")], unique=False, schema='social')
    op.create_index('ix_profiles_settings', 'profiles', ['settings'], unique=False, schema='social', postgresql_using='gin', postgresql_ops={'settings': 'jsonb_path_ops'})
    op.create_index('ix_profiles_username', 'profiles', ['username'], unique=False, schema='social')
    op.create_index('uq_profiles_calendar_feed_id', 'profiles', ['calendar_feed_id'], unique=True, schema='social')
    op.create_table('schedule_items',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('owner_id', sa.UUID(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('start_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('end_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('timezone', sa.Text(), nullable=False),
    sa.Column('recurrence_rule', sa.Text(), nullable=True),
    sa.Column('series_end_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('source_type', sa.Text(), server_default=sa.text("'manual'"), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'active'"), nullable=False),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("end_at - start_at <= interval '366 days'", name=op.f('ck_schedule_items_duration_bounded')),
    sa.CheckConstraint("recurrence_rule IS NULL OR (length(recurrence_rule) <= 500 AND recurrence_rule ~ '^FREQ=(DAILY|WEEKLY|MONTHLY|YEARLY)(;[A-Z]+=[A-Za-z0-9,+-]+)*$')", name=op.f('ck_schedule_items_recurrence_shape')),
    sa.CheckConstraint("source_type IN ('manual', 'imported', 'agent_generated')", name=op.f('ck_schedule_items_source_type')),
    sa.CheckConstraint("status IN ('active', 'completed', 'canceled')", name=op.f('ck_schedule_items_status')),
    sa.CheckConstraint("timezone ~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$'", name=op.f('ck_schedule_items_timezone_shape')),
    sa.CheckConstraint('(recurrence_rule IS NULL AND series_end_at = end_at) OR (recurrence_rule IS NOT NULL AND (series_end_at IS NULL OR series_end_at >= end_at))', name=op.f('ck_schedule_items_series_end')),
    sa.CheckConstraint('description IS NULL OR length(description) <= 10000', name=op.f('ck_schedule_items_description_length')),
    sa.CheckConstraint('end_at >= start_at', name=op.f('ck_schedule_items_end_after_start')),
    sa.CheckConstraint('length(title) BETWEEN 1 AND 200', name=op.f('ck_schedule_items_title_length')),
    sa.CheckConstraint('version > 0', name=op.f('ck_schedule_items_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_schedule_items_created_by_user_account')),
    sa.ForeignKeyConstraint(['owner_id'], ['iam.user_account.id'], name=op.f('fk_schedule_items_owner_id_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_schedule_items_updated_by_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_items')),
    schema='social'
    )
    op.create_index('ix_schedule_items_owner_id_start_at', 'schedule_items', ['owner_id', 'start_at', 'id'], unique=False, schema='social')
    op.create_index('ix_schedule_items_status_start_at', 'schedule_items', ['status', 'start_at'], unique=False, schema='social')
    op.create_table('user_agents',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('user_id', sa.UUID(), nullable=False),
    sa.Column('llm_id', sa.UUID(), nullable=False),
    sa.Column('agent_type', sa.Text(), nullable=False),
    sa.Column('config', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'active'"), nullable=False),
    sa.Column('capability_version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("agent_type IN ('INTENT_RECOGNITION', 'TASK_EXECUTION', 'RESULT_REPORTING')", name=op.f('ck_user_agents_agent_type')),
    sa.CheckConstraint("jsonb_typeof(config) = 'object' AND octet_length(config::text) <= 16384", name=op.f('ck_user_agents_config_object')),
    sa.CheckConstraint("status IN ('active', 'paused', 'migrating')", name=op.f('ck_user_agents_status')),
    sa.CheckConstraint('capability_version >= 1', name=op.f('ck_user_agents_capability_version')),
    sa.CheckConstraint('version > 0', name=op.f('ck_user_agents_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_user_agents_created_by_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_user_agents_updated_by_user_account')),
    sa.ForeignKeyConstraint(['user_id'], ['iam.user_account.id'], name=op.f('fk_user_agents_user_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_user_agents')),
    schema='social'
    )
    op.create_index('ix_user_agents_agent_type', 'user_agents', ['agent_type'], unique=False, schema='social')
    op.create_index('ix_user_agents_status', 'user_agents', ['status'], unique=False, schema='social')
    op.create_index('uq_user_agents_user_live', 'user_agents', ['user_id'], unique=True, schema='social', postgresql_where=sa.text('deleted_at IS NULL'))
    op.create_table('automation_runs',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('job_id', sa.UUID(), nullable=False),
    sa.Column('scheduled_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('trigger', sa.Text(), server_default=sa.text("'schedule'"), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'queued'"), nullable=False),
    sa.Column('attempt', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('available_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('claimed_by', sa.Text(), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error_code', sa.Text(), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('result', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('missed_slots', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("(status = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL AND started_at IS NOT NULL AND attempt >= 1)", name=op.f('ck_automation_runs_running_is_claimed')),
    sa.CheckConstraint("(status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)", name=op.f('ck_automation_runs_finished_has_time')),
    sa.CheckConstraint("status <> 'failed' OR error_message IS NOT NULL", name=op.f('ck_automation_runs_failed_has_error')),
    sa.CheckConstraint("status <> 'succeeded' OR result IS NOT NULL", name=op.f('ck_automation_runs_succeeded_has_result')),
    sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed')", name=op.f('ck_automation_runs_status')),
    sa.CheckConstraint("trigger IN ('schedule', 'manual')", name=op.f('ck_automation_runs_trigger')),
    sa.CheckConstraint('attempt >= 0 AND attempt <= max_attempts AND max_attempts BETWEEN 1 AND 10', name=op.f('ck_automation_runs_attempt')),
    sa.CheckConstraint('error_message IS NULL OR length(error_message) <= 2000', name=op.f('ck_automation_runs_error_message_length')),
    sa.CheckConstraint('missed_slots >= 0', name=op.f('ck_automation_runs_missed_slots')),
    sa.ForeignKeyConstraint(['job_id'], ['social.automation_jobs.id'], name=op.f('fk_automation_runs_job_id_automation_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_automation_runs')),
    sa.UniqueConstraint('job_id', 'scheduled_at', name=op.f('uq_automation_runs_job_id_scheduled_at')),
    schema='social'
    )
    op.create_index('ix_automation_runs_claimable', 'automation_runs', ['available_at', 'id'], unique=False, schema='social', postgresql_where=sa.text("status = 'queued'"))
    op.create_index('ix_automation_runs_leases', 'automation_runs', ['lease_expires_at'], unique=False, schema='social', postgresql_where=sa.text("status = 'running'"))
    op.create_index('ix_automation_runs_status_scheduled_at', 'automation_runs', ['status', 'scheduled_at'], unique=False, schema='social')
    op.create_table('group_members',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('group_id', sa.UUID(), nullable=False),
    sa.Column('user_id', sa.UUID(), nullable=False),
    sa.Column('role', sa.Text(), nullable=False),
    sa.Column('join_source', sa.Text(), nullable=False),
    sa.Column('invited_by', sa.UUID(), nullable=True),
    sa.Column('joined_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'active'"), nullable=False),
    sa.Column('removed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('removed_by', sa.UUID(), nullable=True),
    sa.Column('removal_reason', sa.Text(), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(join_source = 'invited') = (invited_by IS NOT NULL)", name=op.f('ck_group_members_invited_has_inviter')),
    sa.CheckConstraint("(status = 'removed') = (removed_at IS NOT NULL AND removal_reason IS NOT NULL) AND (removal_reason IS NULL OR removal_reason IN ('left', 'removed', 'account_deleted'))", name=op.f('ck_group_members_removed_has_time')),
    sa.CheckConstraint("join_source IN ('invited', 'joined')", name=op.f('ck_group_members_join_source')),
    sa.CheckConstraint("role IN ('creator', 'admin', 'member')", name=op.f('ck_group_members_role')),
    sa.CheckConstraint("status IN ('active', 'muted', 'removed')", name=op.f('ck_group_members_status')),
    sa.CheckConstraint('version > 0', name=op.f('ck_group_members_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_group_members_created_by_user_account')),
    sa.ForeignKeyConstraint(['group_id'], ['social.groups.id'], name=op.f('fk_group_members_group_id_groups'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['invited_by'], ['iam.user_account.id'], name=op.f('fk_group_members_invited_by_user_account')),
    sa.ForeignKeyConstraint(['removed_by'], ['iam.user_account.id'], name=op.f('fk_group_members_removed_by_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_group_members_updated_by_user_account')),
    sa.ForeignKeyConstraint(['user_id'], ['iam.user_account.id'], name=op.f('fk_group_members_user_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_group_members')),
    sa.UniqueConstraint('group_id', 'user_id', name=op.f('uq_group_members_group_id_user_id')),
    schema='social'
    )
    op.create_index('ix_group_members_current', 'group_members', ['group_id', 'joined_at', 'id'], unique=False, schema='social', postgresql_where=sa.text("status <> 'removed'"))
    op.create_index('ix_group_members_group_id_role_status', 'group_members', ['group_id', 'role', 'status'], unique=False, schema='social')
    op.create_index('ix_group_members_user_id_status', 'group_members', ['user_id', 'status'], unique=False, schema='social', postgresql_include=['group_id', 'role'])
    op.create_index('uq_group_members_current_creator', 'group_members', ['group_id'], unique=True, schema='social', postgresql_where=sa.text("role = 'creator' AND status <> 'removed'"))
    op.create_table('schedule_subscriptions',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('item_id', sa.UUID(), nullable=False),
    sa.Column('subject_type', sa.Text(), nullable=False),
    sa.Column('subscriber_id', sa.UUID(), nullable=False),
    sa.Column('subscriber_user_id', sa.UUID(), sa.Computed("CASE WHEN subject_type = 'user' THEN subscriber_id END", persisted=True), nullable=True),
    sa.Column('subscriber_group_id', sa.UUID(), sa.Computed("CASE WHEN subject_type = 'group' THEN subscriber_id END", persisted=True), nullable=True),
    sa.Column('permission', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text('\'["view"]\'::jsonb'), nullable=False),
    sa.Column('notify_level', sa.Text(), server_default=sa.text("'all'"), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.Column('updated_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("notify_level IN ('all', 'mentions', 'none')", name=op.f('ck_schedule_subscriptions_notify_level')),
    sa.CheckConstraint("status IN ('pending', 'active', 'paused', 'unsubscribed')", name=op.f('ck_schedule_subscriptions_status')),
    sa.CheckConstraint("subject_type = 'user' OR status <> 'pending'", name=op.f('ck_schedule_subscriptions_group_never_pending')),
    sa.CheckConstraint("subject_type IN ('user', 'group')", name=op.f('ck_schedule_subscriptions_subject_type')),
    sa.CheckConstraint('permission IN (\'["view"]\'::jsonb, \'["view", "invite"]\'::jsonb, \'["view", "edit"]\'::jsonb, \'["view", "invite", "edit"]\'::jsonb)', name=op.f('ck_schedule_subscriptions_permission_canonical')),
    sa.CheckConstraint('version > 0', name=op.f('ck_schedule_subscriptions_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_schedule_subscriptions_created_by_user_account')),
    sa.ForeignKeyConstraint(['item_id'], ['social.schedule_items.id'], name=op.f('fk_schedule_subscriptions_item_id_schedule_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subscriber_group_id'], ['social.groups.id'], name=op.f('fk_schedule_subscriptions_subscriber_group_id_groups')),
    sa.ForeignKeyConstraint(['subscriber_user_id'], ['iam.user_account.id'], name=op.f('fk_schedule_subscriptions_subscriber_user_id_user_account')),
    sa.ForeignKeyConstraint(['updated_by'], ['iam.user_account.id'], name=op.f('fk_schedule_subscriptions_updated_by_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_subscriptions')),
    sa.UniqueConstraint('item_id', 'subscriber_id', name=op.f('uq_schedule_subscriptions_item_id_subscriber_id')),
    schema='social'
    )
    op.create_index('ix_schedule_subscriptions_item_id_status', 'schedule_subscriptions', ['item_id', 'status'], unique=False, schema='social')
    op.create_index('ix_schedule_subscriptions_subscriber_group_id', 'schedule_subscriptions', ['subscriber_group_id'], unique=False, schema='social', postgresql_where=sa.text('subscriber_group_id IS NOT NULL'))
    op.create_index('ix_schedule_subscriptions_subscriber_id_status', 'schedule_subscriptions', ['subscriber_id', 'status'], unique=False, schema='social', postgresql_include=['item_id', 'permission'])
    op.create_index('ix_schedule_subscriptions_subscriber_user_id', 'schedule_subscriptions', ['subscriber_user_id'], unique=False, schema='social', postgresql_where=sa.text('subscriber_user_id IS NOT NULL'))
    op.create_table('todos',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('owner_id', sa.UUID(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('priority', sa.Text(), server_default=sa.text("'medium'"), nullable=False),
    sa.Column('source_ids', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('source_item_id', sa.UUID(), nullable=True),
    sa.Column('source_occurrence_start', sa.DateTime(timezone=True), nullable=True),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('version', sa.Integer(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(status = 'done') = (completed_at IS NOT NULL)", name=op.f('ck_todos_completed_has_time')),
    sa.CheckConstraint("priority IN ('low', 'medium', 'high', 'urgent')", name=op.f('ck_todos_priority')),
    sa.CheckConstraint("status IN ('pending', 'done', 'canceled', 'archived')", name=op.f('ck_todos_status')),
    sa.CheckConstraint('description IS NULL OR length(description) <= 10000', name=op.f('ck_todos_description_length')),
    sa.CheckConstraint('length(title) BETWEEN 1 AND 200', name=op.f('ck_todos_title_length')),
    sa.CheckConstraint('social.is_uuid_array(source_ids, 20)', name=op.f('ck_todos_source_ids')),
    sa.CheckConstraint('source_item_id IS NULL OR source_ids @> jsonb_build_array(source_item_id::text)', name=op.f('ck_todos_source_item_listed')),
    sa.CheckConstraint('version > 0', name=op.f('ck_todos_version_positive')),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_todos_created_by_user_account')),
    sa.ForeignKeyConstraint(['owner_id'], ['iam.user_account.id'], name=op.f('fk_todos_owner_id_user_account')),
    sa.ForeignKeyConstraint(['source_item_id'], ['social.schedule_items.id'], name=op.f('fk_todos_source_item_id_schedule_items'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_todos')),
    schema='social'
    )
    op.create_index('ix_todos_owner_id_created_at', 'todos', ['owner_id', sa.literal_column('created_at DESC'), sa.literal_column('id DESC')], unique=False, schema='social')
    op.create_index('ix_todos_owner_id_status_due_at', 'todos', ['owner_id', 'status', 'due_at', 'id'], unique=False, schema='social')
    op.create_index('ix_todos_pending_due', 'todos', ['owner_id', sa.literal_column("(COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone))"), 'id'], unique=False, schema='social', postgresql_where=sa.text("status = 'pending'"))
    op.create_index('ix_todos_source_ids', 'todos', ['source_ids'], unique=False, schema='social', postgresql_using='gin', postgresql_ops={'source_ids': 'jsonb_path_ops'})
    op.create_index('ix_todos_source_item_id', 'todos', ['source_item_id'], unique=False, schema='social', postgresql_where=sa.text('source_item_id IS NOT NULL'))
    op.create_index('uq_todos_extracted_occurrence', 'todos', ['owner_id', 'source_item_id', 'source_occurrence_start'], unique=True, schema='social', postgresql_nulls_not_distinct=True, postgresql_where=sa.text('source_item_id IS NOT NULL'))
    op.create_table('inbox_messages',
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('recipient_id', sa.UUID(), nullable=False),
    sa.Column('sender_id', sa.UUID(), nullable=True),
    sa.Column('message_type', sa.Text(), nullable=False),
    sa.Column('content', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('related_type', sa.Text(), nullable=False),
    sa.Column('related_id', sa.UUID(), nullable=False),
    sa.Column('actionable', sa.Boolean(), nullable=False),
    sa.Column('status', sa.Text(), server_default=sa.text("'pending'"), nullable=False),
    sa.Column('dedup_key', sa.Text(), nullable=True),
    sa.Column('automation_run_id', sa.UUID(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('read_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('acted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('acted_by', sa.UUID(), nullable=True),
    sa.Column('created_by', sa.UUID(), nullable=True),
    sa.CheckConstraint("(message_type, related_type) IN (('friend_request', 'friendship'), ('group_invitation', 'group'), ('schedule_item_shared', 'schedule_item'), ('schedule_reminder', 'schedule_item'), ('todo_digest', 'automation_job'), ('automation_failed', 'automation_job'))", name=op.f('ck_inbox_messages_related_type_matches')),
    sa.CheckConstraint("(status IN ('accepted', 'rejected', 'dismissed')) = (acted_at IS NOT NULL)", name=op.f('ck_inbox_messages_acted_has_time')),
    sa.CheckConstraint("NOT actionable OR message_type IN ('friend_request', 'group_invitation', 'schedule_item_shared')", name=op.f('ck_inbox_messages_actionable')),
    sa.CheckConstraint("jsonb_typeof(content) = 'object' AND octet_length(content::text) <= 16384", name=op.f('ck_inbox_messages_content_object')),
    sa.CheckConstraint("message_type IN ('friend_request', 'group_invitation', 'schedule_item_shared', 'schedule_reminder', 'todo_digest', 'automation_failed')", name=op.f('ck_inbox_messages_message_type')),
    sa.CheckConstraint("message_type NOT IN ('friend_request', 'group_invitation') OR actionable", name=op.f('ck_inbox_messages_requests_are_actionable')),
    sa.CheckConstraint("message_type NOT IN ('friend_request', 'group_invitation', 'schedule_item_shared') OR sender_id IS NOT NULL", name=op.f('ck_inbox_messages_sender')),
    sa.CheckConstraint("status = 'pending' OR read_at IS NOT NULL", name=op.f('ck_inbox_messages_read_has_time')),
    sa.CheckConstraint("status IN ('pending', 'read', 'accepted', 'rejected', 'dismissed')", name=op.f('ck_inbox_messages_status')),
    sa.CheckConstraint("status NOT IN ('accepted', 'rejected') OR actionable", name=op.f('ck_inbox_messages_answer_needs_action')),
    sa.ForeignKeyConstraint(['acted_by'], ['iam.user_account.id'], name=op.f('fk_inbox_messages_acted_by_user_account')),
    sa.ForeignKeyConstraint(['automation_run_id'], ['social.automation_runs.id'], name=op.f('fk_inbox_messages_automation_run_id_automation_runs'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['created_by'], ['iam.user_account.id'], name=op.f('fk_inbox_messages_created_by_user_account')),
    sa.ForeignKeyConstraint(['recipient_id'], ['iam.user_account.id'], name=op.f('fk_inbox_messages_recipient_id_user_account')),
    sa.ForeignKeyConstraint(['sender_id'], ['iam.user_account.id'], name=op.f('fk_inbox_messages_sender_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_inbox_messages')),
    schema='social'
    )
    op.create_index('ix_inbox_messages_automation_run_id', 'inbox_messages', ['automation_run_id'], unique=False, schema='social', postgresql_where=sa.text('automation_run_id IS NOT NULL'))
    op.create_index('ix_inbox_messages_open_related', 'inbox_messages', ['related_type', 'related_id'], unique=False, schema='social', postgresql_where=sa.text("actionable AND status IN ('pending', 'read')"))
    op.create_index('ix_inbox_messages_pending', 'inbox_messages', ['recipient_id', sa.literal_column('created_at DESC'), sa.literal_column('id DESC')], unique=False, schema='social', postgresql_where=sa.text("status = 'pending'"))
    op.create_index('ix_inbox_messages_recipient_created', 'inbox_messages', ['recipient_id', sa.literal_column('created_at DESC'), sa.literal_column('id DESC')], unique=False, schema='social')
    op.create_index('ix_inbox_messages_recipient_id_status_created_at', 'inbox_messages', ['recipient_id', 'status', sa.literal_column('created_at DESC'), sa.literal_column('id DESC')], unique=False, schema='social')
    op.create_index('uq_inbox_messages_dedup', 'inbox_messages', ['recipient_id', 'dedup_key'], unique=True, schema='social', postgresql_where=sa.text('dedup_key IS NOT NULL'))
    op.create_index('uq_inbox_messages_open_action', 'inbox_messages', ['recipient_id', 'message_type', 'related_id'], unique=True, schema='social', postgresql_where=sa.text("actionable AND status IN ('pending', 'read')"))

    # --- SOC-INV-14 / SOC-INV-20: terminal states are final, whoever connects ------------------------------
    op.execute("""
        CREATE FUNCTION social.refuse_leaving_terminal_state() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF OLD.status = ANY (TG_ARGV) THEN
            RAISE EXCEPTION '%.% % is in the terminal state % and cannot become %',
                TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.id, OLD.status, NEW.status
              USING ERRCODE = 'check_violation', CONSTRAINT = TG_NAME;
          END IF;
          RETURN NEW;
        END $$""")
    for table, name, terminal in [
        ("social.inbox_messages", "inbox_messages_terminal_is_final", "'accepted', 'rejected', 'dismissed'"),
        ("social.automation_runs", "automation_runs_terminal_is_final", "'succeeded', 'failed'"),
    ]:
        op.execute(f"""
            CREATE TRIGGER {name} BEFORE UPDATE OF status ON {table}
            FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
            EXECUTE FUNCTION social.refuse_leaving_terminal_state({terminal})""")

    # --- SOC-INV-07: an active group has exactly one current creator, its owner_id; checked at commit ---------
    op.execute("""
        CREATE FUNCTION social.check_group_creator() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE gid uuid; g record; creators int; creator uuid;
        BEGIN
          -- Separate statements: plpgsql resolves every record field an expression names.
          IF TG_TABLE_NAME = 'groups' THEN gid := NEW.id;
          ELSIF TG_OP = 'DELETE' THEN gid := OLD.group_id;
          ELSE gid := NEW.group_id;
          END IF;
          SELECT status, owner_id INTO g FROM social.groups WHERE id = gid;
          IF NOT FOUND OR g.status <> 'active' THEN RETURN NULL; END IF;
          SELECT count(*), min(user_id::text)::uuid INTO creators, creator FROM social.group_members
           WHERE group_id = gid AND role = 'creator' AND status <> 'removed';
          IF creators <> 1 OR creator <> g.owner_id THEN
            RAISE EXCEPTION 'active group % must have exactly one current creator, its owner (found %)', gid, creators
              USING ERRCODE = 'check_violation', CONSTRAINT = TG_NAME;
          END IF;
          RETURN NULL;
        END $$""")
    op.execute("""
        CREATE CONSTRAINT TRIGGER group_has_one_creator
        AFTER INSERT OR UPDATE OF status, owner_id ON social.groups DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION social.check_group_creator()""")
    op.execute("""
        CREATE CONSTRAINT TRIGGER group_member_keeps_creator
        AFTER INSERT OR UPDATE OF role, status, user_id OR DELETE ON social.group_members
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION social.check_group_creator()""")

    # --- SOC-INV-15: an accepted message's linked action happened in its transaction; checked at commit -------
    op.execute("""
        CREATE FUNCTION social.check_inbox_accept_effect() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE done boolean;
        BEGIN
          done := CASE NEW.message_type
               WHEN 'friend_request' THEN EXISTS (SELECT 1 FROM social.friendships f
                                                   WHERE f.id = NEW.related_id AND f.status = 'accepted')
               WHEN 'group_invitation' THEN EXISTS (SELECT 1 FROM social.group_members m
                                                     WHERE m.group_id = NEW.related_id AND m.user_id = NEW.recipient_id
                                                       AND m.status <> 'removed')
               WHEN 'schedule_item_shared' THEN EXISTS (SELECT 1 FROM social.schedule_subscriptions s
                                                         WHERE s.item_id = NEW.related_id
                                                           AND s.subscriber_id = NEW.recipient_id
                                                           AND s.status IN ('active', 'paused'))
               ELSE false END;
          IF NEW.status = 'accepted' AND NOT done THEN
            RAISE EXCEPTION 'inbox message % is accepted without its linked action', NEW.id
              USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = TG_NAME;
          END IF;
          RETURN NULL;
        END $$""")
    op.execute("""
        CREATE CONSTRAINT TRIGGER inbox_accept_has_effect
        AFTER UPDATE OF status ON social.inbox_messages DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.status = 'accepted') EXECUTE FUNCTION social.check_inbox_accept_effect()""")

    # --- RLS baseline: deny-all for anon/authenticated (KERNEL-INV-03) ------------------------------------
    for table in TABLES:
        deny_all(f"social.{table}")

    # --- SOC-INV-01: accounts that exist before social get their profile and agent now --------------------
    op.execute("""
        INSERT INTO social.profiles (id, username, settings, settings_version, calendar_feed_id, version,
                                     created_at, updated_at, created_by)
        SELECT u.id,
               coalesce(nullif(btrim(left(regexp_replace(u.display_name, '[[:cntrl:]]', '', 'g'), 200)), ''), 'User'),
               '{}'::jsonb, 1,
               rtrim(translate(encode(uuid_send(gen_random_uuid()), 'base64'), '+/', '-_'), '='),
               1, now(), now(), u.id
          FROM iam.user_account u WHERE u.status <> 'deleted'""")
    # The llm_id is TENET_SOCIAL_DEFAULT_LLM_ID's default.
    op.execute("""
        INSERT INTO social.user_agents (id, user_id, llm_id, agent_type, config, status, capability_version,
                                        version, created_at, updated_at, created_by)
        SELECT gen_random_uuid(), u.id, '00000000-0000-4000-8000-000000000001', 'TASK_EXECUTION', '{}'::jsonb, 'active', 1, 1,
               now(), now(), u.id
          FROM iam.user_account u WHERE u.status <> 'deleted'""")


def downgrade() -> None:
    # Tables, indexes, triggers, policies and functions all live in the schema.
    op.execute("DROP SCHEMA social CASCADE")
