"""The Outlook sync's state machines (docs/design/outlook.md §6). Every change goes through
`tenet.kernel.transitions.transition`: one conditional UPDATE naming the source states."""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

ADMIN = "Administrator / MeetingManager (meeting:outlook:manage)"
WORKER = "the sync worker"

MAILBOX = declare(
    "meeting_attendance.outlook_mailboxes",
    states=("PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID", "DISABLED"),
    initial="PENDING",
    terminal={"DISABLED"},
    transitions=[
        Transition("verified", frozenset({"PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID"}), "OK",
                   "the access check (adding, resync) or a round that succeeded", "the last error is cleared"),
        Transition("denied", frozenset({"PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID"}), "ACCESS_DENIED",
                   "the access check or a round answered 403 ErrorAccessDenied",
                   "Graph's code, request-id and a hint stored; the worker stops until an operator resyncs"),
        Transition("invalid", frozenset({"PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID"}), "INVALID",
                   "the access check found no such mailbox (404 / MailboxNotEnabledForRESTAPI)",
                   "Graph's code, request-id and a hint stored; no retries"),
        Transition("recheck", frozenset({"ACCESS_DENIED", "INVALID"}), "PENDING",
                   ADMIN + " (POST /outlook/mailboxes/{id}/resync)", "the worker checks access again"),
        Transition("degraded", frozenset({"OK", "DEGRADED"}), "DEGRADED", WORKER,
                   "throttled or failing rounds; the error is stored"),
        Transition("disable", frozenset({"PENDING", "OK", "DEGRADED", "ACCESS_DENIED", "INVALID"}), "DISABLED",
                   ADMIN, "its subscription is deleted; its address may be added again"),
    ],
)

SUBSCRIPTION = declare(
    "meeting_attendance.outlook_subscriptions",
    states=("ACTIVE", "REMOVED", "EXPIRED", "DELETED"),
    initial="ACTIVE",
    terminal={"REMOVED", "EXPIRED", "DELETED"},
    transitions=[
        Transition("renew", frozenset({"ACTIVE"}), "ACTIVE", WORKER, "expiry moved (PATCH) or reauthorized"),
        Transition("removed", frozenset({"ACTIVE"}), "REMOVED", WORKER,
                   "subscriptionRemoved, or 404 on renewal: a new row is made, then a delta pass catches up"),
        Transition("expired", frozenset({"ACTIVE"}), "EXPIRED", WORKER, "passed its expiry unrenewed: recreated"),
        Transition("delete", frozenset({"ACTIVE"}), "DELETED", ADMIN + "; the mailbox disabled",
                   "DELETE /subscriptions/{id} sent to Graph"),
    ],
)

BINDING = declare(
    "meeting_attendance.outlook_bindings",
    states=("PENDING", "ACTIVE", "RELEASED"),
    initial="PENDING",
    terminal={"RELEASED"},
    transitions=[
        Transition("activate", frozenset({"PENDING"}), "ACTIVE", WORKER,
                   "the first sync wrote its meeting or series (target set)"),
        Transition("takeover", frozenset({"ACTIVE"}), "ACTIVE", ADMIN,
                   "administrator and source mailbox switch together, sync_from moves, audited (MA-INV-35, 40)"),
        Transition("takeover_pending", frozenset({"PENDING"}), "PENDING", ADMIN,
                   "the same, before the first sync wrote the target"),
        Transition("release", frozenset({"PENDING", "ACTIVE"}), "RELEASED", ADMIN,
                   "meetings stay as they are, unmanaged; audited"),
    ],
)

SYNC_RUN = declare(
    "meeting_attendance.outlook_sync_runs",
    states=("RUNNING", "DONE", "FAILED"),
    initial="RUNNING",
    terminal={"DONE", "FAILED"},
    transitions=[
        Transition("finish", frozenset({"RUNNING"}), "DONE", WORKER, "counts by kind recorded"),
        Transition("fail", frozenset({"RUNNING"}), "FAILED", WORKER, "Graph's code and request-id recorded"),
    ],
)
