"""The workspaces domain's reads. Each takes a `Runner` first: the read path (tenet.kernel.reads) for a GET, the unit
of work's statements for a command that answers what it wrote as the GET shows it.

Each answer is one statement: the caller's right to see it (an active member of a workspace that is not
DELETED) is checked in the same statement as the rows it returns, so a read is one round trip and its
visibility check and its rows come from the same snapshot. Member lists read the members' display names
and emails from identity's `iam.user_account` (its published read columns: id, email, display_name) in
the same statement rather than asking identity for each page.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner
from tenet.workspaces import errors
from tenet.workspaces.permissions import Action, require

# A caller sees a workspace when they hold an active membership of it and it is not DELETED.
CALLER_SQL = """
    SELECT w.id, w.name, w.status, w.created_at, w.deletion_requested_at, c.role
      FROM workspace.workspace w
      JOIN workspace.membership c ON c.workspace_id = w.id AND c.user_id = %(caller)s AND c.status = 'ACTIVE'
     WHERE w.id = %(workspace_id)s AND w.status <> 'DELETED'
"""

WORKSPACE_SQL = CALLER_SQL

WORKSPACES_KEYSET = SqlKeyset(("w.created_at", "w.id"), (datetime, uuid.UUID))
WORKSPACES_SQL = """
    SELECT w.id, w.name, w.status, w.created_at, w.deletion_requested_at, c.role
      FROM workspace.membership c
      JOIN workspace.workspace w ON w.id = c.workspace_id
     WHERE c.user_id = %(caller)s AND c.status = 'ACTIVE' AND w.status <> 'DELETED' AND {after}
     ORDER BY {order} LIMIT %(limit)s
"""

MEMBERS_KEYSET = SqlKeyset(("m.joined_at", "m.id"), (datetime, uuid.UUID))
# The caller row first (LEFT JOIN the page onto it): no row at all means "not visible" (404); one row with
# NULL members means an empty page.
MEMBERS_SQL = """
    WITH caller AS ({caller}),
    page AS (
        SELECT m.user_id, m.id AS membership_id, m.role, u.display_name, u.email, m.joined_at
          FROM workspace.membership m
          JOIN iam.user_account u ON u.id = m.user_id
         WHERE m.workspace_id = %(workspace_id)s AND m.status = 'ACTIVE' AND {member} AND {after}
           AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {order} LIMIT %(limit)s
    )
    SELECT page.* FROM caller LEFT JOIN page ON TRUE ORDER BY {page_order}
"""

INVITATIONS_KEYSET = SqlKeyset(("i.created_at", "i.id"), (datetime, uuid.UUID), descending=True)
# The effective status, the rule's one form in SQL (its one form in Python: invitations.effective_status): a PENDING
# invitation past its expiry reads EXPIRED for every reader, whether or not the sweep has marked it yet.
EFFECTIVE_STATUS = "CASE WHEN i.status = 'PENDING' AND i.expires_at <= %(now)s THEN 'EXPIRED' ELSE i.status END"
INVITATIONS_SQL = f"""
    WITH caller AS ({{caller}}),
    page AS (
        SELECT i.id, i.workspace_id, i.email, i.role, {EFFECTIVE_STATUS} AS status, i.invited_by, i.created_at,
               i.expires_at, i.last_sent_at, i.accepted_at, i.accepted_by, i.revoked_at, i.expired_at
          FROM workspace.invitation i
         WHERE i.workspace_id = %(workspace_id)s AND {{filters}} AND {{after}}
           AND EXISTS (SELECT 1 FROM caller WHERE caller.role IN ('owner', 'admin'))
         ORDER BY {{order}} LIMIT %(limit)s
    )
    SELECT caller.role AS caller_role, page.* FROM caller LEFT JOIN page ON TRUE ORDER BY {{page_order}}
"""  # noqa: S608  (constants of this module)


async def workspace(reads: Runner, *, workspace_id: uuid.UUID, principal_id: uuid.UUID) -> Row:
    row = await reads.one(WORKSPACE_SQL, {"workspace_id": workspace_id, "caller": principal_id})
    if row is None:
        raise errors.WorkspaceNotFound()
    return row


async def workspaces(reads: Runner, *, principal_id: uuid.UUID, page: PageParams) -> tuple[list[Row], str | None]:
    after, params = WORKSPACES_KEYSET.after(page)
    rows = await reads.all(WORKSPACES_SQL.format(after=after, order=WORKSPACES_KEYSET.order_by),
                           {"caller": principal_id, "limit": WORKSPACES_KEYSET.fetch_limit(page), **params})
    items, cursor = WORKSPACES_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))
    return items, cursor


async def members(reads: Runner, *, workspace_id: uuid.UUID, principal_id: uuid.UUID, page: PageParams,
                  user_id: uuid.UUID | None = None) -> tuple[list[Row], str | None]:
    """Active members in the order they joined (any member may list them); `user_id`: that member only."""
    after, params = MEMBERS_KEYSET.after(page)
    sql = MEMBERS_SQL.format(caller=CALLER_SQL, member="m.user_id = %(user_id)s" if user_id else "TRUE", after=after,
                             order=MEMBERS_KEYSET.order_by, page_order="page.joined_at, page.membership_id")
    rows = await reads.all(sql, {"workspace_id": workspace_id, "caller": principal_id, "user_id": user_id,
                                 "limit": MEMBERS_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.WorkspaceNotFound()
    found = [row for row in rows if row["membership_id"] is not None]
    items, cursor = MEMBERS_KEYSET.page(found, page, key=lambda r: (r["joined_at"], r["membership_id"]))
    return items, cursor


async def invitations(reads: Runner, *, workspace_id: uuid.UUID, principal_id: uuid.UUID, status: str | None,
                      page: PageParams, now: datetime,
                      invitation_id: uuid.UUID | None = None) -> tuple[list[Row], str | None]:
    """Newest first (owners and admins), with their effective status; `status` filters on it, `invitation_id`
    answers that one only."""
    filters = ["TRUE"]
    if status is not None:
        filters.append(f"{EFFECTIVE_STATUS} = %(status)s")
    if invitation_id is not None:
        filters.append("i.id = %(invitation_id)s")
    after, params = INVITATIONS_KEYSET.after(page)
    sql = INVITATIONS_SQL.format(caller=CALLER_SQL, filters=" AND ".join(filters), after=after,
                                 order=INVITATIONS_KEYSET.order_by, page_order="page.created_at DESC, page.id DESC")
    rows: list[dict[str, Any]] = await reads.all(sql, {
        "workspace_id": workspace_id, "caller": principal_id, "now": now, "status": status,
        "invitation_id": invitation_id, "limit": INVITATIONS_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.WorkspaceNotFound()
    require(rows[0]["caller_role"], Action.LIST_INVITATIONS)
    found = [row for row in rows if row["id"] is not None]
    items, cursor = INVITATIONS_KEYSET.page(found, page, key=lambda r: (r["created_at"], r["id"]))
    return items, cursor
