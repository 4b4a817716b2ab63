"""Errors in words: a service's stable error code becomes a sentence on the page, in the viewer's language, next to
the field it concerns. A code with no sentence here is shown with the general one and its code (never a stack trace
or a database message)."""

from __future__ import annotations

from tenet.web.i18n import N_

SENTENCES: dict[str, str] = {
    "INVALID_CREDENTIALS": N_("The email or the password is not right."),
    "RATE_LIMITED": N_("Too many attempts. Wait a few minutes, then try again."),
    "PERMISSION_DENIED": N_("Your roles do not allow this."),
    "NOT_FOUND": N_("This page does not exist, or you may not see it."),
    "ROUTE_NOT_FOUND": N_("This page does not exist, or you may not see it."),
    "VALIDATION_FAILED": N_("Some of what you entered is not valid."),
    "PRECONDITION_FAILED": N_("Someone else changed this in the meantime. Here is what it is now; "
                              "make your change again if it is still needed."),
    "VERSION_CONFLICT": N_("Someone else changed this in the meantime. Here is what it is now; "
                           "make your change again if it is still needed."),
    "SERVICE_UNAVAILABLE": N_("The service is unavailable for a moment. Try again shortly."),
    "CSRF_REFUSED": N_("This form is out of date or did not come from this site. Reload the page and try again."),
    "ACCOUNT_NOT_ACTIVE": N_("This person's account is disabled or deleted."),
    "MEETING_NOT_FOUND": N_("This meeting does not exist, or you may not see it."),
    "MEETING_CANCELLED": N_("The meeting is cancelled."),
    "MEETING_ACTION_FORBIDDEN": N_("You may not do this for this meeting."),
    "MEETING_TIME_INVALID": N_("These times are not valid: an end must come after its start, and every date must "
                               "lie between 1900 and 2199."),
    "TIMEZONE_INVALID": N_("This is not a time zone this server knows (use a name such as Asia/Shanghai)."),
    "ATTENDANCE_NOTE_REQUIRED": N_("Give a reason to excuse someone or to undo a check-in."),
    "ATTENDANCE_EXISTS": N_("This person checked in meanwhile: change that attendance instead."),
    "ATTENDANCE_VOIDED": N_("This check-in was undone already."),
    "ATTENDANCE_NOT_FOUND": N_("This attendance does not exist any more."),
    "ATTENDANCE_STATUS_INVALID": N_("This attendance cannot take that status."),
    "RECURRENCE_INVALID": N_("This repetition gives no meeting: choose at least one day and an end after the start."),
    "RECURRENCE_TOO_LONG": N_("This repetition gives too many meetings or runs too long; end it sooner."),
    "SERIES_NOT_FOUND": N_("This series does not exist, or you may not see it."),
    "SERIES_OCCURRENCE_NOT_FOUND": N_("This meeting is not (any more) an occurrence of the series."),
    "SERIES_OCCURRENCE_STARTED": N_("This occurrence has started already: choose a later one."),
    "ATTENDEE_NOT_FOUND": N_("This person has no account."),
    "REPORT_RANGE_INVALID": N_("The dates of the range are not valid."),
    "INVALID_CURSOR": N_("This page of the list is out of date; start from the first page."),
    "UPLOAD_TASK_NOT_OWNED": N_("You have no upload task on this agenda item."),
    "ATTACHMENT_MIME_NOT_ALLOWED": N_("This type of file is not accepted."),
    "ATTACHMENT_MIME_MISMATCH": N_("The file's content does not match its name's type."),
    "ATTACHMENT_TOO_LARGE": N_("The file is larger than the upload limit."),
    "ATTACHMENT_UPLOAD_MALFORMED": N_("The upload did not arrive whole; try again."),
    "OUTLOOK_SYNC_OFF": N_("The Outlook sync is off: the Graph credentials are not set on the server."),
    "OUTLOOK_POLICY_INVALID": N_("One of the sync settings is out of its range."),
    "OUTLOOK_MAILBOX_NOT_FOUND": N_("This mailbox is not a source (any more)."),
    "OUTLOOK_MAILBOX_EXISTS": N_("This mailbox is already a source."),
    "OUTLOOK_MAILBOX_ADDRESS_INVALID": N_("This is not a mailbox address."),
    "OUTLOOK_MAILBOX_DISABLED": N_("This mailbox is disabled; add it again to read it."),
    "OUTLOOK_GRAPH_UNAVAILABLE": N_("Microsoft Graph did not answer properly; nothing was stored. Try again shortly."),
    "OUTLOOK_EVENT_ALREADY_BOUND": N_("Someone already binds this Outlook event; take that binding over instead."),
    "OUTLOOK_TARGET_ALREADY_BOUND": N_("This meeting or series is already kept in step with another Outlook event."),
    "OUTLOOK_MANAGED": N_("Outlook manages this: change it in Outlook, or release its binding first."),
    "OUTLOOK_CANDIDATE_NOT_FOUND": N_("This event is not in that mailbox's pool (any more)."),
    "OUTLOOK_BINDING_NOT_FOUND": N_("This binding does not exist."),
    "OUTLOOK_BINDING_RELEASED": N_("This binding is released already."),
    "OUTLOOK_EXCLUSION_NOT_SERIES": N_("Only occurrences of a bound series can be excluded."),
    "OUTLOOK_EXCLUSION_EXISTS": N_("This occurrence is excluded already."),
    "OUTLOOK_EXCLUSION_NOT_FOUND": N_("This occurrence is not excluded."),
    "OUTLOOK_MAILBOX_NOT_READABLE": N_("Microsoft refuses Tenet this mailbox, or does not know it: it cannot be a "
                                       "source until a resync finds it readable."),
    "OUTLOOK_TAKEOVER_COPY_NOT_FOUND": N_("Tenet found no copy of this meeting in that mailbox (or several): enter "
                                          "the event's id in that mailbox."),
    "OUTLOOK_TAKEOVER_KIND_MISMATCH": N_("That event is a single event where the binding keeps a series, or the "
                                         "reverse."),
    # The reservation desk (issue 19)
    "HOTEL_NOT_FOUND": N_("This hotel does not exist, or you may not see it."),
    "HOTEL_ALREADY_EXISTS": N_("This hotel is registered already."),
    "HOTEL_STAFF_NOT_FOUND": N_("This person is not assigned to this hotel."),
    "ORDER_NOT_FOUND": N_("This order does not exist, or you may not see it."),
    "ORDER_NOT_OPEN": N_("This order is closed already."),
    "ORDER_HAS_UNFINISHED_TASKS": N_("This order still has open tasks: finish or abandon them first."),
    "ORDER_NOT_ACCEPTING_TASKS": N_("This order takes no more tasks."),
    "ORDER_BUSY": N_("The order is busy with another change; try again in a moment."),
    "TASK_NOT_FOUND": N_("This task does not exist, or you may not see it."),
    "TASK_NOT_EDITABLE": N_("This task can no longer be changed in its current state."),
    "TASK_BLOCKED": N_("An earlier task of this order must be finished first."),
    "TASK_NOT_READY": N_("This task is not ready to execute."),
    "TASK_NOT_MOVABLE": N_("This task cannot be moved now."),
    "TASK_MOVE_CROSS_HOTEL": N_("A task can only move to an order of its own hotel."),
    "TASK_NOT_CONVERTIBLE": N_("Only a manual review waiting for confirmation can be converted."),
    "TASK_ALREADY_FINISHED": N_("This task is finished already."),
    "TASK_CARD_PAYLOAD_INVALID": N_("Some fields of the card are not valid; see the fields marked in red."),
    "OPERATION_NOT_FOUND": N_("This operation does not exist, or you may not see it."),
    "OPERATION_NOT_FAILED": N_("Only a failed operation can be retried."),
    "PRECONDITION_REQUIRED": N_("This form is incomplete; reload the page and try again."),
    # A meeting's files (issue 18)
    "ATTACHMENT_NOT_FOUND": N_("This file does not exist (any more), or you may not see it."),
    "ATTACHMENT_NOT_OWN": N_("Only the person who uploaded this file, or a manager of the meeting, may delete it."),
    "ATTACHMENT_CATEGORY_INVALID": N_("Choose one of the listed categories."),
    "ATTACHMENT_NOT_DELETED": N_("This file is not deleted."),
    "ATTACHMENT_RESTORE_WINDOW_PASSED": N_("This file was deleted too long ago to be restored."),
    "ATTACHMENT_PARENT_DELETED": N_("The agenda item of this file is deleted; restore it first."),
    # The agenda editor (issue 18)
    "AGENDA_SECTION_NOT_FOUND": N_("This section of the agenda does not exist (any more)."),
    "AGENDA_ITEM_NOT_FOUND": N_("This item of the agenda does not exist (any more)."),
    "AGENDA_ORDER_MISMATCH": N_("Someone else changed the agenda in the meantime. Here is what it is now; "
                                "move the item again if it is still needed."),
    "PRESENTER_NOT_FOUND": N_("The presenter must be a person with an active account."),
    "UPLOAD_TASK_NOT_FOUND": N_("This upload task does not exist (any more)."),
    "UPLOAD_TASK_NOT_PENDING": N_("This upload task is no longer waiting for an upload."),
    "UPLOAD_TASK_ALREADY_PENDING": N_("This person already has an upload task waiting on this item."),
    "UPLOAD_TASK_ASSIGNEE_INVALID": N_("Only an active participant of the meeting can be given an upload task."),
    # Password reset (issue 20)
    "RESET_TOKEN_INVALID": N_("This link does not work any more: it was used, it expired, or the password was "
                              "set meanwhile. Ask for a new link."),
    "PASSWORD_TOO_WEAK": N_("This password is too weak: use at least 10 characters, and not your email address."),
    "PASSWORDS_DIFFER": N_("The two passwords differ: type the same password twice."),
    # --- admin ---
    "LAST_ADMINISTRATOR": N_("This is the last active administrator: give the role to someone else first."),
    "USER_NOT_FOUND": N_("There is no account with this email."),
}
GENERAL = N_("The request was refused.")


def sentence(code: str) -> str:
    """The msgid of the sentence for `code` (translate it where it is shown)."""
    return SENTENCES.get(code, GENERAL)
