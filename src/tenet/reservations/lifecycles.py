"""The declared state machines of orders, tasks and OPERA operations (INVARIANTS.md §2).

Every lifecycle change goes through `tenet.kernel.transitions.transition` (one conditional UPDATE on the
source states, and the version the caller saw where there is one). The database refuses undeclared status
pairs from any writer on its own (triggers `rsv_order_guard`, `rsv_task_guard`, `rsv_op_guard`).
`BLOCKED` is not a state: it is computed from the queue (RSV-INV-10) and never stored.
"""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

OPEN_ORDER_STATES = ("TEMPORARY", "ACTIVE")
OPEN_TASK_STATES = ("PENDING_CONFIRM", "READY", "EXECUTING")

ORDER = declare(
    "reservation.workflow_reservation_order",
    states=("TEMPORARY", "ACTIVE", "ENDED", "LOGIC_DELETED"),
    initial="TEMPORARY",
    terminal={"ENDED", "LOGIC_DELETED"},
    transitions=[
        Transition("activate", frozenset({"TEMPORARY"}), "ACTIVE",
                   "system (completion of a NEW_BOOKING task on the order)",
                   "back-fills the business key (spec §13); when that key is already ACTIVE the temporary "
                   "order is merged into that order instead (RSV-INV-19)"),
        Transition("end", frozenset({"TEMPORARY", "ACTIVE"}), "ENDED",
                   "reservation:order:manage; system when a CANCEL_BOOKING completes and nothing else is open",
                   "requires no open task (RSV-INV-09); frees the business key"),
        Transition("logic_delete", frozenset({"TEMPORARY", "ACTIVE"}), "LOGIC_DELETED",
                   "reservation:order:manage (with a reason); system: a move empties a temporary order, "
                   "or a back-fill merges it",
                   "requires no open task; the order never takes a task again"),
    ],
)

TASK = declare(
    "reservation.workflow_reservation_task",
    states=("PENDING_CONFIRM", "READY", "EXECUTING", "COMPLETED", "FAILED"),
    initial="PENDING_CONFIRM",
    terminal={"COMPLETED", "FAILED"},
    transitions=[
        Transition("save_draft", frozenset({"PENDING_CONFIRM"}), "PENDING_CONFIRM",
                   "reservation:task:edit, not blocked, If-Match", "writes the card's draft (validated leniently)"),
        Transition("convert", frozenset({"PENDING_CONFIRM"}), "PENDING_CONFIRM",
                   "reservation:task:edit, MANUAL_REVIEW only, not blocked, If-Match",
                   "gives the task and its card a queue card type; the draft is cleared"),
        Transition("move", frozenset({"PENDING_CONFIRM"}), "PENDING_CONFIRM",
                   "reservation:task:move, If-Match",
                   "appends the task to the target order's queue; an emptied temporary order is logic-deleted"),
        Transition("confirm", frozenset({"PENDING_CONFIRM"}), "READY",
                   "reservation:task:confirm, not blocked, If-Match",
                   "writes confirmed_payload_json, who and when (validated strictly)"),
        Transition("start_execution", frozenset({"READY"}), "EXECUTING",
                   "reservation:task:execute, not blocked", "plans the OPERA operations and runs them in order"),
        Transition("record_failure", frozenset({"EXECUTING"}), "EXECUTING",
                   "system (an attempt failed)", "last_failure_reason; the failed operation waits for a retry"),
        Transition("complete", frozenset({"EXECUTING"}), "COMPLETED",
                   "system (every operation succeeded; there is no user route to this)",
                   "NEW_BOOKING on a temporary order: back-fill; CANCEL_BOOKING: end the order if nothing is open"),
        Transition("abandon", frozenset({"PENDING_CONFIRM", "READY", "EXECUTING"}), "FAILED",
                   "reservation:order:manage, with a reason, If-Match",
                   "the task ends without OPERA; the queue moves on (FAILED counts as finished)"),
    ],
)

OPERATION = declare(
    "reservation.workflow_reservation_opera_operation",
    states=("PENDING", "SUCCEEDED", "FAILED"),
    initial="PENDING",
    terminal={"SUCCEEDED"},
    transitions=[
        Transition("attempt_succeeded", frozenset({"PENDING", "FAILED"}), "SUCCEEDED",
                   "system, during execute (PENDING) or a retry (FAILED)",
                   "a new attempt row; attempt_count + 1; last_attempt_id"),
        Transition("attempt_failed", frozenset({"PENDING", "FAILED"}), "FAILED",
                   "system, during execute or a retry",
                   "a new attempt row; attempt_count + 1; the task stays EXECUTING"),
    ],
)
