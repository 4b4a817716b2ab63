# ruff: noqa: S608  (detectors are composed from this module's constants, never from input)
"""The rules of social collaboration (design §2), each with its enforcement and its detector (SQL returning the
violating rows; empty = holds). `tenet invariants check --domain social` runs them."""

from tenet.kernel.invariants import register
from tenet.social.models import (
    AGENT_LIVE_INDEX,
    CURRENT_CREATOR_INDEX,
    DEDUP_INDEX,
    EXTRACTED_INDEX,
    FEED_UNIQUE,
    FRIEND_PAIR_UNIQUE,
    GROUP_CREATOR_TRIGGERS,
    INBOX_ACCEPT_TRIGGER,
    INBOX_TERMINAL_TRIGGER,
    MEMBER_UNIQUE,
    OPEN_ACTION_INDEX,
    OWNER_FIXED_TRIGGER,
    OWNER_NOT_SUBSCRIBED_TRIGGER,
    RUN_SLOT_UNIQUE,
    RUN_TERMINAL_TRIGGER,
    SUBSCRIPTION_UNIQUE,
)


def _trigger(name: str, table: str) -> str:
    """The trigger exists and fires in an ordinary session (not disabled, not replica-only)."""
    schema, relation = table.split(".")
    return f"""SELECT NULL, 'trigger {name} missing or disabled' WHERE NOT EXISTS (
        SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{schema}' AND c.relname = '{relation}' AND t.tgname = '{name}'
           AND t.tgenabled IN ('O', 'A'))"""


def _constraint(name: str, table: str) -> str:
    """The constraint exists on the table and is validated: a CHECK or key added NOT VALID (or dropped) holds only
    for rows written since, so the rows' scan it replaces would no longer be redundant."""
    schema, relation = table.split(".")
    return f"""SELECT NULL, 'constraint {name} missing or not validated' WHERE NOT EXISTS (
        SELECT 1 FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{schema}' AND c.relname = '{relation}' AND k.conname = '{name}' AND k.convalidated)"""


def _unique_index(name: str, table: str) -> str:
    """The unique index exists on the table, is valid and live (an interrupted CREATE INDEX CONCURRENTLY leaves an
    invalid one that enforces nothing for the rows before it) and is still unique."""
    schema, relation = table.split(".")
    return f"""SELECT NULL, 'unique index {name} missing, invalid or not unique' WHERE NOT EXISTS (
        SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{schema}' AND c.relname = '{relation}' AND i.relname = '{name}'
           AND x.indisunique AND x.indisvalid AND x.indisready AND x.indislive)"""


def _generated(column: str, table: str) -> str:
    """The column is a stored generated column: the database computes it, no writer can set it."""
    schema, relation = table.split(".")
    return f"""SELECT NULL, 'column {column} is not generated' WHERE NOT EXISTS (
        SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{schema}' AND c.relname = '{relation}' AND a.attname = '{column}' AND a.attgenerated = 's'
           AND NOT a.attisdropped)"""


def _enforced(table: str, *, constraints: tuple[str, ...] = (), unique_indexes: tuple[str, ...] = (),
              triggers: tuple[str, ...] = ()) -> str:
    """The catalog half of a detector whose rows the database itself guards: one row per guard that is missing,
    not validated, invalid or disabled. It reads the catalog only, so it costs the same at any table size."""
    return "\n        UNION ALL ".join([*(_constraint(c, table) for c in constraints),
                                        *(_unique_index(i, table) for i in unique_indexes),
                                        *(_trigger(t, table) for t in triggers)])


def rule(id: str, **fields: object) -> None:
    register(id=id, domain="social", **fields)


_ITEM_LOCK = ("every item-scoped command takes the item row FOR UPDATE first (`items._lock_item`), then the groups "
              "that could grant the caller a right FOR SHARE (id order), then decides and writes.")
_GROUP_LOCK = ("every command that changes a group's members, roles or status takes the group row FOR UPDATE "
               "first (`groups._lock_group`), after the share lock on the accounts it relies on.")

rule(
    "SOC-INV-01",
    statement="Every account that is not deleted has exactly one live profile and exactly one live agent; a deleted "
              "account has neither live.",
    scope="iam.user_account, with social.profiles (id = account id) and social.user_agents (deleted_at IS NULL)",
    counterexample="An account made by a path that forgot social (admin create, create-admin, the demo) answers 500 "
                   "on GET /me/agent; a deleted account's profile stays visible.",
    db=("pk_profiles", AGENT_LIVE_INDEX),
    app="Identity publishes AccountCreated in the transaction that creates the account; social's handler inserts "
        "the profile and the agent there (accounts.create_profile_and_agent). AccountDeleted soft-deletes and "
        "scrubs both. The migration back-fills accounts that existed before social.",
    error_code=None,
    concurrency="New ids, in the account's own transaction: no race. Deletion runs under identity's FOR UPDATE of "
                "the account row.",
    detector="""
        SELECT u.id AS user_id, 'no live profile' AS problem FROM iam.user_account u
         WHERE u.status <> 'deleted'
           AND NOT EXISTS (SELECT 1 FROM social.profiles p WHERE p.id = u.id AND p.deleted_at IS NULL)
        UNION ALL
        SELECT u.id, 'not exactly one live agent' FROM iam.user_account u
         WHERE u.status <> 'deleted'
           AND (SELECT count(*) FROM social.user_agents a WHERE a.user_id = u.id AND a.deleted_at IS NULL) <> 1
        UNION ALL
        SELECT u.id, 'deleted account with a live profile or agent' FROM iam.user_account u
         WHERE u.status = 'deleted'
           AND (EXISTS (SELECT 1 FROM social.profiles p WHERE p.id = u.id AND p.deleted_at IS NULL)
             OR EXISTS (SELECT 1 FROM social.user_agents a WHERE a.user_id = u.id AND a.deleted_at IS NULL))
    """,
)

