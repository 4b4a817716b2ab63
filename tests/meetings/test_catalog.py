"""The documented copies of the meeting permission table do not drift from the code."""

from __future__ import annotations

from pathlib import Path

from tenet.app import create_app
from tenet.meetings.permissions import PERMISSION_TABLE, POINTS
from tests.conftest import test_settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_permission_table_in_decisions_and_openapi_is_the_code_s():
    assert PERMISSION_TABLE in (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    tags = {t["name"]: t["description"] for t in create_app(test_settings()).openapi()["tags"]}
    assert PERMISSION_TABLE in tags["meeting attendance"]


def test_the_meeting_points_keep_the_grants_identity_seeded():
    grants = {p.name: p.granted_to for p in POINTS}
    assert grants["meeting:check-in"] == {"Administrator", "MeetingManager", "Leader", "Employee"}
    assert grants["meeting:report:read"] == {"Administrator", "MeetingManager", "Leader"}
    # Issue 11 (migration 1200): restoring a deleted attachment is for administrators (API.md, spec 软删).
    assert grants["meeting:attachment:restore"] == {"Administrator"}
    assert len(grants) == 17
