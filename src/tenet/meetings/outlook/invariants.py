"""The Outlook sync's rules MA-INV-30..40 (docs/design/outlook.md §2, issue 17), each with its enforcement and
detector. MA-INV-38 (Tenet never writes to a mailbox) has no database object: its proof is `GraphClient`'s surface
(no write verb on an event path) and the emulator's request log in every scenario test."""

from __future__ import annotations

from tenet.kernel.invariants import register
from tenet.meetings.invariants import DOMAIN, _trigger_present
from tenet.meetings.outlook.models import (
    BINDING_EVENT_ACTIVE,
    BINDING_MEETING_ACTIVE,
    BINDING_SERIES_ACTIVE,
    BINDING_TARGET_CHECK,
    CURSOR_WINDOW_CHECK,
    GRAPH_MAX_SUBSCRIPTION_MINUTES,
    LINK_EXCLUSION_TRIGGER,
    LINK_OCCURRENCE_UNIQUE,
    LINK_SOURCE_TRIGGER,
    LINK_SYNC_FROM_TRIGGER,
    POLICY_RANGES,
    SUBSCRIPTION_ACTIVE,
    SUBSCRIPTION_LIFETIME_CHECK,
)

_S = "meeting_attendance"
_LIVE = "status IN ('PENDING', 'ACTIVE')"

register(
    id="MA-INV-30",
    domain=DOMAIN,
    statement="At most one live (PENDING or ACTIVE) binding per Graph event id (a single event or a series master).",
    scope="meeting_attendance.outlook_bindings",
    counterexample="Two managers bind the same Outlook series at once: every occurrence becomes two meetings and "
                   "check-ins split between them.",
    db=(BINDING_EVENT_ACTIVE,),
    app="POST /outlook/bindings pre-checks for the friendly 409 with the live binding's id; the partial unique "
        "index decides races with the same code (kernel.db_errors.add_unique).",
    error_code="OUTLOOK_EVENT_ALREADY_BOUND",
    concurrency="The unique index: of two concurrent inserts the second waits for the first and fails at commit.",
    detector=f"""
        SELECT graph_event_id, count(*) AS n FROM {_S}.outlook_bindings WHERE {_LIVE}
         GROUP BY graph_event_id HAVING count(*) > 1
    """,  # noqa: S608  (constants of this module)
)

register(
    id="MA-INV-31",
    domain=DOMAIN,
    statement="A binding's target matches its kind (SINGLE names a meeting, SERIES a series, never both; an ACTIVE "
              "binding has one); a meeting or series is the target of at most one live binding.",
    scope="meeting_attendance.outlook_bindings",
    counterexample="A meeting kept in step by two Outlook events: each sync undoes the other's title and time.",
    db=(BINDING_TARGET_CHECK, "ck_outlook_bindings_active_has_target", BINDING_MEETING_ACTIVE, BINDING_SERIES_ACTIVE),
    app="The first sync sets the target in the transaction that activates the binding.",
    error_code="OUTLOOK_TARGET_ALREADY_BOUND",
    concurrency="Single-row CHECKs; partial unique indexes for the targets.",
    detector=f"""
        SELECT id::text, 'target does not match kind' AS why FROM {_S}.outlook_bindings
         WHERE NOT ((kind = 'SINGLE' AND series_id IS NULL) OR (kind = 'SERIES' AND meeting_id IS NULL))
            OR (status = 'ACTIVE' AND meeting_id IS NULL AND series_id IS NULL)
        UNION ALL
        SELECT meeting_id, 'meeting bound twice' FROM {_S}.outlook_bindings
         WHERE {_LIVE} AND meeting_id IS NOT NULL GROUP BY meeting_id HAVING count(*) > 1
        UNION ALL
        SELECT series_id::text, 'series bound twice' FROM {_S}.outlook_bindings
         WHERE {_LIVE} AND series_id IS NOT NULL GROUP BY series_id HAVING count(*) > 1
    """,  # noqa: S608
)

