"""The declared state machines of social collaboration (INVARIANTS.md §2; design §4).

Every lifecycle change in the service goes through `tenet.kernel.transitions.transition`: one conditional
UPDATE whose WHERE names the transition's source states. The database refuses any change out of a terminal
state on its own (triggers `inbox_messages_terminal_is_final`, `automation_runs_terminal_is_final`).
"""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

T = Transition

FRIENDSHIP = declare(
    "social.friendships",
    states=("pending", "accepted", "declined", "canceled", "blocked"),
    initial="pending",
    terminal=set(),
    transitions=[
        T("re_request", frozenset({"declined", "canceled"}), "pending", "either party (the declined one after a "
          "cooldown)", "writes the recipient's friend_request message"),
        T("accept", frozenset({"pending"}), "accepted", "the recipient (also a crossed request, or the inbox)",
          "closes the request message as accepted"),
        T("decline", frozenset({"pending"}), "declined", "the recipient", "closes the message as rejected"),
        T("cancel", frozenset({"pending"}), "canceled", "the initiator", "closes the message as dismissed"),
        T("unfriend", frozenset({"accepted"}), "canceled", "either party"),
        T("block", frozenset({"pending", "accepted", "declined", "canceled"}), "blocked", "either party",
          "dismisses every open actionable message between the two"),
        T("unblock", frozenset({"blocked"}), "canceled", "the blocker only"),
        T("end", frozenset({"pending", "accepted", "blocked"}), "canceled", "system (account deleted)"),
    ],
)

GROUP = declare(
    "social.groups",
    states=("active", "archived"),
    initial="active",
    terminal=set(),
    transitions=[
        T("update", frozenset({"active"}), "active", "creator; admin (name, description)"),
        T("hand_over", frozenset({"active"}), "active", "creator; system (account deleted)",
          "owner_id := the new creator, in the transaction that swaps the roles (SOC-INV-07)"),
        T("archive", frozenset({"active"}), "archived", "creator; system (account deleted, nobody left)",
          "open invitations dismissed; group subscriptions stop granting"),
        T("unarchive", frozenset({"archived"}), "active", "creator"),
    ],
)

GROUP_MEMBER = declare(
    "social.group_members",
    states=("active", "muted", "removed"),
    initial="active",
    terminal=set(),
    transitions=[
        T("rejoin", frozenset({"removed"}), "active", "the invitee (inbox accept); a public group's former member "
          "who left"),
        T("change_role", frozenset({"active", "muted"}), "active", "creator", "the status is kept by the service"),
        T("mute", frozenset({"active"}), "muted", "the member self"),
        T("unmute", frozenset({"muted"}), "active", "the member self"),
        T("leave", frozenset({"active", "muted"}), "removed", "the member self (never the creator)"),
        T("remove", frozenset({"active", "muted"}), "removed", "creator (admins, members); admin (members); system"),
    ],
)

SCHEDULE_ITEM = declare(
    "social.schedule_items",
    states=("active", "completed", "canceled"),
    initial="active",
    terminal=set(),
    transitions=[
        T("update", frozenset({"active", "completed", "canceled"}), "active", "holders of edit",
          "fields and status in one conditional UPDATE (the target status is the PATCH's)"),
    ],
)

SUBSCRIPTION = declare(
    "social.schedule_subscriptions",
    states=("pending", "active", "paused", "unsubscribed"),
    initial="pending",
    terminal=set(),
    transitions=[
        T("reoffer", frozenset({"unsubscribed"}), "pending", "holders of invite", "a new actionable offer message"),
        T("reshare", frozenset({"unsubscribed"}), "active", "holders of invite who are current group members"),
        T("accept", frozenset({"pending"}), "active", "the invitee (inbox accept)"),
        T("reject", frozenset({"pending"}), "unsubscribed", "the invitee (inbox reject)"),
        T("withdraw", frozenset({"pending"}), "unsubscribed", "holders of edit, or the sharer"),
        T("pause", frozenset({"active"}), "paused", "the subscriber self"),
        T("resume", frozenset({"paused"}), "active", "the subscriber self"),
        T("revoke", frozenset({"active", "paused"}), "unsubscribed", "the subscriber self; holders of edit"),
        # Permission and notify-level changes keep the status (one transition per source state).
        T("change_pending", frozenset({"pending"}), "pending", "holders of edit (permission <= their own)"),
        T("change_active", frozenset({"active"}), "active", "holders of edit; the subscriber (notify level)"),
        T("change_paused", frozenset({"paused"}), "paused", "holders of edit; the subscriber (notify level)"),
    ],
)

INBOX_MESSAGE = declare(
    "social.inbox_messages",
    states=("pending", "read", "accepted", "rejected", "dismissed"),
    initial="pending",
    terminal={"accepted", "rejected", "dismissed"},
    transitions=[
        T("read", frozenset({"pending"}), "read", "the recipient"),
        T("accept", frozenset({"pending", "read"}), "accepted", "the recipient (actionable only); the linked "
          "object's command", "performs the linked action in the same transaction (SOC-INV-15)"),
        T("reject", frozenset({"pending", "read"}), "rejected", "the recipient (actionable only); the linked "
          "object's command"),
        T("dismiss", frozenset({"pending", "read"}), "dismissed", "the recipient (informational only); the linked "
          "object's command when it moved elsewhere"),
    ],
)

TODO = declare(
    "social.todos",
    states=("pending", "done", "canceled", "archived"),
    initial="pending",
    terminal=set(),
    transitions=[
        T("complete", frozenset({"pending"}), "done", "the owner", "completed_at := now"),
        T("reopen", frozenset({"done", "canceled", "archived"}), "pending", "the owner", "completed_at := NULL"),
        T("cancel", frozenset({"pending"}), "canceled", "the owner"),
        T("archive", frozenset({"pending"}), "archived", "the owner; system (source item deleted, SOC-INV-17)"),
    ],
)

AGENT = declare(
    "social.user_agents",
    states=("active", "paused", "migrating"),
    initial="active",
    terminal=set(),
    transitions=[
        T("pause", frozenset({"active"}), "paused", "the user"),
        T("resume", frozenset({"paused"}), "active", "the user"),
        T("start_migration", frozenset({"active", "paused"}), "migrating", "system (capability upgrade)"),
        T("finish_migration", frozenset({"migrating"}), "active", "system", "capability_version + 1"),
    ],
)

AUTOMATION_JOB = declare(
    "social.automation_jobs",
    states=("active", "disabled"),
    initial="active",
    terminal=set(),
    transitions=[
        T("enable", frozenset({"disabled"}), "active", "the owner", "next_run_at := the next slot after now"),
        T("disable", frozenset({"active"}), "disabled", "the owner; system (target gone or forbidden)",
          "next_run_at := NULL"),
    ],
)

AUTOMATION_RUN = declare(
    "social.automation_runs",
    states=("queued", "running", "succeeded", "failed"),
    initial="queued",
    terminal={"succeeded", "failed"},
    transitions=[
        T("claim", frozenset({"queued"}), "running", "a drainer (FOR UPDATE SKIP LOCKED, available_at <= now)",
          "attempt + 1, claim token, lease"),
        T("succeed", frozenset({"running"}), "succeeded", "the claimant, in the transaction of the run's effects"),
        T("retry", frozenset({"running"}), "queued", "the claimant after an error with attempts left; system "
          "(lease expired, worker lost)", "available_at := now + backoff(attempt)"),
        T("fail", frozenset({"running"}), "failed", "the claimant (attempts exhausted or a permanent error); "
          "system (worker lost on the last attempt)", "an automation_failed message to the owner"),
    ],
)