rule(
    "SOC-INV-02",
    statement="profiles.settings is a valid document of its settings_version: only the sections preferences, "
              "privacy, notification, only their known keys, each of its type and range; quiet hours both or "
              "neither.",
    scope="social.profiles, every row",
    counterexample='{"notification": {"enabled": "yes"}}, or a typo {"privacy": {"allow_friend_request": false}} '
                   "stored and silently ignored.",
    db=("ck_profiles_settings_valid", "ck_profiles_settings_version_known"),
    app="PATCH /me/settings checks the patch against tenet.social.settings_schema (422 VALIDATION_FAILED with "
        "errors[]) before the one UPDATE; the CHECK (function social.settings_valid) is the arbiter on the "
        "merged row.",
    error_code="VALIDATION_FAILED",
    concurrency="The CHECK is evaluated on the merged row inside the UPDATE.",
    detector="""
        SELECT p.id AS profile_id, 'invalid settings' AS problem FROM social.profiles p
         WHERE NOT social.settings_valid(p.settings, p.settings_version)
        UNION ALL
        SELECT p.id, 'unknown time zone' FROM social.profiles p
         WHERE p.deleted_at IS NULL AND p.settings #>> '{preferences,timezone}' IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = p.settings #>> '{preferences,timezone}')
    """,
)

rule(
    "SOC-INV-03",
    statement="Settings change only by an RFC 7396 merge computed inside one UPDATE (social.jsonb_merge_patch), so "
              "concurrent PATCHes of different keys all survive.",
    scope="PATCH /me/settings",
    counterexample="A and B patch different keys at once; a read-modify-write writes back A's stale copy and B's "
                   "change is lost.",
    db=(),
    db_reason="a property of the one statement that writes settings; the detector checks the merge function "
              "still implements the RFC",
    app="profiles.patch_settings never reads settings to write them: UPDATE .. SET settings = "
        "social.jsonb_merge_patch(settings, :patch).",
    error_code=None,
    concurrency="The UPDATE's row lock; READ COMMITTED re-evaluates the SET on the version the other committed. "
                "Proven by tests/concurrency/test_social_races.py (20 concurrent merges).",
    detector="""
        SELECT 'jsonb_merge_patch missing or not RFC 7396' AS problem
         WHERE to_regprocedure('social.jsonb_merge_patch(jsonb,jsonb)') IS NULL
            OR social.jsonb_merge_patch(jsonb_build_object('a', jsonb_build_object('b', 'c'), 'x', 1),
                                        jsonb_build_object('a', jsonb_build_object('b', 'd', 'c', NULL::text),
                                                           'x', NULL::text))
               <> jsonb_build_object('a', jsonb_build_object('b', 'd'))
    """,
)

rule(
    "SOC-INV-04",
    statement="One friendship row per unordered pair: the smaller id in user_low_id, the larger in user_high_id, "
              "the initiator one of them.",
    scope="social.friendships, every status",
    counterexample="A asks B while B asks A: two pending rows, then two friendships.",
    db=("ck_friendships_pair_ordered", "ck_friendships_initiator_in_pair", FRIEND_PAIR_UNIQUE),
    app="friends.request normalises the pair and inserts ON CONFLICT DO NOTHING, then locks the row and applies "
        "the rules to its current state; a crossed request accepts the other's.",
    error_code="FRIEND_REQUEST_ALREADY_PENDING",
    concurrency="The unique pair decides the insert; the row lock serialises what follows. Race test: A->B || "
                "B->A ends as one accepted row.",
    # The database's: with the pair ordered (CHECK), the unique (low, high) is one row per unordered pair. The
    # detector checks the three are in force instead of grouping every friendship.
    detector=f"""
        SELECT NULL::uuid AS id, NULL::text AS problem WHERE false
        UNION ALL {_enforced("social.friendships", constraints=(
            "ck_friendships_pair_ordered", "ck_friendships_initiator_in_pair"), unique_indexes=(FRIEND_PAIR_UNIQUE,))}
    """,
)

