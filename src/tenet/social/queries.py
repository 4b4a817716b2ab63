# ruff: noqa: S608  (statements are composed from this module's constants and column lists, never from input)
"""Reads of social collaboration: every statement a GET sends, and the functions that send them.

A query function takes a `tenet.kernel.reads.Runner` first: the read path (`tenet.deps.reads(request)`) for a
GET, the unit of work's `kernel.statements` for a command's answer, which is re-read through the same function
inside its transaction, so a POST or PATCH answers the body the GET of the same thing gives. Each answer is one
statement where the caller's right to see the rows is part of the statement (a row that is
not the caller's, or an item without `view`, is simply not found: 404), so a read is one round trip and its
check and its rows come from one snapshot. The hot reads — the pending inbox (`INBOX_PENDING_SQL`), pending
todos by due date (`TODOS_PENDING_SQL`) and schedule items in a window including subscribed ones
(`SCHEDULE_WINDOW_SQL`) — are module constants the bench imports, so Tenet and its baseline send the same text.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner
from tenet.social import errors
from tenet.social.permissions import names_of

# The caller is `%(me)s` in every statement: the principal whose right to see the rows the statement checks.


# --- profile, settings, agent ----------------------------------------------------------------------------

PROFILE_SQL = """
    SELECT id, username, avatar_url, bio, created_at, updated_at, version
      FROM social.profiles WHERE id = %(me)s AND deleted_at IS NULL
"""
SETTINGS_SQL = "SELECT settings, settings_version FROM social.profiles WHERE id = %(me)s AND deleted_at IS NULL"
AGENT_SQL = """
    SELECT id, user_id, llm_id, agent_type, status, capability_version, config, updated_at, version
      FROM social.user_agents WHERE user_id = %(me)s AND deleted_at IS NULL
