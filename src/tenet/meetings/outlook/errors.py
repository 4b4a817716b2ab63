"""Stable error codes of the Outlook sync (issue 17; docs/design/outlook.md §2, §7). Values never change.

Problem documents carry ids, states and Graph's own code and request-id, never a secret or a token."""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError


class OutlookErrorCode(StrEnum):
    OUTLOOK_SYNC_OFF = "OUTLOOK_SYNC_OFF"
    OUTLOOK_POLICY_INVALID = "OUTLOOK_POLICY_INVALID"
    OUTLOOK_MAILBOX_NOT_FOUND = "OUTLOOK_MAILBOX_NOT_FOUND"
    OUTLOOK_MAILBOX_EXISTS = "OUTLOOK_MAILBOX_EXISTS"
    OUTLOOK_MAILBOX_ADDRESS_INVALID = "OUTLOOK_MAILBOX_ADDRESS_INVALID"
    OUTLOOK_MAILBOX_DISABLED = "OUTLOOK_MAILBOX_DISABLED"
    OUTLOOK_GRAPH_UNAVAILABLE = "OUTLOOK_GRAPH_UNAVAILABLE"
    OUTLOOK_EVENT_ALREADY_BOUND = "OUTLOOK_EVENT_ALREADY_BOUND"
    OUTLOOK_TARGET_ALREADY_BOUND = "OUTLOOK_TARGET_ALREADY_BOUND"
    OUTLOOK_MANAGED = "OUTLOOK_MANAGED"
    OUTLOOK_CANDIDATE_NOT_FOUND = "OUTLOOK_CANDIDATE_NOT_FOUND"
    OUTLOOK_BINDING_NOT_FOUND = "OUTLOOK_BINDING_NOT_FOUND"
    OUTLOOK_BINDING_RELEASED = "OUTLOOK_BINDING_RELEASED"
    OUTLOOK_EXCLUSION_NOT_SERIES = "OUTLOOK_EXCLUSION_NOT_SERIES"
    OUTLOOK_EXCLUSION_EXISTS = "OUTLOOK_EXCLUSION_EXISTS"
    OUTLOOK_EXCLUSION_NOT_FOUND = "OUTLOOK_EXCLUSION_NOT_FOUND"
    OUTLOOK_MAILBOX_NOT_READABLE = "OUTLOOK_MAILBOX_NOT_READABLE"
    OUTLOOK_TAKEOVER_COPY_NOT_FOUND = "OUTLOOK_TAKEOVER_COPY_NOT_FOUND"
    OUTLOOK_TAKEOVER_KIND_MISMATCH = "OUTLOOK_TAKEOVER_KIND_MISMATCH"


class SyncOff(DomainError):
    """GRAPH_TENANT_ID, GRAPH_CLIENT_ID or GRAPH_CLIENT_SECRET is unset (API.md: unset -> Outlook sync off)."""

    status, code, title = 409, OutlookErrorCode.OUTLOOK_SYNC_OFF, "The Outlook sync is off: Graph credentials are unset"


class PolicyInvalid(DomainError):
    """MA-INV-39: a policy value outside its range (the `errors` member names the fields)."""

    status, code, title = 422, OutlookErrorCode.OUTLOOK_POLICY_INVALID, "The Outlook sync policy is not valid"


class MailboxNotFound(DomainError):
    status, code, title = 404, OutlookErrorCode.OUTLOOK_MAILBOX_NOT_FOUND, "No such Outlook mailbox"


class MailboxExists(DomainError):
    status, code, title = 409, OutlookErrorCode.OUTLOOK_MAILBOX_EXISTS, "This mailbox is already a source"


class MailboxAddressInvalid(DomainError):
    status, code, title = 422, OutlookErrorCode.OUTLOOK_MAILBOX_ADDRESS_INVALID, "Not a mailbox address"


class MailboxDisabled(DomainError):
    status, code, title = 409, OutlookErrorCode.OUTLOOK_MAILBOX_DISABLED, "The mailbox is disabled"


class MailboxNotReadable(DomainError):
    """Graph refused the mailbox (ACCESS_DENIED) or does not know it (INVALID): it cannot be a binding's source until
    an operator's resync finds it readable (the `current_state` member says which)."""

    status, code, title = (409, OutlookErrorCode.OUTLOOK_MAILBOX_NOT_READABLE,
                           "Tenet cannot read this mailbox: it cannot be a binding's source")


class GraphUnavailable(DomainError):
    """Graph (or its authority) could not be reached or kept failing: nothing was stored; try again later."""

    status, code, title = 503, OutlookErrorCode.OUTLOOK_GRAPH_UNAVAILABLE, "Microsoft Graph is unavailable"


class EventAlreadyBound(DomainError):
    """MA-INV-30: the Graph event already has a live binding (the `binding_id` member names it)."""

    status, code, title = 409, OutlookErrorCode.OUTLOOK_EVENT_ALREADY_BOUND, "This Outlook event is already managed"


class TargetAlreadyBound(DomainError):
    """MA-INV-31: the meeting or series is already the target of a live binding."""

    status, code, title = (409, OutlookErrorCode.OUTLOOK_TARGET_ALREADY_BOUND,
                           "This meeting or series is already managed by Outlook")


class Managed(DomainError):
    """A meeting written by the sync: the fields Outlook owns change only in Outlook. Also a bound series, which the
    launch clean-up does not truncate (the problem names its binding)."""

    status, code, title = 409, OutlookErrorCode.OUTLOOK_MANAGED, "This is managed by Outlook"


class CandidateNotFound(DomainError):
    """The event is not in the mailbox's candidate pool (not read yet, gone, or not a single event / series master)."""

    status, code, title = 404, OutlookErrorCode.OUTLOOK_CANDIDATE_NOT_FOUND, "No such Outlook candidate"


class TakeoverCopyNotFound(DomainError):
    """A takeover that names only the new mailbox: that mailbox's pool holds no single copy of the binding's event
    (same iCalUId, same kind), or the pool has no iCalUId for it yet. Give `graph_event_id` (the event's id there)."""

    status, code, title = (409, OutlookErrorCode.OUTLOOK_TAKEOVER_COPY_NOT_FOUND,
                           "The new mailbox holds no copy of this event that Tenet can match: give graph_event_id")


class TakeoverKindMismatch(DomainError):
    """The event named for a takeover is a single event where the binding manages a series, or the reverse."""

    status, code, title = (409, OutlookErrorCode.OUTLOOK_TAKEOVER_KIND_MISMATCH,
                           "The event named is not of the binding's kind (single event or series)")


class BindingNotFound(DomainError):
    status, code, title = 404, OutlookErrorCode.OUTLOOK_BINDING_NOT_FOUND, "No such Outlook binding"


class BindingReleased(DomainError):
    status, code, title = 409, OutlookErrorCode.OUTLOOK_BINDING_RELEASED, "The binding is released"


class ExclusionNotSeries(DomainError):
    status, code, title = (409, OutlookErrorCode.OUTLOOK_EXCLUSION_NOT_SERIES,
                           "Only occurrences of a bound series can be excluded")


class ExclusionExists(DomainError):
    status, code, title = 409, OutlookErrorCode.OUTLOOK_EXCLUSION_EXISTS, "This occurrence is already excluded"


class ExclusionNotFound(DomainError):
    status, code, title = 404, OutlookErrorCode.OUTLOOK_EXCLUSION_NOT_FOUND, "This occurrence is not excluded"