rule(
    "SOC-INV-05",
    statement="A friendship's state carries its facts: accepted iff accepted_at; blocked iff a blocker in the pair "
              "and a time; declined or canceled iff closed_at and a reason of that state.",
    scope="social.friendships, every row",
    counterexample="A blocked row without a blocker (nobody can unblock); accepted without a time.",
    db=("ck_friendships_status", "ck_friendships_pending_has_request", "ck_friendships_accepted_has_time",
        "ck_friendships_blocked_has_blocker", "ck_friendships_blocker_in_pair", "ck_friendships_closed_has_reason"),
    app="Every change is a declared transition of lifecycles.FRIENDSHIP (one conditional UPDATE); a refused one "
        "answers FRIENDSHIP_STATE_CONFLICT with current_status.",
    error_code="FRIENDSHIP_STATE_CONFLICT",
    concurrency="The pair's row FOR UPDATE, first in every friendship command.",
    detector="""
        SELECT id, status FROM social.friendships
         WHERE status NOT IN ('pending', 'accepted', 'declined', 'canceled', 'blocked')
            OR (status = 'pending' AND requested_at IS NULL)
            OR (status = 'accepted') <> (accepted_at IS NOT NULL)
            OR (status = 'blocked') <> (blocked_by IS NOT NULL AND blocked_at IS NOT NULL)
            OR (status IN ('declined', 'canceled')) <> (closed_at IS NOT NULL AND closed_reason IS NOT NULL)
    """,
)

# The CHECKs that let a detector find open friend_request and group_invitation messages through
# ix_inbox_messages_open_related (actionable, status pending or read; by related_type, related_id).
_OPEN_REQUESTS_INDEXED = _enforced("social.inbox_messages", constraints=(
    "ck_inbox_messages_requests_are_actionable", "ck_inbox_messages_related_type_matches"))

rule(
    "SOC-INV-06",
    statement="A pending friendship has exactly one open friend_request message, from its initiator to the other "
              "party; an open friend_request message belongs to a pending friendship its sender initiated.",
    scope="pending friendships; open (pending or read) friend_request messages",
    counterexample="B accepts on the friendships route and the inbox still offers Accept; A withdraws and B's "
                   "inbox still shows the request.",
    db=(),
    db_reason="a rule across two tables kept by the single command that moves both, under the friendship row lock; "
              "uq_inbox_messages_open_action keeps 'at most one'",
    app="request writes the message; accept, decline, cancel, block and account deletion close it in the same "
        "transaction; the inbox's answers run the friendship transition.",
    error_code=None,
    concurrency="Friendship row lock, then the message's conditional UPDATE.",
    # Open messages are read through ix_inbox_messages_open_related (open actionable messages by related object),
    # not by a scan of every message: the CHECKs that make a friend_request actionable and related to a
    # friendship are part of the detector, so the narrower predicate finds every row the rule is about.
    detector=f"""
        SELECT f.id, 'pending friendship without exactly one open request message' AS problem
          FROM social.friendships f
         WHERE f.status = 'pending'
           AND (SELECT count(*) FROM social.inbox_messages m
                 WHERE m.message_type = 'friend_request' AND m.related_id = f.id AND m.status IN ('pending', 'read')
                   AND m.sender_id = f.initiator_id
                   AND m.recipient_id = CASE WHEN f.initiator_id = f.user_low_id THEN f.user_high_id
                                             ELSE f.user_low_id END) <> 1
        UNION ALL
        SELECT m.id, 'open request message without its pending friendship' FROM social.inbox_messages m
          LEFT JOIN social.friendships f ON f.id = m.related_id
         WHERE m.related_type = 'friendship' AND m.actionable AND m.status IN ('pending', 'read')
           AND m.message_type = 'friend_request'
           AND (f.id IS NULL OR f.status <> 'pending' OR f.initiator_id <> m.sender_id)
        UNION ALL {_OPEN_REQUESTS_INDEXED}
    """,
)

rule(
    "SOC-INV-07",
    statement="Every active group has exactly one current (active or muted) member with role creator, and it is "
              "groups.owner_id; any group has at most one current creator.",
    scope="social.groups (active ones for 'exactly'), with their current members",
    counterexample="The creator leaves and nobody can archive the group or change roles; a hand-over promotes the "
                   "new creator and leaves the old one creator too.",
    db=(CURRENT_CREATOR_INDEX, *GROUP_CREATOR_TRIGGERS),
    app="Creation inserts group and creator together; hand-over promotes, demotes and moves owner_id in one "
        "transaction; the creator cannot leave or be removed (GROUP_CREATOR_CANNOT_LEAVE); account deletion hands "
        "over to the oldest admin, else the oldest member, else archives.",
    error_code="GROUP_CREATOR_CANNOT_LEAVE",
    concurrency=_GROUP_LOCK + " Deferred triggers check the rule at commit.",
    detector=f"""
        SELECT g.id AS group_id, 'active group without exactly one current creator' AS problem FROM social.groups g
         WHERE g.status = 'active'
           AND (SELECT count(*) FROM social.group_members m
                 WHERE m.group_id = g.id AND m.role = 'creator' AND m.status <> 'removed') <> 1
        UNION ALL
        SELECT g.id, 'owner_id is not the current creator' FROM social.groups g
          JOIN social.group_members m ON m.group_id = g.id AND m.role = 'creator' AND m.status <> 'removed'
         WHERE m.user_id <> g.owner_id
        UNION ALL {_trigger(GROUP_CREATOR_TRIGGERS[0], "social.groups")}
        UNION ALL {_trigger(GROUP_CREATOR_TRIGGERS[1], "social.group_members")}
    """,
)