"""
# Another person's profile, as their privacy.profile_visible_to allows: everyone, friends (an accepted
# friendship with the caller) or nobody; the caller always sees their own. Deleted profiles are not found.
PUBLIC_PROFILE_SQL = """
    SELECT p.id, p.username, p.avatar_url, p.bio FROM social.profiles p
     WHERE p.id = %(id)s AND p.deleted_at IS NULL
       AND (p.id = %(me)s
            OR coalesce(p.settings #>> '{privacy,profile_visible_to}', 'friends') = 'everyone'
            OR (coalesce(p.settings #>> '{privacy,profile_visible_to}', 'friends') = 'friends'
                AND EXISTS (SELECT 1 FROM social.friendships f
                             WHERE f.user_low_id = LEAST(p.id, %(me)s) AND f.user_high_id = GREATEST(p.id, %(me)s)
                               AND f.status = 'accepted')))
"""
FEED_SQL = "SELECT calendar_feed_id FROM social.profiles WHERE id = %(me)s AND deleted_at IS NULL"


async def _one(runner: Runner, sql: str, params: dict[str, Any], missing: type[errors.DomainError]) -> Row:
    row = await runner.one(sql, params)
    if row is None:
        raise missing()
    return row


async def profile(runner: Runner, *, principal_id: uuid.UUID) -> Row:
    return await _one(runner, PROFILE_SQL, {"me": principal_id}, errors.ProfileNotFound)


async def public_profile(runner: Runner, *, principal_id: uuid.UUID, user_id: uuid.UUID) -> Row:
    return await _one(runner, PUBLIC_PROFILE_SQL, {"me": principal_id, "id": user_id}, errors.ProfileNotFound)


async def settings(runner: Runner, *, principal_id: uuid.UUID) -> Row:
    return await _one(runner, SETTINGS_SQL, {"me": principal_id}, errors.ProfileNotFound)


async def agent(runner: Runner, *, principal_id: uuid.UUID) -> Row:
    return await _one(runner, AGENT_SQL, {"me": principal_id}, errors.ProfileNotFound)


async def feed_id(runner: Runner, *, principal_id: uuid.UUID) -> str:
    row = await _one(runner, FEED_SQL, {"me": principal_id}, errors.ProfileNotFound)
    return str(row["calendar_feed_id"])


# --- friendships ---------------------------------------------------------------------------------------

FRIENDSHIP_COLUMNS = """
    f.id, f.user_low_id AS user_a, f.user_high_id AS user_b, f.status, f.initiator_id, f.requested_at,
    f.accepted_at, f.closed_reason, f.updated_at, f.version,
    CASE WHEN f.user_low_id = %(me)s THEN f.user_high_id ELSE f.user_low_id END AS other_user_id,
    CASE WHEN f.blocked_by = %(me)s THEN f.blocked_by END AS blocked_by,
    (SELECT p.username FROM social.profiles p
      WHERE p.id = CASE WHEN f.user_low_id = %(me)s THEN f.user_high_id ELSE f.user_low_id END) AS other_username
"""
# The blocked party never sees the block (design §5.1).
_VISIBLE = "(f.status <> 'blocked' OR f.blocked_by = %(me)s)"
FRIENDSHIP_SQL = f"""
    SELECT {FRIENDSHIP_COLUMNS} FROM social.friendships f
     WHERE f.id = %(id)s AND %(me)s IN (f.user_low_id, f.user_high_id) AND {_VISIBLE}
"""
FRIENDSHIPS_KEYSET = SqlKeyset(("f.id",), (uuid.UUID,))
# Two index range scans (the caller on either side of the pair), merged by id.
FRIENDSHIPS_SQL = f"""
    SELECT {FRIENDSHIP_COLUMNS} FROM social.friendships f
     WHERE f.id IN (
        (SELECT id FROM social.friendships f WHERE f.user_low_id = %(me)s AND f.status = ANY(%(statuses)s)
            AND {{after}} ORDER BY f.id LIMIT %(limit)s)
        UNION ALL
        (SELECT id FROM social.friendships f WHERE f.user_high_id = %(me)s AND f.status = ANY(%(statuses)s)
            AND {{after}} ORDER BY f.id LIMIT %(limit)s))
       AND {_VISIBLE} AND {{direction}}
     ORDER BY f.id LIMIT %(limit)s
"""
_DIRECTIONS = {None: "TRUE", "incoming": "f.initiator_id <> %(me)s", "outgoing": "f.initiator_id = %(me)s"}


async def friendship(runner: Runner, *, principal_id: uuid.UUID, friendship_id: uuid.UUID) -> Row:
    return await _one(runner, FRIENDSHIP_SQL, {"me": principal_id, "id": friendship_id}, errors.FriendshipNotFound)


async def friendships(runner: Runner, *, principal_id: uuid.UUID, statuses: list[str], direction: str | None,
                      page: PageParams) -> tuple[list[Row], str | None]:
    after, params = FRIENDSHIPS_KEYSET.after(page)
    sql = FRIENDSHIPS_SQL.format(after=after, direction=_DIRECTIONS[direction])
    rows = await runner.all(sql, {"me": principal_id, "statuses": statuses,
                                  "limit": FRIENDSHIPS_KEYSET.fetch_limit(page), **params})
    items, cursor = FRIENDSHIPS_KEYSET.page(rows, page, key=lambda r: (r["id"],))
    return items, cursor


# --- groups --------------------------------------------------------------------------------------------

GROUP_COLUMNS = """g.id, g.name, g.owner_id, g.visibility, g.status, g.description, g.created_at, g.archived_at,
                   g.version, m.role AS my_role, m.status AS my_status"""
# Visible: a current member, or anyone for a public active group.
GROUP_SQL = f"""
    SELECT {GROUP_COLUMNS} FROM social.groups g
      LEFT JOIN social.group_members m ON m.group_id = g.id AND m.user_id = %(me)s AND m.status <> 'removed'
     WHERE g.id = %(id)s AND (m.id IS NOT NULL OR (g.visibility = 'public' AND g.status = 'active'))
"""
GROUPS_KEYSET = SqlKeyset(("g.created_at", "g.id"), (datetime, uuid.UUID))
MY_GROUPS_SQL = f"""
    SELECT {GROUP_COLUMNS} FROM social.group_members m JOIN social.groups g ON g.id = m.group_id
     WHERE m.user_id = %(me)s AND m.status <> 'removed' AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""
PUBLIC_GROUPS_SQL = f"""
    SELECT {GROUP_COLUMNS} FROM social.groups g
      LEFT JOIN social.group_members m ON m.group_id = g.id AND m.user_id = %(me)s AND m.status <> 'removed'
     WHERE g.visibility = 'public' AND g.status = 'active' AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""


async def group(runner: Runner, *, principal_id: uuid.UUID, group_id: uuid.UUID) -> Row:
    return await _one(runner, GROUP_SQL, {"me": principal_id, "id": group_id}, errors.GroupNotFound)


async def groups(runner: Runner, *, principal_id: uuid.UUID, scope: str, page: PageParams
                 ) -> tuple[list[Row], str | None]:
    after, params = GROUPS_KEYSET.after(page)
    sql = (MY_GROUPS_SQL if scope == "mine" else PUBLIC_GROUPS_SQL).format(after=after, order=GROUPS_KEYSET.order_by)
    rows = await runner.all(sql, {"me": principal_id, "limit": GROUPS_KEYSET.fetch_limit(page), **params})
    items, cursor = GROUPS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))
    return items, cursor


MEMBERS_KEYSET = SqlKeyset(("m.joined_at", "m.id"), (datetime, uuid.UUID))
MEMBER_COLUMNS = """m.group_id, m.user_id, m.role, m.status, m.joined_at, m.join_source, m.invited_by,
                    m.id AS member_id, p.username"""
# Current members, seen by current members only.
_CALLER_MEMBER = """SELECT 1 FROM social.group_members c WHERE c.group_id = %(id)s AND c.user_id = %(me)s
                      AND c.status <> 'removed'"""
MEMBERS_SQL = f"""
    WITH caller AS ({_CALLER_MEMBER}),
    page AS (
        SELECT {MEMBER_COLUMNS}
          FROM social.group_members m LEFT JOIN social.profiles p ON p.id = m.user_id
         WHERE m.group_id = %(id)s AND m.status <> 'removed' AND {{after}} AND EXISTS (SELECT 1 FROM caller)
         ORDER BY {{order}} LIMIT %(limit)s)
    SELECT page.* FROM caller LEFT JOIN page ON TRUE ORDER BY page.joined_at, page.member_id
"""
MEMBER_SQL = f"""
    SELECT {MEMBER_COLUMNS}
      FROM social.group_members m LEFT JOIN social.profiles p ON p.id = m.user_id
     WHERE m.group_id = %(id)s AND m.user_id = %(user)s AND m.status <> 'removed' AND EXISTS ({_CALLER_MEMBER})
"""


async def member(runner: Runner, *, principal_id: uuid.UUID, group_id: uuid.UUID, user_id: uuid.UUID) -> Row:
    return await _one(runner, MEMBER_SQL, {"me": principal_id, "id": group_id, "user": user_id},
                      errors.GroupMemberNotFound)


async def members(runner: Runner, *, principal_id: uuid.UUID, group_id: uuid.UUID,
                  page: PageParams) -> tuple[list[Row], str | None]:
    after, params = MEMBERS_KEYSET.after(page)
    rows = await runner.all(MEMBERS_SQL.format(after=after, order=MEMBERS_KEYSET.order_by),
                            {"me": principal_id, "id": group_id, "limit": MEMBERS_KEYSET.fetch_limit(page),
                             **params})
    if not rows:
        raise errors.GroupNotFound()
    found = [r for r in rows if r["member_id"] is not None]
    items, cursor = MEMBERS_KEYSET.page(found, page, key=lambda r: (r["joined_at"], r["member_id"]))
    return items, cursor


# Open invitations of a group, seen by its current members (plain members: those they sent). One row with the
# caller's role and no invitation when there is none; no row when the caller may not see the group's.
INVITATIONS_SQL = """
    WITH caller AS (SELECT role FROM social.group_members c WHERE c.group_id = %(id)s AND c.user_id = %(me)s
                      AND c.status <> 'removed')
    SELECT caller.role AS caller_role, i.id, i.related_id AS group_id, i.recipient_id AS user_id,
           i.sender_id AS invited_by, i.status, i.created_at
      FROM caller LEFT JOIN social.inbox_messages i
        ON i.related_type = 'group' AND i.related_id = %(id)s AND i.actionable AND i.status IN ('pending', 'read')
       AND (caller.role <> 'member' OR i.sender_id = %(me)s) AND {only}
     ORDER BY i.created_at DESC, i.id DESC LIMIT 500
"""


async def invitations(runner: Runner, *, principal_id: uuid.UUID, group_id: uuid.UUID) -> list[Row]:
    rows = await runner.all(INVITATIONS_SQL.format(only="TRUE"), {"me": principal_id, "id": group_id})
    if not rows:
        raise errors.GroupNotFound()
    return [r for r in rows if r["id"] is not None]


async def invitation(runner: Runner, *, principal_id: uuid.UUID, group_id: uuid.UUID,
                     invitation_id: uuid.UUID) -> Row:
    rows = await runner.all(INVITATIONS_SQL.format(only="i.id = %(invitation)s"),
                            {"me": principal_id, "id": group_id, "invitation": invitation_id})
    if not rows or rows[0]["id"] is None:
        raise errors.GroupInvitationNotFound()
    return rows[0]


# --- schedule items --------------------------------------------------------------------------------------

ITEM_COLUMNS = """i.id, i.owner_id, i.title, i.description, i.start_at, i.end_at, i.timezone, i.recurrence_rule,
                  i.source_type, i.status, i.created_at, i.updated_at, i.series_end_at, i.version"""
# SOC-INV-13's precedence over the three paths, as in PERMISSION_SQL.
# Two branches, each carrying its item rows: the caller's own items (an index range scan), and the items
# subscribed directly or through groups, each looked up by primary key (LATERAL: one probe per subscription, never
# a scan of the items table) and filtered by the window there. Precedence within the second branch: the direct
# subscription, else the groups' union (SOC-INV-13); an owner is never subscribed to their own item.
# Both subscription look-ups are index-only on ix_schedule_subscriptions_subscriber_id_subject_type_status. The
# caller's groups are a MATERIALIZED CTE so the few active groups are found first and their subscriptions read per
# group; left to itself the planner checked the group's status once per group subscription (100 probes, not 5).
SCHEDULE_WINDOW_SQL = f"""
    WITH direct AS (
        SELECT s.item_id, social.permission_bits(s.permission) AS bits FROM social.schedule_subscriptions s
         WHERE s.subscriber_id = %(me)s AND s.subject_type = 'user' AND s.status IN ('active', 'paused')),
    my_groups AS MATERIALIZED (
        SELECT gm.group_id, gm.role FROM social.group_members gm
          JOIN social.groups g ON g.id = gm.group_id AND g.status = 'active'
         WHERE gm.user_id = %(me)s AND gm.status IN ('active', 'muted')),
    via_group AS (
        SELECT s.item_id, bit_or(social.permission_bits(s.permission) & social.role_bits(mg.role)) AS bits
          FROM my_groups mg
          JOIN social.schedule_subscriptions s ON s.subscriber_id = mg.group_id AND s.subject_type = 'group'
                                               AND s.status IN ('active', 'paused')
         GROUP BY s.item_id),
    subscribed AS (
        SELECT coalesce(d.item_id, vg.item_id) AS item_id, coalesce(d.bits, vg.bits) AS bits
          FROM direct d FULL JOIN via_group vg ON vg.item_id = d.item_id
         WHERE {{subscribed}})
    SELECT * FROM (
        SELECT {ITEM_COLUMNS}, 7 AS my_bits FROM social.schedule_items i
         WHERE {{owned}} i.owner_id = %(me)s AND i.start_at < %(to)s
           AND (i.series_end_at IS NULL OR i.series_end_at > %(from)s)
        UNION ALL
        SELECT {ITEM_COLUMNS}, sub.bits AS my_bits FROM subscribed sub
          CROSS JOIN LATERAL (SELECT * FROM social.schedule_items x WHERE x.id = sub.item_id) i
         WHERE sub.bits & 1 = 1 AND i.owner_id <> %(me)s AND i.start_at < %(to)s
           AND (i.series_end_at IS NULL OR i.series_end_at > %(from)s)
    ) i
     WHERE {{status}} AND {{after}}
     ORDER BY i.start_at, i.id
     LIMIT %(limit)s
"""
WINDOW_KEYSET = SqlKeyset(("i.start_at", "i.id"), (datetime, uuid.UUID))
_SCOPES = {"all": ("", "TRUE"), "owned": ("", "FALSE"), "subscribed": ("FALSE AND", "TRUE")}
# Item ids the caller may view with an occurrence that may overlap the window (todo_from_schedule).
WINDOW_IDS_SQL = """
    SELECT id FROM (""" + SCHEDULE_WINDOW_SQL.format(owned="", subscribed="TRUE", status="i.status = 'active'",
                                                    after="TRUE") + """) w
"""


def window_sql(*, scope: str, status: str | None, after: str) -> str:
    owned, subscribed = _SCOPES[scope]
    return SCHEDULE_WINDOW_SQL.format(owned=owned, subscribed=subscribed, after=after,
                                      status="i.status = %(status)s" if status else "TRUE")


async def window(runner: Runner, *, principal_id: uuid.UUID, window_from: datetime, window_to: datetime,
                 scope: str, status: str | None, page: PageParams) -> tuple[list[Row], str | None]:
    after, params = WINDOW_KEYSET.after(page)
    rows = await runner.all(window_sql(scope=scope, status=status, after=after),
                            {"me": principal_id, "from": window_from, "to": window_to, "status": status,
                             "limit": WINDOW_KEYSET.fetch_limit(page), **params})
    items, cursor = WINDOW_KEYSET.page(rows, page, key=lambda r: (r["start_at"], r["id"]))
    return [_with_permission(r) for r in items], cursor


def _with_permission(row: Row) -> Row:
    """An item row as it is answered: the caller's bits as the canonical permission array."""
    return {**row, "my_permission": names_of(int(row["my_bits"] or 0))}


# The caller's bits on items (the rule of tenet.social.items, SOC-INV-13), as one statement: commands decide with
# it (`items.decide`, under the item's lock) and reads check visibility with it. Callers add the WHERE.
PERMISSION_SQL = """
    SELECT i.id, CASE
        WHEN i.owner_id = %(me)s THEN 7
        WHEN d.permission IS NOT NULL THEN social.permission_bits(d.permission)
        ELSE coalesce((SELECT bit_or(social.permission_bits(s.permission) & social.role_bits(gm.role))
                         FROM social.schedule_subscriptions s
                         JOIN social.groups g ON g.id = s.subscriber_group_id AND g.status = 'active'
                         JOIN social.group_members gm ON gm.group_id = g.id AND gm.user_id = %(me)s
                                                      AND gm.status IN ('active', 'muted')
                        WHERE s.item_id = i.id AND s.subject_type = 'group' AND s.status IN ('active', 'paused')), 0)
        END AS bits
      FROM social.schedule_items i
      LEFT JOIN social.schedule_subscriptions d ON d.item_id = i.id AND d.subscriber_id = %(me)s
                                               AND d.subject_type = 'user' AND d.status IN ('active', 'paused')
"""
ITEM_SQL = f"""
    WITH perm AS ({PERMISSION_SQL} WHERE i.id = %(id)s)
    SELECT {ITEM_COLUMNS}, perm.bits AS my_bits FROM perm JOIN social.schedule_items i ON i.id = perm.id
     WHERE perm.bits & 1 = 1
"""


async def item(runner: Runner, *, principal_id: uuid.UUID, item_id: uuid.UUID) -> Row:
    return _with_permission(await _one(runner, ITEM_SQL, {"me": principal_id, "id": item_id},
                                       errors.ScheduleItemNotFound))


SUBSCRIPTION_COLUMNS = """s.id, s.item_id, s.subscriber_id, s.permission, s.notify_level, s.status, s.created_at,
                          s.subject_type, s.accepted_at, s.updated_at, s.version"""
# Who is subscribed, seen by anyone who may view the item; pending offers by editors and their invitee only.
SUBSCRIPTIONS_SQL = f"""
    WITH perm AS ({PERMISSION_SQL} WHERE i.id = %(id)s)
    SELECT perm.bits AS my_bits, {SUBSCRIPTION_COLUMNS}
      FROM perm LEFT JOIN social.schedule_subscriptions s
        ON s.item_id = perm.id AND (s.status IN ('active', 'paused') OR (s.status = 'pending' AND perm.bits & 4 = 4)
                                    OR (s.subscriber_id = %(me)s AND s.status <> 'unsubscribed'))
     WHERE perm.bits & 1 = 1
     ORDER BY s.created_at, s.id LIMIT 1000
"""
# One subscription of an item the caller may view: a command's answer (an offer made with invite alone included).
SUBSCRIPTION_SQL = f"""
    WITH perm AS ({PERMISSION_SQL} WHERE i.id = %(id)s)
    SELECT {SUBSCRIPTION_COLUMNS}
      FROM perm JOIN social.schedule_subscriptions s ON s.item_id = perm.id AND s.id = %(subscription)s
     WHERE perm.bits & 1 = 1
"""


async def subscriptions(runner: Runner, *, principal_id: uuid.UUID, item_id: uuid.UUID) -> list[Row]:
    rows = await runner.all(SUBSCRIPTIONS_SQL, {"me": principal_id, "id": item_id})
    if not rows:
        raise errors.ScheduleItemNotFound()
    return [r for r in rows if r["id"] is not None]


async def subscription(runner: Runner, *, principal_id: uuid.UUID, item_id: uuid.UUID,
                       subscription_id: uuid.UUID) -> Row:
    return await _one(runner, SUBSCRIPTION_SQL, {"me": principal_id, "id": item_id, "subscription": subscription_id},
                      errors.SubscriptionNotFound)


# The feed: owned and viewable items whose series end after now - 90 days (D-15).
FEED_OWNER_SQL = """
    SELECT p.id FROM social.profiles p JOIN iam.user_account u ON u.id = p.id AND u.status = 'active'
     WHERE p.calendar_feed_id = %(feed)s AND p.deleted_at IS NULL
"""


# --- inbox ---------------------------------------------------------------------------------------------

INBOX_COLUMNS = """id, recipient_id, sender_id, message_type, content, related_type, related_id, status, created_at,
                   read_at, acted_at, actionable"""
INBOX_KEYSET = SqlKeyset(("created_at", "id"), (datetime, uuid.UUID), descending=True)
# Hot: one range scan of ix_inbox_messages_pending with the cursor in the index condition.
INBOX_PENDING_SQL = f"""
    SELECT {INBOX_COLUMNS} FROM social.inbox_messages
     WHERE recipient_id = %(me)s AND status = 'pending' AND {{after}}
     ORDER BY created_at DESC, id DESC LIMIT %(limit)s
"""
INBOX_SQL = f"""
    SELECT {INBOX_COLUMNS} FROM social.inbox_messages
     WHERE recipient_id = %(me)s AND {{status}} AND {{kind}} AND {{after}}
     ORDER BY created_at DESC, id DESC LIMIT %(limit)s
"""
INBOX_ONE_SQL = f"SELECT {INBOX_COLUMNS} FROM social.inbox_messages WHERE id = %(id)s AND recipient_id = %(me)s"
INBOX_SUMMARY_SQL = """
    SELECT count(*) AS pending_count FROM social.inbox_messages WHERE recipient_id = %(me)s AND status = 'pending'
"""


async def inbox(runner: Runner, *, principal_id: uuid.UUID, statuses: list[str] | None, message_type: str | None,
                page: PageParams) -> tuple[list[Row], str | None]:
    after, params = INBOX_KEYSET.after(page)
    if statuses == ["pending"] and message_type is None:
        sql = INBOX_PENDING_SQL.format(after=after)
    else:
        sql = INBOX_SQL.format(after=after, status="status = ANY(%(statuses)s)" if statuses else "TRUE",
                               kind="message_type = %(kind)s" if message_type else "TRUE")
    rows = await runner.all(sql, {"me": principal_id, "statuses": statuses, "kind": message_type,
                                  "limit": INBOX_KEYSET.fetch_limit(page), **params})
    items, cursor = INBOX_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))
    return items, cursor


