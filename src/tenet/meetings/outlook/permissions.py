"""Who may use the Outlook sync's routes, and their OpenAPI tag. One point, `meeting:outlook:manage` (declared with
the meeting points, granted to Administrator and MeetingManager): a caller without it gets 403 before anything is
read. The two webhook routes are public: Graph calls them, and `clientState` is their proof."""

from __future__ import annotations

from tenet.meetings.permissions import Permission

MANAGE = Permission.OUTLOOK_MANAGE

TAG = "outlook sync"
TAG_DESCRIPTION = (
    "Outlook calendar sync through Microsoft Graph (spec 001 \"Outlook 同步架构\"; issue 17). Tenet only reads "
    "Outlook: the only writes it sends to Graph are its own subscriptions. Every route needs `meeting:outlook:manage` "
    "(Administrator, MeetingManager) and answers 409 `OUTLOOK_SYNC_OFF` while GRAPH_TENANT_ID, GRAPH_CLIENT_ID or "
    "GRAPH_CLIENT_SECRET is unset, except `GET|PUT /outlook/settings` (which say whether they are set) and the two "
    "public webhook routes Graph calls."
)