rule(
    "SOC-INV-08",
    statement="At most one member row per (group, user), reused when someone rejoins; invited iff invited_by; "
              "removed iff removed_at and a removal reason.",
    scope="social.group_members, every row",
    counterexample="Someone accepts two invitations and holds two member rows with different roles.",
    db=(MEMBER_UNIQUE, "ck_group_members_role", "ck_group_members_join_source", "ck_group_members_invited_has_inviter",
        "ck_group_members_status", "ck_group_members_removed_has_time"),
    app="Join and accept check for a current row under the group lock (ALREADY_GROUP_MEMBER); a unique violation "
        "maps to the same code.",
    error_code="ALREADY_GROUP_MEMBER",
    concurrency=_GROUP_LOCK,
    detector="""
        SELECT id, 'member facts' AS problem FROM social.group_members
         WHERE (join_source = 'invited') <> (invited_by IS NOT NULL)
            OR (status = 'removed') <> (removed_at IS NOT NULL AND removal_reason IS NOT NULL)
        UNION ALL
        SELECT min(id::text)::uuid, 'two rows of one person' FROM social.group_members
         GROUP BY group_id, user_id HAVING count(*) > 1
    """,
)

rule(
    "SOC-INV-09",
    statement="An open group invitation names an active group its recipient is not a current member of; at most "
              "one open invitation per (group, recipient).",
    scope="open (pending or read) group_invitation messages",
    counterexample="The group is archived and the invitee still joins it; two admins invite the same person twice.",
    db=(OPEN_ACTION_INDEX,),
    app="invite checks under the group lock (GROUP_NOT_ACTIVE, ALREADY_GROUP_MEMBER, "
        "GROUP_INVITATION_ALREADY_PENDING); archive dismisses open invitations; joining dismisses the joiner's.",
    error_code="GROUP_INVITATION_ALREADY_PENDING",
    concurrency=_GROUP_LOCK,
    detector=f"""
        SELECT m.id AS message_id, g.status AS problem FROM social.inbox_messages m
          JOIN social.groups g ON g.id = m.related_id
         WHERE m.related_type = 'group' AND m.actionable AND m.status IN ('pending', 'read')
           AND m.message_type = 'group_invitation'
           AND (g.status <> 'active' OR EXISTS (SELECT 1 FROM social.group_members gm
                 WHERE gm.group_id = g.id AND gm.user_id = m.recipient_id AND gm.status <> 'removed'))
        UNION ALL {_OPEN_REQUESTS_INDEXED}
    """,
)

rule(
    "SOC-INV-10",
    statement="A schedule item ends at or after its start, within 366 days; its time zone is an IANA zone; its "
              "recurrence rule is NULL or an accepted RFC 5545 RRULE whose first occurrence is the start; "
              "series_end_at is end_at for a single item and the end of the last occurrence (NULL: unbounded) for "
              "a series.",
    scope="social.schedule_items, every row",
    counterexample="An item ending before it starts; FREQ=SECONDLY expanding into millions of occurrences; a stale "
                   "series_end_at hiding a series from window reads.",
    db=("ck_schedule_items_end_after_start", "ck_schedule_items_duration_bounded", "ck_schedule_items_timezone_shape",
        "ck_schedule_items_recurrence_shape", "ck_schedule_items_series_end"),
    app="recurrence.check_series validates the zone (zoneinfo) and the rule (dateutil; D-12) and computes "
        "series_end_at on every write that touches start, end, zone or rule (422 TIMEZONE_INVALID, "
        "RECURRENCE_RULE_INVALID with a reason, SCHEDULE_ITEM_INVALID).",
    error_code="RECURRENCE_RULE_INVALID",
    concurrency="Row-local; the item lock serialises edits.",
    # The shape is the CHECKs' (checked in the catalog); the zone's existence is not the database's (the zone
    # list changes with the server's tz data), so it is still read from every item: one scan, no join per row.
    detector=f"""
        SELECT i.id, 'unknown time zone' AS problem FROM social.schedule_items i
         WHERE NOT EXISTS (SELECT 1 FROM pg_timezone_names z WHERE z.name = i.timezone)
        UNION ALL {_enforced("social.schedule_items", constraints=(
            "ck_schedule_items_end_after_start", "ck_schedule_items_duration_bounded",
            "ck_schedule_items_timezone_shape", "ck_schedule_items_recurrence_shape", "ck_schedule_items_series_end"))}
    """,
)