async def message(runner: Runner, *, principal_id: uuid.UUID, message_id: uuid.UUID) -> Row:
    return await _one(runner, INBOX_ONE_SQL, {"me": principal_id, "id": message_id}, errors.InboxMessageNotFound)


async def pending_count(runner: Runner, *, principal_id: uuid.UUID) -> int:
    row = await runner.one(INBOX_SUMMARY_SQL, {"me": principal_id})
    return int(row["pending_count"]) if row else 0


# --- todos ---------------------------------------------------------------------------------------------

TODO_COLUMNS = """id, owner_id, title, description, due_at, priority, status, source_ids, created_at, completed_at,
                  source_occurrence_start AS occurrence_start, updated_at, version"""
# Todos without a due date sort last: after this instant (an expression PostgreSQL and psycopg both read).
NO_DUE = datetime(9999, 12, 31, tzinfo=UTC)
# Hot: pending todos by due date (todos without one last), one range scan of ix_todos_pending_due.
_SORT_DUE = "COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone)"
TODOS_PENDING_KEYSET = SqlKeyset((_SORT_DUE, "id"), (datetime, uuid.UUID))
TODOS_PENDING_SQL = f"""
    SELECT {TODO_COLUMNS}, COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone) AS sort_due
      FROM social.todos
     WHERE owner_id = %(me)s AND status = 'pending'
       AND COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone) < %(due_before)s AND {{after}}
     ORDER BY COALESCE(due_at, '9999-12-31 00:00:00+00'::timestamp with time zone), id LIMIT %(limit)s
"""
TODOS_KEYSET = SqlKeyset(("created_at", "id"), (datetime, uuid.UUID), descending=True)
TODOS_SQL = f"""
    SELECT {TODO_COLUMNS} FROM social.todos
     WHERE owner_id = %(me)s AND {{status}} AND {{after}} ORDER BY created_at DESC, id DESC LIMIT %(limit)s
"""
TODO_ONE_SQL = f"SELECT {TODO_COLUMNS} FROM social.todos WHERE id = %(id)s AND owner_id = %(me)s"
# Several of the caller's todos, in the order of the ids asked for (an extraction's answer).
TODOS_BY_ID_SQL = f"""
    SELECT {TODO_COLUMNS} FROM social.todos WHERE id = ANY(%(ids)s) AND owner_id = %(me)s
     ORDER BY array_position(%(ids)s, id)
"""


