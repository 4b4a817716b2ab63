# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""Reads of the Outlook sync: one statement per answer, each taking a `Runner` first (the read path for a GET, the
unit of work's statements for a command answering what it wrote as its GET shows it). Only holders of
`meeting:outlook:manage` reach these routes, so no per-row visibility applies: rows are the sync's, not people's."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tenet.kernel.pagination import PageParams, SqlKeyset
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


CANDIDATES_KEYSET = SqlKeyset(("c.start_at", "c.graph_event_id"), (datetime, str))
CANDIDATES_SQL = f"""
    SELECT c.mailbox_id, c.graph_event_id, c.type, c.subject, c.start_at, c.end_at, c.timezone, c.recurrence,
           c.organizer_email, c.last_seen_at, b.id AS binding_id, (b.id IS NOT NULL) AS managed
      FROM {_S}.outlook_candidates c
      LEFT JOIN {_S}.outlook_bindings b ON b.graph_event_id = c.graph_event_id AND b.status IN ('PENDING', 'ACTIVE')
     WHERE c.gone_at IS NULL
       AND (%(mailbox)s::uuid IS NULL OR c.mailbox_id = %(mailbox)s)
       AND (%(type)s::text IS NULL OR c.type = %(type)s)
       AND (%(q)s::text IS NULL OR c.subject ILIKE '%%' || %(q)s || '%%')
       AND {{after}}
     ORDER BY {{order}} LIMIT %(limit)s"""


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def candidates(runner: Runner, *, page: PageParams, mailbox_id: uuid.UUID | None, type: str | None,
                     q: str | None) -> tuple[list[Row], str | None]:
    """The candidate pool the worker keeps (never a Graph call), with whether each is managed and by which binding."""
    after, after_params = CANDIDATES_KEYSET.after(page)
    rows = await runner.all(CANDIDATES_SQL.format(after=after, order=CANDIDATES_KEYSET.order_by), {
        "mailbox": mailbox_id, "type": type, "q": _like_literal(q) if q else None,
        "limit": CANDIDATES_KEYSET.fetch_limit(page), **after_params})
    return CANDIDATES_KEYSET.page(rows, page, key=lambda r: (r["start_at"], r["graph_event_id"]))


_BINDING_COLUMNS = f"""b.id, b.graph_event_id, b.kind, b.mailbox_id, b.bound_by_id, b.sync_from, b.meeting_id,
    b.series_id, b.status, b.last_synced_at, b.released_at, b.created_at, b.updated_at, b.version, c.subject,
    coalesce((SELECT array_agg(e.original_start ORDER BY e.original_start) FROM {_S}.outlook_exclusions e
               WHERE e.binding_id = b.id), ARRAY[]::timestamptz[]) AS exclusions,
    (SELECT count(*) FROM {_S}.outlook_event_links l WHERE l.binding_id = b.id) AS linked_meetings"""
BINDING_SQL = f"""SELECT {_BINDING_COLUMNS} FROM {_S}.outlook_bindings b
    LEFT JOIN {_S}.outlook_candidates c ON c.mailbox_id = b.mailbox_id AND c.graph_event_id = b.graph_event_id
    WHERE b.id = %(id)s"""
BINDINGS_KEYSET = SqlKeyset(("b.created_at", "b.id"), (datetime, uuid.UUID))
BINDINGS_SQL = f"""SELECT {_BINDING_COLUMNS} FROM {_S}.outlook_bindings b
    LEFT JOIN {_S}.outlook_candidates c ON c.mailbox_id = b.mailbox_id AND c.graph_event_id = b.graph_event_id
    WHERE (%(status)s::text IS NULL OR b.status = %(status)s)
      AND (%(mailbox)s::uuid IS NULL OR b.mailbox_id = %(mailbox)s)
      AND {{after}} ORDER BY {{order}} LIMIT %(limit)s"""


async def binding(runner: Runner, *, binding_id: uuid.UUID) -> Row:
    row = await runner.one(BINDING_SQL, {"id": binding_id})
    if row is None:
        raise errors.BindingNotFound()
    return row