rule(
    "SOC-INV-11",
    statement="One subscription per (item, subscriber); the subject is an account (user) or a group (group) by "
              "foreign key; permission is one of the canonical arrays [view], [view,invite], [view,edit], "
              "[view,invite,edit]; a group subscription is never pending; an item's owner is not subscribed to it.",
    scope="social.schedule_subscriptions, every row",
    counterexample='["edit","view","edit"]; ["invite"] without view; a user subscription naming a group id.',
    db=(SUBSCRIPTION_UNIQUE, "ck_schedule_subscriptions_permission_canonical",
        "ck_schedule_subscriptions_group_never_pending", "fk_schedule_subscriptions_subscriber_user_id_user_account",
        "fk_schedule_subscriptions_subscriber_group_id_groups", OWNER_NOT_SUBSCRIBED_TRIGGER, OWNER_FIXED_TRIGGER),
    app="The API canonicalises permission sets (PERMISSION_SET_INVALID), refuses a second live row "
        "(SUBSCRIPTION_EXISTS) and the owner (CANNOT_SUBSCRIBE_OWNER); re-sharing reuses the row. The triggers "
        "refuse an owner's user subscription and any change of an item's owner_id (no command changes it), so the "
        "detector reads the catalog, not every subscription joined with its item.",
    error_code="SUBSCRIPTION_EXISTS",
    concurrency=_ITEM_LOCK + " The unique index decides.",
    detector=f"""
        SELECT NULL::uuid AS id, NULL::text AS problem WHERE false
        UNION ALL {_trigger(OWNER_FIXED_TRIGGER, "social.schedule_items")}
        UNION ALL {_enforced("social.schedule_subscriptions", triggers=(OWNER_NOT_SUBSCRIBED_TRIGGER,), constraints=(
            "ck_schedule_subscriptions_permission_canonical", "ck_schedule_subscriptions_group_never_pending",
            "ck_schedule_subscriptions_subject_type", "fk_schedule_subscriptions_subscriber_user_id_user_account",
            "fk_schedule_subscriptions_subscriber_group_id_groups"), unique_indexes=(SUBSCRIPTION_UNIQUE,))}
        UNION ALL {_generated("subscriber_user_id", "social.schedule_subscriptions")}
        UNION ALL {_generated("subscriber_group_id", "social.schedule_subscriptions")}
    """,
)

rule(
    "SOC-INV-12",
    statement="A pending subscription (an offer to a user) has exactly one open actionable schedule_item_shared "
              "message to its subscriber; every open actionable offer message has its pending subscription.",
    scope="pending subscriptions; open actionable schedule_item_shared messages",
    counterexample="An editor withdraws an offer and the invitee still accepts it.",
    db=(),
    db_reason="a rule across two tables kept by the commands that move both under the item lock; "
              "uq_inbox_messages_open_action keeps 'at most one'",
    app="Offer writes both; withdraw, reject, accept, block, item deletion and account deletion move both.",
    error_code=None,
    concurrency=_ITEM_LOCK,
    detector="""
        SELECT s.id, 'pending subscription without exactly one open offer' AS problem
          FROM social.schedule_subscriptions s
         WHERE s.status = 'pending'
           AND (SELECT count(*) FROM social.inbox_messages m
                 WHERE m.message_type = 'schedule_item_shared' AND m.actionable AND m.status IN ('pending', 'read')
                   AND m.related_id = s.item_id AND m.recipient_id = s.subscriber_id) <> 1
        UNION ALL
        SELECT m.id, 'open offer without its pending subscription' FROM social.inbox_messages m
         WHERE m.message_type = 'schedule_item_shared' AND m.actionable AND m.status IN ('pending', 'read')
           AND NOT EXISTS (SELECT 1 FROM social.schedule_subscriptions s WHERE s.item_id = m.related_id
                            AND s.subscriber_id = m.recipient_id AND s.status = 'pending')
    """,
)

rule(
    "SOC-INV-13",
    statement="A user's permission on an item is, first match wins: the owner -> view+invite+edit; the user's own "
              "active or paused subscription -> its permission; the union over the item's group subscriptions to "
              "active groups the user is a current member of of permission ∩ the role default (creator "
              "view+invite+edit, admin view+invite, member view); else none. A write happens only if its writer "
              "holds the right when it commits.",
    scope="every command and read on schedule items and subscriptions, the ICS feed, todo sources, automation "
          "targets",
    counterexample="The owner revokes Eve's edit while Eve's PATCH is in flight and the item is changed by "
                   "someone who no longer may; a plain member's share hands the group creator edit.",
    db=(),
    db_reason="a decision across four tables at write time, serialised by locks; the SQL functions "
              "social.permission_bits and social.role_bits encode it once (the detector checks them)",
    app="items.decide locks the item, share-locks the granting groups, then computes the bits with "
        "queries.PERMISSION_SQL (reads use the same expression). 404 SCHEDULE_ITEM_NOT_FOUND without view, 403 "
        "SCHEDULE_ITEM_PERMISSION_DENIED without the right, 403 PERMISSION_EXCEEDS_GRANTOR above one's own.",
    error_code="SCHEDULE_ITEM_PERMISSION_DENIED",
    concurrency=_ITEM_LOCK + " Proven by the race 'revoke vs edit' (fails with the lock made a no-op).",
    detector="""
        SELECT t.p::text AS permission, t.r AS role, 'permission functions disagree with the spec table' AS problem
          FROM (VALUES ('["view"]'::jsonb, 'creator', 1), ('["view", "invite"]', 'creator', 3),
                       ('["view", "edit"]', 'creator', 5), ('["view", "invite", "edit"]', 'creator', 7),
                       ('["view", "invite", "edit"]', 'admin', 3), ('["view", "invite", "edit"]', 'member', 1),
                       ('["view", "edit"]', 'admin', 1), ('["view", "invite"]', 'member', 1)) AS t(p, r, expected)
         WHERE social.permission_bits(t.p) & social.role_bits(t.r) <> t.expected
    """,
)