async def todo(runner: Runner, *, principal_id: uuid.UUID, todo_id: uuid.UUID) -> Row:
    return await _one(runner, TODO_ONE_SQL, {"me": principal_id, "id": todo_id}, errors.TodoNotFound)


async def todos_by_id(runner: Runner, *, principal_id: uuid.UUID, todo_ids: list[uuid.UUID]) -> list[Row]:
    return await runner.all(TODOS_BY_ID_SQL, {"me": principal_id, "ids": todo_ids})


async def todos(runner: Runner, *, principal_id: uuid.UUID, status: str | None, due_before: datetime | None,
                page: PageParams) -> tuple[list[Row], str | None]:
    if status == "pending":
        after, params = TODOS_PENDING_KEYSET.after(page)
        rows = await runner.all(TODOS_PENDING_SQL.format(after=after), {
            "me": principal_id, "due_before": due_before or NO_DUE + timedelta(seconds=1),
            "limit": TODOS_PENDING_KEYSET.fetch_limit(page), **params})
        items, cursor = TODOS_PENDING_KEYSET.page(rows, page, key=lambda r: (r["sort_due"], r["id"]))
        return items, cursor
    after, params = TODOS_KEYSET.after(page)
    rows = await runner.all(TODOS_SQL.format(after=after, status="status = %(status)s" if status else "TRUE"),
                            {"me": principal_id, "status": status, "limit": TODOS_KEYSET.fetch_limit(page), **params})
    items, cursor = TODOS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))
    return items, cursor


