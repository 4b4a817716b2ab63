# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Reads of the Outlook sync: one statement per answer, each taking a `Runner` first (the read path for a GET, the
unit of work's statements for a command answering what it wrote as its GET shows it). Only holders of
`meeting:outlook:manage` reach these routes, so no per-row visibility applies: rows are the sync's, not people's."""

from __future__ import annotations

import uuid
from typing import Any

from tenet.kernel.reads import Row, Runner
from tenet.meetings.outlook import errors
from tenet.meetings.outlook.models import POLICY_DEFAULTS

_S = "meeting_attendance"
POLICY_FIELDS = tuple(POLICY_DEFAULTS)

POLICY_SQL = (f"SELECT {', '.join(POLICY_FIELDS)}, updated_at, updated_by_id, version "
              f"FROM {_S}.outlook_policy WHERE id = 1")

_MAILBOX_COLUMNS = """m.id, m.address, m.kind, m.graph_user_id, m.state, m.last_error_code, m.last_error_request_id,
    m.last_error_hint, m.last_error_at, m.last_notification_at, m.created_by_id, m.created_at, m.updated_at,
    m.version"""
MAILBOX_SQL = f"SELECT {_MAILBOX_COLUMNS} FROM {_S}.outlook_mailboxes m WHERE m.id = %(id)s"
MAILBOXES_SQL = f"""SELECT {_MAILBOX_COLUMNS} FROM {_S}.outlook_mailboxes m
    WHERE (%(state)s::text IS NULL OR m.state = %(state)s) ORDER BY m.address, m.id"""

SYNC_STATUS_SQL = f"""
    SELECT m.id AS mailbox_id, m.address, m.kind, m.state, m.last_notification_at,
           m.last_error_code, m.last_error_request_id, m.last_error_hint, m.last_error_at,
           s.graph_subscription_id AS subscription_id, s.expires_at AS subscription_expires_at,
           c.last_round_at AS last_delta_round_at, c.round_started_at, c.full_pass_requested_at,
           c.window_start, c.window_end, (c.delta_link IS NOT NULL) AS has_delta_cursor,
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                       'id', r.id, 'kind', r.kind, 'status', r.status, 'started_at', r.started_at,
                       'finished_at', r.finished_at, 'counts', r.counts, 'graph_requests', r.graph_requests,
                       'error_code', r.error_code, 'error_request_id', r.error_request_id) ORDER BY r.started_at DESC)
                       FROM (SELECT * FROM {_S}.outlook_sync_runs r WHERE r.mailbox_id = m.id AND r.kind = 'RECONCILE'
                              ORDER BY r.started_at DESC LIMIT 5) r), '[]'::jsonb) AS reconciliations
      FROM {_S}.outlook_mailboxes m
      LEFT JOIN {_S}.outlook_subscriptions s ON s.mailbox_id = m.id AND s.status = 'ACTIVE'
      LEFT JOIN {_S}.outlook_delta_cursors c ON c.mailbox_id = m.id
     WHERE m.state <> 'DISABLED'
     ORDER BY m.address, m.id"""


async def policy(runner: Runner) -> Row:
    row = await runner.one(POLICY_SQL)
    if row is None:  # the migration seeds it; MA-INV-39's detector reports its absence
        raise RuntimeError("meeting_attendance.outlook_policy has no row: run the migrations")
    return row


async def mailbox(runner: Runner, *, mailbox_id: uuid.UUID) -> Row:
    row = await runner.one(MAILBOX_SQL, {"id": mailbox_id})
    if row is None:
        raise errors.MailboxNotFound(mailbox_id=str(mailbox_id))
    return row


async def mailboxes(runner: Runner, *, state: str | None = None) -> list[Row]:
    return await runner.all(MAILBOXES_SQL, {"state": state})


async def sync_status(runner: Runner) -> list[dict[str, Any]]:
    return await runner.all(SYNC_STATUS_SQL)