rule(
    "SOC-INV-14",
    statement="An inbox message's state carries its facts: answered or dismissed iff acted_at, not pending iff "
              "read_at, accepted or rejected only if actionable, only the spec's three types actionable; terminal "
              "states are final.",
    scope="social.inbox_messages, every row",
    counterexample="An accepted request set back to pending and accepted again; a reminder 'accepted'.",
    db=(INBOX_TERMINAL_TRIGGER, "ck_inbox_messages_status", "ck_inbox_messages_acted_has_time",
        "ck_inbox_messages_read_has_time", "ck_inbox_messages_answer_needs_action", "ck_inbox_messages_actionable"),
    app="lifecycles.INBOX_MESSAGE transitions; INBOX_MESSAGE_ALREADY_ACTED, INBOX_MESSAGE_NOT_ACTIONABLE, "
        "INBOX_ACTION_REQUIRED.",
    error_code="INBOX_MESSAGE_ALREADY_ACTED",
    concurrency="Conditional UPDATE on status IN ('pending', 'read').",
    # Every fact is a CHECK or the trigger: the detector checks they are in force instead of reading every
    # message (the biggest social table: 500 a user in the bench data).
    detector=f"""
        SELECT NULL::uuid AS id, NULL::text AS problem WHERE false
        UNION ALL {_enforced("social.inbox_messages", constraints=(
            "ck_inbox_messages_status", "ck_inbox_messages_acted_has_time", "ck_inbox_messages_read_has_time",
            "ck_inbox_messages_answer_needs_action", "ck_inbox_messages_actionable"),
            triggers=(INBOX_TERMINAL_TRIGGER,))}
    """,
)

rule(
    "SOC-INV-15",
    statement="Accepting a message performs its linked action in the same transaction (the detector reads only links "
              "that have not moved since): friend_request -> the "
              "friendship accepted; group_invitation -> the recipient a current member; schedule_item_shared -> "
              "the recipient's subscription active. Accepting twice changes nothing (409).",
    scope="accepted actionable messages",
    counterexample="The message is marked accepted and the process dies before the membership is written; two taps "
                   "on Accept make two memberships.",
    db=(INBOX_ACCEPT_TRIGGER, OPEN_ACTION_INDEX, MEMBER_UNIQUE),
    app="inbox.answer locks the linked object, moves the message conditionally, then performs the linked "
        "transition.",
    error_code="INBOX_MESSAGE_ALREADY_ACTED",
    concurrency="Linked object lock, then the message's conditional UPDATE. Race test: accept || accept.",
    detector=f"""
        SELECT m.id, 'accepted request without friendship' AS problem FROM social.inbox_messages m
          JOIN social.friendships f ON f.id = m.related_id
         WHERE m.message_type = 'friend_request' AND m.status = 'accepted' AND f.updated_at < m.acted_at
           AND f.status <> 'accepted'
        UNION ALL
        SELECT m.id, 'accepted invitation without membership' FROM social.inbox_messages m
         WHERE m.message_type = 'group_invitation' AND m.status = 'accepted'
           AND NOT EXISTS (SELECT 1 FROM social.group_members gm WHERE gm.group_id = m.related_id
                            AND gm.user_id = m.recipient_id AND (gm.status <> 'removed' OR gm.updated_at >= m.acted_at))
        UNION ALL {_trigger(INBOX_ACCEPT_TRIGGER, "social.inbox_messages")}
    """,
)