# --- automations ---------------------------------------------------------------------------------------

JOB_COLUMNS = """j.id, j.owner_id, j.name, j.job_type, j.target_type, j.target_id, j.params, j.schedule_type,
                 to_char(j.schedule_time, 'HH24:MI') AS schedule_time, j.status, j.created_at, j.schedule_weekday,
                 j.next_run_at, j.updated_at, j.version,
                 coalesce(p.settings #>> '{preferences,timezone}', %(tz)s) AS timezone"""
JOBS_KEYSET = SqlKeyset(("j.created_at", "j.id"), (datetime, uuid.UUID))
# Formatted again at the call (status, keyset): the braces of the JSON path are doubled for that.
JOBS_SQL = f"""
    SELECT {JOB_COLUMNS.replace("{", "{{").replace("}", "}}")}
      FROM social.automation_jobs j LEFT JOIN social.profiles p ON p.id = j.owner_id
     WHERE j.owner_id = %(me)s AND {{status}} AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""
JOB_SQL = f"""
    SELECT {JOB_COLUMNS} FROM social.automation_jobs j LEFT JOIN social.profiles p ON p.id = j.owner_id
     WHERE j.id = %(id)s AND j.owner_id = %(me)s
"""
RUNS_KEYSET = SqlKeyset(("r.scheduled_at", "r.id"), (datetime, uuid.UUID), descending=True)
RUN_COLUMNS = """r.id, r.job_id, r.scheduled_at, r.started_at, r.finished_at, r.status, r.attempt, r.error_message,
                 r.result, r.trigger, r.error_code, r.max_attempts,
                 CASE WHEN r.status = 'queued' THEN r.available_at END AS next_attempt_at, r.missed_slots"""
RUNS_SQL = f"""
    WITH job AS (SELECT id FROM social.automation_jobs WHERE id = %(id)s AND owner_id = %(me)s),
    page AS (SELECT {RUN_COLUMNS}
               FROM social.automation_runs r
              WHERE r.job_id = %(id)s AND EXISTS (SELECT 1 FROM job) AND {{status}} AND {{after}}
              ORDER BY {{order}} LIMIT %(limit)s)
    SELECT page.* FROM job LEFT JOIN page ON TRUE ORDER BY page.scheduled_at DESC, page.id DESC