register(
    id="MA-INV-32",
    domain=DOMAIN,
    statement="The sync writes no occurrence that starts before its binding's sync_from.",
    scope="meeting_attendance.outlook_event_links",
    counterexample="Binding a five-year-old series rewrites last year's meetings and their attendance reports.",
    db=(LINK_SYNC_FROM_TRIGGER,),
    app="The sync skips occurrences before sync_from (counted `skipped`) before it writes anything.",
    error_code=None,
    concurrency="The trigger reads the binding FOR SHARE: a takeover moving sync_from waits for the write or is "
                "seen by it.",
    detector=f"""
        SELECT l.meeting_id, l.binding_id::text FROM {_S}.outlook_event_links l
          JOIN {_S}.outlook_bindings b ON b.id = l.binding_id
         WHERE l.original_start < b.sync_from AND l.last_synced_at > b.updated_at
        UNION ALL
        SELECT x.parent, x.why FROM ({_trigger_present('outlook_event_links', LINK_SYNC_FROM_TRIGGER)}) x(parent, why)
    """,  # noqa: S608
)

register(
    id="MA-INV-33",
    domain=DOMAIN,
    statement="An excluded occurrence is never written by the sync after its exclusion, even when it later becomes "
              "an exception in Outlook.",
    scope="meeting_attendance.outlook_exclusions, outlook_event_links",
    counterexample="A manager excludes the holiday occurrence; Outlook moves it, the sync brings it back.",
    db=(LINK_EXCLUSION_TRIGGER, "pk_outlook_exclusions"),
    app="Delta and reconciliation read the binding's exclusions before any write (counted `excluded`).",
    error_code=None,
    concurrency="An exclusion locks the binding FOR UPDATE; the sync's trigger reads it FOR SHARE.",
    detector=f"""
        SELECT l.meeting_id, l.binding_id::text FROM {_S}.outlook_event_links l
          JOIN {_S}.outlook_exclusions e ON e.binding_id = l.binding_id AND e.original_start = l.original_start
         WHERE l.last_synced_at > e.created_at
        UNION ALL
        SELECT x.parent, x.why FROM ({_trigger_present('outlook_event_links', LINK_EXCLUSION_TRIGGER)}) x(parent, why)
    """,  # noqa: S608
)

register(
    id="MA-INV-34",
    domain=DOMAIN,
    statement="An occurrence of a bound series is mirrored by at most one meeting: links are unique by "
              "(binding, original start), not by occurrence id (ids change when a series is rescheduled).",
    scope="meeting_attendance.outlook_event_links",
    counterexample="Outlook reschedules the series, every occurrence gets a new id, and the sync creates a second "
                   "meeting for each.",
    db=(LINK_OCCURRENCE_UNIQUE, "pk_outlook_event_links"),
    app="The sync looks occurrences up by (binding, original start).",
    error_code=None,
    concurrency="The unique index; one round per mailbox at a time (job lock).",
    detector=f"""
        SELECT binding_id::text, original_start FROM {_S}.outlook_event_links
         GROUP BY binding_id, original_start HAVING count(*) > 1
    """,  # noqa: S608
)

register(
    id="MA-INV-35",
    domain=DOMAIN,
    statement="A sync writes only for the binding's current source: a link's mailbox is its binding's, checked "
              "under a share lock of the binding row, and a released binding gets no writes.",
    scope="meeting_attendance.outlook_event_links, outlook_bindings",
    counterexample="A takeover moves a series to a new mailbox while the old mailbox's round is running; the round "
                   "writes the old organiser's version over the new one after the takeover.",
    db=(LINK_SOURCE_TRIGGER,),
    app="The round of the old source stops at the refusal (counted `superseded`).",
    error_code=None,
    concurrency="The trigger's SELECT ... FOR SHARE of the binding conflicts with the takeover's FOR UPDATE: one "
                "waits, then sees the other.",
    detector=f"""
        SELECT l.meeting_id, l.binding_id::text FROM {_S}.outlook_event_links l
          JOIN {_S}.outlook_bindings b ON b.id = l.binding_id
         WHERE l.mailbox_id <> b.mailbox_id AND l.last_synced_at > b.updated_at
        UNION ALL
        SELECT x.parent, x.why FROM ({_trigger_present('outlook_event_links', LINK_SOURCE_TRIGGER)}) x(parent, why)
    """,  # noqa: S608
)