rule(
    "SOC-INV-16",
    statement="A todo's state carries its facts (done iff completed_at); source_ids is an array of at most 20 "
              "distinct item ids; one todo per (owner, source item, occurrence start).",
    scope="social.todos, every row",
    counterexample="Extracting the same meeting twice gives two todos; completing this week's todo of a weekly "
                   "meeting completes every week's; completed_at left on a reopened todo.",
    db=(EXTRACTED_INDEX, "ck_todos_completed_has_time", "ck_todos_source_ids", "ck_todos_source_item_listed"),
    app="Extraction inserts ON CONFLICT DO NOTHING on the key, then reads the existing todos; status changes are "
        "transitions of lifecycles.TODO (completed_at set and cleared in the same UPDATE).",
    error_code="TODO_STATUS_TRANSITION_INVALID",
    concurrency="The unique index: concurrent extractions both succeed and see one todo.",
    # Every fact is the database's (three CHECKs, the unique index): the detector checks they are in force, and
    # that the CHECK's function still refuses what it must (a redefined function would let rows through), instead
    # of reading every todo, which took longer than the 30 s detector timeout at 20,000 accounts.
    detector=f"""
        SELECT NULL::uuid AS id, 'social.is_uuid_array accepts what it must refuse' AS problem
         WHERE to_regprocedure('social.is_uuid_array(jsonb,integer)') IS NULL
            OR social.is_uuid_array('["00000000-0000-0000-0000-000000000001"]', 20) IS NOT TRUE
            OR social.is_uuid_array('[]', 20) IS NOT TRUE
            OR social.is_uuid_array('["00000000-0000-0000-0000-000000000001", '
                                    '"00000000-0000-0000-0000-000000000001"]', 20) IS NOT FALSE
            OR social.is_uuid_array('["not-a-uuid"]', 20) IS NOT FALSE
            OR social.is_uuid_array('[1]', 20) IS NOT FALSE
            OR social.is_uuid_array('{{}}', 20) IS NOT FALSE
            OR social.is_uuid_array((SELECT jsonb_agg(gen_random_uuid()::text) FROM generate_series(1, 21)), 20)
               IS NOT FALSE
        UNION ALL {_enforced("social.todos", constraints=("ck_todos_completed_has_time", "ck_todos_source_ids",
                                                          "ck_todos_source_item_listed"),
                             unique_indexes=(EXTRACTED_INDEX,))}
    """,
)

rule(
    "SOC-INV-17",
    statement="No pending todo has a non-empty source_ids all of whose items are gone: deleting an item archives "
              "the pending todos it leaves without a source (done and canceled ones keep their status).",
    scope="pending todos with sources",
    counterexample="The meeting is deleted and 'Prepare slides' stays pending forever, linked to nothing.",
    db=("fk_todos_source_item_id_schedule_items",),
    app="items.delete_items archives, under the item lock, the pending todos whose only live source it is, then "
        "deletes the item (spec §B).",
    error_code=None,
    concurrency=_ITEM_LOCK,
    detector="""
        SELECT t.id AS todo_id FROM social.todos t
         WHERE t.status = 'pending' AND t.source_ids <> '[]'::jsonb
           AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(t.source_ids) AS e(item_id)
                             JOIN social.schedule_items i ON i.id = e.item_id::uuid)
    """,
)

rule(
    "SOC-INV-18",
    statement="Every live profile has a calendar feed id (22 URL-safe characters, unique), a deleted one none; the "
              "feed token itself is never stored (an HMAC of the id with the server key).",
    scope="social.profiles",
    counterexample="A deleted account's feed still serves its calendar; a database copy reveals every feed token.",
    db=("ck_profiles_calendar_feed", FEED_UNIQUE),
    app="Reset replaces the id (the old token dies at commit); the public route answers 404 "
        "CALENDAR_FEED_NOT_FOUND for any token that does not verify.",
    error_code="CALENDAR_FEED_NOT_FOUND",
    concurrency="Row-local.",
    detector="""
        SELECT id, 'feed id inconsistent with deletion' AS problem FROM social.profiles
         WHERE (deleted_at IS NULL) <> (calendar_feed_id IS NOT NULL)
    """,
)

rule(
    "SOC-INV-19",
    statement="An automation job is daily or weekly (weekly iff a weekday 1..7), at whole minutes, of a registered "
              "type, aimed at its owner (or an item, for reminders); next_run_at is set iff it is active.",
    scope="social.automation_jobs",
    counterexample="A weekly job without a weekday; an active job that never runs because next_run_at is NULL.",
    db=("ck_automation_jobs_job_type", "ck_automation_jobs_weekday_for_weekly", "ck_automation_jobs_whole_minutes",
        "ck_automation_jobs_next_run_when_active", "ck_automation_jobs_target"),
    app="The registry validates type, params and schedule (422 AUTOMATION_INVALID).",
    error_code="AUTOMATION_INVALID",
    concurrency="Row-local; the job row FOR UPDATE for changes.",
    detector="""
        SELECT id, status AS problem FROM social.automation_jobs
         WHERE (status = 'active') <> (next_run_at IS NOT NULL)
            OR (schedule_type = 'weekly') <> (schedule_weekday IS NOT NULL)
    """,
)

rule(
    "SOC-INV-20",
    statement="At most one run per (job, scheduled_at); a run's state carries its facts (running iff claimed with "
              "a lease; succeeded or failed iff finished); succeeded and failed are final.",
    scope="social.automation_runs",
    counterexample="Two schedulers materialise the same daily slot and the owner gets two digests; a failed run "
                   "set back to queued.",
    db=(RUN_SLOT_UNIQUE, RUN_TERMINAL_TRIGGER, "ck_automation_runs_running_is_claimed",
        "ck_automation_runs_finished_has_time", "ck_automation_runs_attempt"),
    app="Materialisation INSERT .. ON CONFLICT DO NOTHING; every change a conditional UPDATE on (status, attempt, "
        "claim token).",
    error_code=None,
    concurrency="Due jobs locked FOR UPDATE SKIP LOCKED by the scheduler; the unique slot decides. Race test: two "
                "schedulers at once.",
    # All the database's; runs are history (three a day per account in the bench's mix), so the detector checks
    # the guards are in force rather than grouping every run ever made.
    detector=f"""
        SELECT NULL::uuid AS id, NULL::text AS problem WHERE false
        UNION ALL {_enforced("social.automation_runs", constraints=(
            "ck_automation_runs_status", "ck_automation_runs_running_is_claimed",
            "ck_automation_runs_finished_has_time"), unique_indexes=(RUN_SLOT_UNIQUE,),
            triggers=(RUN_TERMINAL_TRIGGER,))}
    """,
)