"""
RUN_SQL = f"""
    SELECT {RUN_COLUMNS} FROM social.automation_runs r JOIN social.automation_jobs j ON j.id = r.job_id
     WHERE r.id = %(run)s AND r.job_id = %(id)s AND j.owner_id = %(me)s
"""


async def job(runner: Runner, *, principal_id: uuid.UUID, job_id: uuid.UUID, default_timezone: str) -> Row:
    return await _one(runner, JOB_SQL, {"me": principal_id, "id": job_id, "tz": default_timezone},
                      errors.AutomationNotFound)


async def jobs(runner: Runner, *, principal_id: uuid.UUID, status: str | None, default_timezone: str,
               page: PageParams) -> tuple[list[Row], str | None]:
    after, params = JOBS_KEYSET.after(page)
    rows = await runner.all(
        JOBS_SQL.format(status="j.status = %(status)s" if status else "TRUE", after=after, order=JOBS_KEYSET.order_by),
        {"me": principal_id, "tz": default_timezone, "status": status, "limit": JOBS_KEYSET.fetch_limit(page),
         **params})
    return JOBS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))


async def runs(runner: Runner, *, principal_id: uuid.UUID, job_id: uuid.UUID, status: str | None,
               page: PageParams) -> tuple[list[Row], str | None]:
    after, params = RUNS_KEYSET.after(page)
    rows = await runner.all(
        RUNS_SQL.format(status="r.status = %(status)s" if status else "TRUE", after=after, order=RUNS_KEYSET.order_by),
        {"me": principal_id, "id": job_id, "status": status, "limit": RUNS_KEYSET.fetch_limit(page), **params})
    if not rows:
        raise errors.AutomationNotFound()
    found = [r for r in rows if r["id"] is not None]
    return RUNS_KEYSET.page(found, page, key=lambda r: (r["scheduled_at"], r["id"]))


async def run(runner: Runner, *, principal_id: uuid.UUID, job_id: uuid.UUID, run_id: uuid.UUID) -> Row:
    return await _one(runner, RUN_SQL, {"me": principal_id, "id": job_id, "run": run_id}, errors.AutomationNotFound)
