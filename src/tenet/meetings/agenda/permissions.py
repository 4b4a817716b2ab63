"""The agenda's written permission table, spec §权限矩阵 row by row (tests/meetings/agenda/test_permission_matrix.py
checks each row), and the OpenAPI tag of its routes (tenet.meetings.agenda.api). Its points are the meetings
domain's (tenet.meetings.permissions)."""

from __future__ import annotations

TAG = "meeting agenda"
PERMISSION_TABLE = """\
| # | action (spec §权限矩阵) | point | Administrator | MeetingManager | Leader / Employee | External attendee |
|---|---|---|---|---|---|---|
| 1 | see the agenda, full view | `meeting:read` | yes | yes | participants | no (row 2) |
| 2 | see the agenda, restricted view (titles only) | `meeting:read` | - | - | - | yes |
| 3 | create / change / delete sections | `meeting:agenda:update` | yes | yes | 403 | 403 |
| 4 | create / change / delete items | `meeting:agenda:update` | yes | yes | 403 | 403 |
| 5 | reorder sections / items | `meeting:agenda:update` | yes | yes | 403 | 403 |
| 6 | assign upload tasks | `meeting:upload-task:assign` | yes | yes | 403 | 403 |
| 7 | cancel / delete tasks | `meeting:upload-task:assign` | yes | yes | 403 | 403 |
| 8 | my upload tasks | `meeting:read` | yes | yes | yes | (none to list) |
| 9 | upload to an item without a task | `meeting:attachment:upload:any` | yes | yes | 403 UPLOAD_TASK_NOT_OWNED | 403 |
| 10 | upload to an item with one's task | `meeting:attachment:upload:assigned` | - | - | yes | 403 |
| 11 | upload a meeting-level file | `meeting:attachment:upload:any` | yes | yes | 403 | 403 |
| 12 | download item / meeting files | `meeting:attachment:download` | yes | yes | participants | 403 |
| 13 | delete one's own upload | (uploader) | yes | yes | own only | 404 |
| 14 | delete another's upload (forced) | `meeting:attachment:upload:any` | yes | yes | 403 `ATTACHMENT_NOT_OWN` | 404 |
| 15 | restore a deleted file inside the purge window | `meeting:attachment:restore` | yes | 403 | 403 | 403 |

Participants are the meeting's creator, organizer and required attendees; an external attendee is a signed-in
walk-in (a live attendance, nothing else). Anyone else gets 404 for the meeting and everything in it."""

TAG_DESCRIPTION = (
    "The agenda of a meeting (spec 001 §议程能力架构): sections and items in order, upload tasks, item- and "
    "meeting-level files. Uploads are `multipart/form-data` with the single part `file` (plus `category` for "
    "meeting files), streamed to disk; `size` is a string. Downloads answer `Range` requests (206). Deleted files "
    "are purged after `MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS`; an administrator may restore them until then.\n\n"
    "**Who may do what**:\n\n" + PERMISSION_TABLE
)
