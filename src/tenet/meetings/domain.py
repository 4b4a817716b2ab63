"""Meeting attendance's declaration to the composition root (tenet.domains)."""

from tenet.kernel.domain import Domain
from tenet.meetings.permissions import POINTS
from tenet.meetings.settings import MeetingSettings

DOMAIN = Domain(
    name="meetings",
    schema="meeting_attendance",
    settings=MeetingSettings,
    modules=("tenet.meetings.models", "tenet.meetings.invariants", "tenet.meetings.lifecycles",
             "tenet.meetings.agenda.models", "tenet.meetings.agenda.invariants", "tenet.meetings.agenda.lifecycles",
             "tenet.meetings.outlook.models", "tenet.meetings.outlook.invariants", "tenet.meetings.outlook.lifecycles",
             "tenet.meetings.legacy.models"),
    api="tenet.meetings.api",
    jobs=("tenet.meetings.tasks", "tenet.meetings.agenda.tasks", "tenet.meetings.outlook.tasks"),
    events="tenet.meetings.events",
    permissions=POINTS,
    locks=(
        "meeting_attendance.outlook_policy (the one row, FOR UPDATE by PUT /outlook/settings)",
        "meeting_attendance.outlook_mailboxes (one, FOR UPDATE)",
        "meeting_attendance.outlook_bindings (one, FOR UPDATE by takeover / release / exclusion; FOR SHARE by the "
        "sync through MA-INV-35's trigger), before the series and meetings it manages",
        "meeting_attendance.meeting_series (one series, FOR UPDATE, before its meetings)",
        "meeting_attendance.templates (one template, FOR UPDATE)",
        "meeting_attendance.meetings (FOR NO KEY UPDATE, several in id order)",
        "meeting_attendance.meeting_agenda_sections, then meeting_agenda_items (FOR UPDATE, id order; after the "
        "meeting row, which every agenda command locks first)",
        "meeting_attendance.meeting_agenda_item_upload_tasks, then the attachment rows (FOR UPDATE)",
        "advisory lock (19777, hashtext(meeting id)): shared by a check-in, exclusive by a change of the "
        "meeting's status or schedule (taken by triggers, after the meeting row)",
    ),
)
