"""QR codes, the rotating online code and the offline code.

The printed codes (spec §关键决策 2, 3: the qrCodeOnline / qrCodeOffline equivalents) lead to the stable
check-in address `<TENET_PUBLIC_BASE_URL>/meetingattendance/check-in/<id>?mode=online|offline` (MA-INV-15), which
is what the meeting stores. The image a manager is served adds the proof of its mode as `&code=...`:

- offline: `o1.<mac>`, the MAC of the meeting id and the mode with a key derived from TENET_SECRET_KEY. It
  never changes for a meeting, so a printed poster keeps working; without it a client could name the offline
  mode and skip the rotating online code (issue 24 item 4). Required for every offline check-in.
- online, when the meeting asks for a rotating code (issue 10, beyond the spec; MA-INV-14): `v1.<step>.<mac>`,
  the MAC of the meeting id and the time step; a scan is accepted with the current or previous step.

Nothing is stored: both are recomputed from the key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import segno

from tenet.kernel.settings import KernelSettings, section
from tenet.meetings import errors
from tenet.meetings.settings import MeetingSettings

MODES = ("online", "offline")
CHECK_IN_PATH = "/meetingattendance/check-in/"
_CODE = re.compile(r"^v1\.(\d{1,12})\.([A-Za-z0-9_-]{22})\Z")
_OFFLINE_CODE = re.compile(r"^o1\.([A-Za-z0-9_-]{22})\Z")


def check_in_url(base_url: str, meeting_id: str, mode: str) -> str:
    return f"{base_url.rstrip('/')}{CHECK_IN_PATH}{meeting_id}?mode={mode}"


def with_code(address: str, code: str) -> str:
    """The address a QR image encodes: the stable one with its mode's proof."""
    return f"{address}&code={code}"


def scan_url(row: dict[str, Any], mode: str, signer: CheckInCodes, now: datetime) -> str | None:
    """What the image of `mode` encodes when it is not the stored address (`row` is `queries.qr_code`'s): the
    address with the meeting's offline code, or with the current rotating online code; None for the stored one."""
    if mode == "offline":
        return with_code(row["payload"], signer.offline_code(row["id"]))
    if row["rotating_online_code"]:
        return with_code(row["payload"], signer.code(row["id"], now))
    return None


@dataclass(frozen=True)
class Rendered:
    payload: str
    svg: str
    png: bytes


def render(payload: str) -> Rendered:
    """Error correction M, border 4, scale 10: readable from a phone across a meeting room."""
    code = segno.make(payload, error="m", micro=False)
    svg, png = io.BytesIO(), io.BytesIO()
    code.save(svg, kind="svg", scale=10, border=4, xmldecl=False)
    code.save(png, kind="png", scale=10, border=4)
    return Rendered(payload, svg.getvalue().decode("utf-8"), png.getvalue())


def rendered_rows(base_url: str, meeting_ids: list[str]) -> list[dict[str, Any]]:
    """Both stored codes of each meeting, rendered (`meeting_qr_codes` rows without their time and author). CPU
    work, about 8 ms a code here (segno's mask selection and PNG writer are pure Python): callers run it off the
    event loop, and the bulk commands in worker processes (a top-level function, so it pickles)."""
    rows = []
    for meeting_id in meeting_ids:
        for mode in MODES:
            rendered = render(check_in_url(base_url, meeting_id, mode))
            rows.append({"meeting_id": meeting_id, "mode": mode, "payload": rendered.payload, "svg": rendered.svg,
                         "png": rendered.png})
    return rows


class CheckInCodes:
    """Signs and verifies the check-in codes of one key: rotating online codes (of one step length) and the
    offline codes."""

    def __init__(self, secret_key: str, step_seconds: int) -> None:
        self._key = hmac.new(secret_key.encode(), b"tenet/meetings/rotating-code", hashlib.sha256).digest()
        self._offline_key = hmac.new(secret_key.encode(), b"tenet/meetings/offline-code", hashlib.sha256).digest()
        self.step_seconds = step_seconds

    def step(self, now: datetime) -> int:
        return int(now.timestamp()) // self.step_seconds

    def _mac(self, meeting_id: str, step: int) -> str:
        digest = hmac.new(self._key, f"ma-rotating:v1:{meeting_id}:{step}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode()[:22]

    def code(self, meeting_id: str, now: datetime) -> str:
        step = self.step(now)
        return f"v1.{step}.{self._mac(meeting_id, step)}"

    def expires_at(self, now: datetime) -> datetime:
        return datetime.fromtimestamp((self.step(now) + 1) * self.step_seconds, tz=now.tzinfo)

    def verify(self, meeting_id: str, code: str | None, now: datetime) -> int:
        """The accepted step, or CHECK_IN_CODE_REQUIRED / _INVALID (malformed or forged) / _EXPIRED (a
        genuine code of a step that is neither the current nor the previous one)."""
        if not code:
            raise errors.CheckInCodeRequired()
        match = _CODE.match(code)
        if match is None:
            raise errors.CheckInCodeInvalid()
        step, mac = int(match.group(1)), match.group(2)
        if not hmac.compare_digest(mac, self._mac(meeting_id, step)):
            raise errors.CheckInCodeInvalid()
        current = self.step(now)
        if step not in (current, current - 1):
            raise errors.CheckInCodeExpired(step=step)
        return step

    def offline_code(self, meeting_id: str) -> str:
        digest = hmac.new(self._offline_key, f"ma-offline:v1:{meeting_id}:offline".encode(), hashlib.sha256).digest()
        return "o1." + base64.urlsafe_b64encode(digest).decode()[:22]

    def verify_offline(self, meeting_id: str, code: str | None) -> None:
        """CHECK_IN_OFFLINE_CODE_REQUIRED without a code (a poster printed before offline codes carried one),
        CHECK_IN_OFFLINE_CODE_INVALID for anything but this meeting's offline code (constant-time)."""
        if not code:
            raise errors.CheckInOfflineCodeRequired()
        if _OFFLINE_CODE.match(code) is None or not hmac.compare_digest(code, self.offline_code(meeting_id)):
            raise errors.CheckInOfflineCodeInvalid()


def signer(app_state: Any) -> CheckInCodes:
    """The process's signer, kept on the app's state (its key derivation runs once)."""
    found: CheckInCodes | None = getattr(app_state, "meeting_check_in_codes", None)
    if found is None:
        settings = app_state.settings
        found = CheckInCodes(section(settings, KernelSettings).signing_key(),
                             section(settings, MeetingSettings).rotating_code_seconds)
        app_state.meeting_check_in_codes = found
    return found