rule(
    "SOC-INV-21",
    statement="A run's effects commit exactly when it is marked succeeded, once: every message a run writes names "
              "it and a dedup key, and exists only for a succeeded run.",
    scope="inbox messages with automation_run_id",
    counterexample="Two workers run one run and the owner gets two digests; a worker dies after writing the digest "
                   "but before marking the run, and the retry writes it again.",
    db=(DEDUP_INDEX,),
    app="The execution transaction locks the run row FOR UPDATE conditioned on its claim, writes the effects and "
        "the success together; a failure rolls the effects back.",
    error_code=None,
    concurrency="Claim FOR UPDATE SKIP LOCKED; execution holds the run row; recovery skips locked rows. Proven by "
                "tests/concurrency/test_social_races.py (workers at once; a killed worker).",
    # From the runs that are not succeeded (ix_automation_runs_status_scheduled_at; the status CHECK makes the
    # three states all of them) to their messages, not from every message a run ever wrote.
    detector=f"""
        SELECT m.id AS message_id, r.status AS problem FROM social.automation_runs r
          JOIN social.inbox_messages m ON m.automation_run_id = r.id
         WHERE r.status IN ('queued', 'running', 'failed')
        UNION ALL {_enforced("social.automation_runs", constraints=("ck_automation_runs_status",))}
    """,
)

rule(
    "SOC-INV-22",
    statement="A deleted account keeps nothing live in social: no pending, accepted or blocked friendship, no "
              "current membership, no owned item, no subscription, no inbox message, no todo, no automation.",
    scope="social rows of accounts in status deleted",
    counterexample="A deleted user still appears as a friend, still receives reminders, still owns a group.",
    db=(),
    db_reason="kept by the AccountDeleted handler in identity's transaction; writers share-lock the accounts they "
              "write for",
    app="accounts.account_deleted, table by table (design §7.1).",
    error_code=None,
    concurrency="Identity holds the account FOR UPDATE; social commands share-lock accounts first.",
    detector="""
        SELECT f.id, 'friendship' AS problem FROM social.friendships f
          JOIN iam.user_account u ON u.id IN (f.user_low_id, f.user_high_id)
         WHERE u.status = 'deleted' AND f.status IN ('pending', 'accepted', 'blocked')
        UNION ALL SELECT m.id, 'membership' FROM social.group_members m JOIN iam.user_account u ON u.id = m.user_id
         WHERE u.status = 'deleted' AND m.status <> 'removed'
        UNION ALL SELECT i.id, 'owned item' FROM social.schedule_items i
          JOIN iam.user_account u ON u.id = i.owner_id WHERE u.status = 'deleted'
        UNION ALL SELECT s.id, 'subscription' FROM social.schedule_subscriptions s
          JOIN iam.user_account u ON u.id = s.subscriber_user_id WHERE u.status = 'deleted'
        UNION ALL SELECT m.id, 'inbox message' FROM social.inbox_messages m
          JOIN iam.user_account u ON u.id = m.recipient_id WHERE u.status = 'deleted'
        UNION ALL SELECT t.id, 'todo' FROM social.todos t
          JOIN iam.user_account u ON u.id = t.owner_id WHERE u.status = 'deleted'
        UNION ALL SELECT j.id, 'automation' FROM social.automation_jobs j
          JOIN iam.user_account u ON u.id = j.owner_id WHERE u.status = 'deleted'
    """,
)

rule(
    "SOC-INV-23",
    statement="Social audit rows reference stable ids, never names, titles, contents or tokens.",
    scope="kernel.audit_log rows whose action starts with 'social.'",
    counterexample="An audit row carrying a meeting's title or a calendar feed token.",
    db=(),
    db_reason="the audit log is the kernel's; its writer refuses keys such as name and token, this detector "
              "checks the rows",
    app="The service passes only ids, states, roles, permission arrays and counts to audit.record.",
    error_code=None,
    concurrency="Not applicable: rows are only inserted.",
    detector=r"""
        SELECT id, action FROM kernel.audit_log
         WHERE action LIKE 'social.%'
           AND (subject_id !~ '^[0-9a-f-]{36}$'
                OR (actor_type = 'user' AND actor_id !~ '^[0-9a-f-]{36}$')
                OR data::text ~* '(token|name|email|title|description|content|username|bio|url)"\s*:'
                OR data::text ~ '@' OR data::text ~ 'scal_')
    """,
)