register(
    id="MA-INV-36",
    domain=DOMAIN,
    statement=f"At most one ACTIVE subscription per mailbox; its expiry lies after its creation and within Graph's "
              f"limit ({GRAPH_MAX_SUBSCRIPTION_MINUTES} minutes) of its last renewal.",
    scope="meeting_attendance.outlook_subscriptions",
    counterexample="Two workers each create a subscription for a mailbox: every change is notified twice forever, "
                   "and one of them is never renewed.",
    db=(SUBSCRIPTION_ACTIVE, SUBSCRIPTION_LIFETIME_CHECK),
    app="The subscriptions job works per mailbox under the mailbox's job lock and asks Graph for the policy's "
        "lifetime (45-4,229 minutes).",
    error_code=None,
    concurrency="The partial unique index; the per-mailbox job lock.",
    detector=f"""
        SELECT mailbox_id::text, count(*)::text AS why FROM {_S}.outlook_subscriptions WHERE status = 'ACTIVE'
         GROUP BY mailbox_id HAVING count(*) > 1
        UNION ALL
        SELECT id::text, 'expiry out of range' FROM {_S}.outlook_subscriptions
         WHERE expires_at <= created_at OR expires_at > greatest(created_at, renewed_at, reauthorized_at)
               + interval '{GRAPH_MAX_SUBSCRIPTION_MINUTES} minutes'
    """,  # noqa: S608
)

register(
    id="MA-INV-37",
    domain=DOMAIN,
    statement="A delta cursor moves only with what it covered: the next/delta link a page yields is stored in the "
              "transaction that applied that page, and a cursor with a link has its window.",
    scope="meeting_attendance.outlook_delta_cursors",
    counterexample="The worker stores the delta link, then dies before applying the page: the changes on it are "
                   "never seen again.",
    db=(CURSOR_WINDOW_CHECK, "ck_outlook_delta_cursors_window_order"),
    app="One unit of work per page: candidates, bound changes and the cursor together.",
    error_code=None,
    concurrency="The per-mailbox job lock (one round at a time).",
    detector=f"""
        SELECT mailbox_id::text FROM {_S}.outlook_delta_cursors
         WHERE (delta_link IS NOT NULL OR next_link IS NOT NULL) AND (window_start IS NULL OR window_end IS NULL)
    """,  # noqa: S608
)

register(
    id="MA-INV-38",
    domain=DOMAIN,
    statement="Tenet never writes to a mailbox: no POST, PUT, PATCH or DELETE on /users/*/events*. The only writes "
              "it sends to Graph are its own subscriptions.",
    scope="tenet.meetings.outlook.graph.GraphClient (every request to Graph)",
    counterexample="A sync bug 'corrects' an organiser's meeting in Outlook, or deletes it.",
    db=(),
    db_reason="A rule about requests to Graph, not rows: GraphClient has no method that sends a write verb to an "
              "event path (it refuses one before sending), and every scenario test asserts the emulator's log "
              "holds no write to events.",
    app="GraphClient.get refuses any path but reads; writes exist only for /subscriptions.",
    error_code=None,
    concurrency="None needed.",
    detector="SELECT 1 AS never WHERE false",
)

_RANGES = " OR ".join(f"{column} NOT BETWEEN {low} AND {high}" for column, (low, high) in POLICY_RANGES.items())