async def bindings(runner: Runner, *, page: PageParams, status: str | None, mailbox_id: uuid.UUID | None
                   ) -> tuple[list[Row], str | None]:
    after, after_params = BINDINGS_KEYSET.after(page)
    rows = await runner.all(BINDINGS_SQL.format(after=after, order=BINDINGS_KEYSET.order_by), {
        "status": status, "mailbox": mailbox_id, "limit": BINDINGS_KEYSET.fetch_limit(page), **after_params})
    return BINDINGS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))


def check_cursors(page: PageParams, keyset: SqlKeyset) -> None:
    """A forged cursor is 400 INVALID_CURSOR before anything else a list answers (even 409 OUTLOOK_SYNC_OFF)."""
    keyset.after(page)


# --- launch clean-up (spec layer 8) ---------------------------------------------------------------------------

# Local series no live binding manages, with occurrences still to come (not started, not deleted).
UNBOUND_SERIES_SQL = f"""
    SELECT s.id AS series_id, s.title, s.timezone, s.rrule, s.start_date, s.start_local_time, s.duration_minutes,
           s.organizer_id, s.version, f.future_meetings, f.next_start, f.last_start
      FROM {_S}.meeting_series s
      JOIN LATERAL (SELECT count(*) AS future_meetings, min(m.start_time) AS next_start,
                           max(m.start_time) AS last_start
                      FROM {_S}.meetings m
                     WHERE m.series_id = s.id AND m.status IN ('ACTIVE', 'CANCELLED') AND m.start_time > %(now)s
                   ) f ON f.future_meetings > 0
     WHERE s.status = 'ACTIVE'
       AND NOT EXISTS (SELECT 1 FROM {_S}.outlook_bindings b
                        WHERE b.series_id = s.id AND b.status IN ('PENDING', 'ACTIVE'))
     ORDER BY f.next_start, s.id"""
SERIES_MASTERS_SQL = f"""
    SELECT c.mailbox_id, c.graph_event_id, c.subject, c.start_at, c.timezone, c.recurrence, b.id AS binding_id,
           (b.id IS NOT NULL) AS managed
      FROM {_S}.outlook_candidates c
      LEFT JOIN {_S}.outlook_bindings b ON b.graph_event_id = c.graph_event_id AND b.status IN ('PENDING', 'ACTIVE')
     WHERE c.gone_at IS NULL AND c.type = 'seriesMaster'
     ORDER BY c.mailbox_id, c.graph_event_id"""
LAUNCH_COUNTS_SQL = f"""
    SELECT coalesce((SELECT jsonb_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM {_S}.outlook_mailboxes
                                                           GROUP BY state) m), '{{}}'::jsonb) AS mailboxes,
           (SELECT count(*) FROM {_S}.outlook_bindings WHERE status = 'ACTIVE') AS active_bindings"""


async def cleanup_rows(runner: Runner, *, now: datetime) -> tuple[list[Row], list[Row], Row]:
    """What the launch checklist is made of: the unbound local series, the Outlook series masters in the pool, and
    the counts its operations steps are ticked by."""
    series_rows = await runner.all(UNBOUND_SERIES_SQL, {"now": now})
    masters = await runner.all(SERIES_MASTERS_SQL) if series_rows else []
    counts = await runner.one(LAUNCH_COUNTS_SQL)
    assert counts is not None  # an aggregate without FROM always answers one row
    return series_rows, masters, counts


RECENT_RUNS_SQL = f"""
    SELECT r.id, r.mailbox_id, r.kind, r.status, r.started_at, r.finished_at, r.counts, r.graph_requests,
           r.error_code, r.error_request_id
      FROM {_S}.outlook_sync_runs r
     WHERE r.mailbox_id = %(mailbox)s
     ORDER BY r.started_at DESC, r.id DESC LIMIT %(limit)s"""


async def recent_runs(runner: Runner, *, mailbox_id: uuid.UUID, limit: int = 20) -> list[Row]:
    """A mailbox's last sync runs, newest first (the console's drift chart and table)."""
    return await runner.all(RECENT_RUNS_SQL, {"mailbox": mailbox_id, "limit": limit})
