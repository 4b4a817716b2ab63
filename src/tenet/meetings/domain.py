"""Meeting attendance's declaration to the composition root (tenet.domains)."""

from tenet.kernel.domain import Domain
from tenet.meetings.permissions import POINTS
from tenet.meetings.settings import MeetingSettings

DOMAIN = Domain(
    name="meetings",
    schema="meeting_attendance",
    settings=MeetingSettings,
    modules=("tenet.meetings.models", "tenet.meetings.invariants", "tenet.meetings.lifecycles"),
    api="tenet.meetings.api",
    jobs="tenet.meetings.tasks",
    events="tenet.meetings.events",
    permissions=POINTS,
    locks=(
        "meeting_attendance.meeting_series (one series, FOR UPDATE, before its meetings)",
        "meeting_attendance.templates (one template, FOR UPDATE)",
        "meeting_attendance.meetings (FOR NO KEY UPDATE, several in id order)",
        "advisory lock (19777, hashtext(meeting id)): shared by a check-in, exclusive by a change of the "
        "meeting's status or schedule (taken by triggers, after the meeting row)",
    ),
)