register(
    id="MA-INV-39",
    domain=DOMAIN,
    statement="Policy values lie in their ranges: subscription lifetime 45-4,229 minutes, renewal margin below the "
              "lifetime, window back 0-365 days, ahead 1-730, batch 10-1,000, concurrency 1-4, attempts 1-20, "
              "retry base 1-300 s; one policy row.",
    scope="meeting_attendance.outlook_policy",
    counterexample="A lifetime of 20,000 minutes: Graph refuses every subscription and the sync silently stops.",
    db=(*(f"ck_outlook_policy_{column}_range" for column in POLICY_RANGES), "ck_outlook_policy_single_row",
        "ck_outlook_policy_margin_below_lifetime"),
    app="PUT /outlook/settings validates every field (422 OUTLOOK_POLICY_INVALID naming them) before the UPDATE; "
        "the CHECKs answer the same code.",
    error_code="OUTLOOK_POLICY_INVALID",
    concurrency="If-Match: the UPDATE is conditional on the version read (412 otherwise).",
    detector=f"""
        SELECT id FROM {_S}.outlook_policy
         WHERE id <> 1 OR renewal_margin_minutes >= subscription_lifetime_minutes OR {_RANGES}
        UNION ALL
        SELECT NULL WHERE NOT EXISTS (SELECT 1 FROM {_S}.outlook_policy)
    """,  # noqa: S608
)

register(
    id="MA-INV-40",
    domain=DOMAIN,
    statement="Every binding, takeover, release, exclusion, mailbox change, policy change and clean-up truncation "
              "is audited in the same transaction.",
    scope="meeting_attendance.outlook_* and audit_logs",
    counterexample="A series stops being managed and nobody can tell who released it or when.",
    db=(),
    db_reason="The audit row is written by the command in its own transaction; the detector compares the rows with "
              "the audit log.",
    app="Each command calls meetings.audit.record before it returns.",
    error_code=None,
    concurrency="Same transaction as the change.",
    detector=f"""
        SELECT 'mailbox' AS kind, m.id::text FROM {_S}.outlook_mailboxes m
         WHERE NOT EXISTS (SELECT 1 FROM {_S}.audit_logs a WHERE a.resource = 'OUTLOOK_MAILBOX'
                              AND a.resource_id = m.id::text AND a.action = 'OUTLOOK_MAILBOX_ADDED')
        UNION ALL
        SELECT 'binding', b.id::text FROM {_S}.outlook_bindings b
         WHERE NOT EXISTS (SELECT 1 FROM {_S}.audit_logs a WHERE a.resource = 'OUTLOOK_BINDING'
                              AND a.resource_id = b.id::text AND a.action = 'OUTLOOK_BINDING_CREATED')
        UNION ALL
        SELECT 'release', b.id::text FROM {_S}.outlook_bindings b
         WHERE b.status = 'RELEASED' AND NOT EXISTS (
               SELECT 1 FROM {_S}.audit_logs a WHERE a.resource = 'OUTLOOK_BINDING'
                  AND a.resource_id = b.id::text AND a.action = 'OUTLOOK_BINDING_RELEASED')
        UNION ALL
        SELECT 'exclusion', e.binding_id::text FROM {_S}.outlook_exclusions e
         WHERE NOT EXISTS (SELECT 1 FROM {_S}.audit_logs a WHERE a.resource = 'OUTLOOK_BINDING'
                              AND a.resource_id = e.binding_id::text AND a.action = 'OUTLOOK_EXCLUSION_ADDED'
                              AND a.occurred_at = e.created_at)
        UNION ALL
        SELECT 'policy', p.id::text FROM {_S}.outlook_policy p
         WHERE p.version > 1 AND NOT EXISTS (SELECT 1 FROM {_S}.audit_logs a WHERE a.resource = 'OUTLOOK_POLICY'
                                                AND a.action = 'OUTLOOK_POLICY_UPDATED'
                                                AND (a.changes -> 'after' ->> 'version')::int = p.version)
    """,  # noqa: S608
)
