"""The declared state machines of meetings, series, templates and attendances (INVARIANTS.md §2).

Every lifecycle change goes through `tenet.kernel.transitions.transition`: one conditional UPDATE whose
WHERE names the transition's source states. The database refuses leaving a terminal state on its own
(triggers `*_terminal_is_final`, `attendances_voided_is_final`). SCHEDULED / IN_PROGRESS / COMPLETED are not
states: they are read from the clock (queries.clock_status).
"""

from __future__ import annotations

from tenet.kernel.transitions import Transition, declare

MANAGER = "MeetingManager / Administrator"

MEETING = declare(
    "meeting_attendance.meetings",
    states=("ACTIVE", "CANCELLED", "DELETED"),
    initial="ACTIVE",
    terminal={"DELETED"},
    transitions=[
        Transition("update", frozenset({"ACTIVE"}), "ACTIVE", MANAGER + "; series commands",
                   "a schedule change takes the meeting's exclusive advisory lock and recomputes lateness "
                   "(MA-INV-08, MA-INV-09); marks a series occurrence as an exception"),
        Transition("cancel", frozenset({"ACTIVE"}), "CANCELLED", MANAGER,
                   "check-ins are refused from then on (the same advisory lock serialises in-flight ones)"),
        Transition("delete", frozenset({"ACTIVE", "CANCELLED"}), "DELETED", MANAGER + "; series deletion",
                   "the meeting disappears (404); its attendances are kept"),
    ],
)

SERIES = declare(
    "meeting_attendance.meeting_series",
    states=("ACTIVE", "DELETED"),
    initial="ACTIVE",
    terminal={"DELETED"},
    transitions=[
        Transition("update", frozenset({"ACTIVE"}), "ACTIVE", MANAGER,
                   "fields and attendees reach future non-exception occurrences; COUNT/UNTIL extend or truncate; "
                   "reschedule moves occurrences from one on"),
        Transition("delete", frozenset({"ACTIVE"}), "DELETED", MANAGER,
                   "its meetings that had not started are DELETED in the same transaction (MA-INV-17)"),
    ],
)

TEMPLATE = declare(
    "meeting_attendance.templates",
    states=("ACTIVE", "DELETED"),
    initial="ACTIVE",
    terminal={"DELETED"},
    transitions=[
        Transition("update", frozenset({"ACTIVE"}), "ACTIVE", MANAGER),
        Transition("delete", frozenset({"ACTIVE"}), "DELETED", MANAGER, "meetings made from it are unchanged"),
    ],
)

ATTENDANCE = declare(
    "meeting_attendance.attendances",
    states=("PRESENT", "LATE", "EXCUSED", "VOIDED"),
    initial="PRESENT",
    terminal={"VOIDED"},
    transitions=[
        Transition("recompute_late", frozenset({"PRESENT"}), "LATE", "system (the meeting's start or grace changed)",
                   "CHECK_IN rows only, by trigger meetings_schedule_propagate (MA-INV-09)"),
        Transition("recompute_on_time", frozenset({"LATE"}), "PRESENT", "system (the meeting's start or grace changed)",
                   "CHECK_IN rows only, by trigger meetings_schedule_propagate (MA-INV-09)"),
        Transition("mark_present", frozenset({"LATE", "EXCUSED"}), "PRESENT", "attendance manager",
                   "status_source := MANUAL; correction row; audit ATTENDANCE_CORRECTED"),
        Transition("mark_late", frozenset({"PRESENT", "EXCUSED"}), "LATE", "attendance manager",
                   "status_source := MANUAL; correction row; audit ATTENDANCE_CORRECTED"),
        Transition("excuse", frozenset({"PRESENT", "LATE"}), "EXCUSED", "attendance manager",
                   "users only; note required; correction row; audit"),
        Transition("check_in_over_excuse", frozenset({"EXCUSED"}), "PRESENT", "the attendee (check-in)",
                   "status_source := CHECK_IN; the window trigger sets PRESENT or LATE (D-10)"),
        Transition("void", frozenset({"PRESENT", "LATE", "EXCUSED"}), "VOIDED", "attendance manager",
                   "the undo of a check-in or excuse; note required; frees person and device for a new row"),
    ],
)
