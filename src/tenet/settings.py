"""`Settings`: the kernel's section and every domain's, as one class read from the environment (and `.env`).

The names are part of the contract (API.md, "Running it"). Each section lives with its owner
(`tenet.kernel.settings.KernelSettings`, `tenet.iam.settings.IamSettings`, ...) and is declared in the
domain's `Domain`; this module only composes them. Kernel and domain code type against their own section,
never against this class (see `tenet.kernel.settings.section`); only boundaries import it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from tenet.domains import DOMAINS
from tenet.kernel.settings import SECTION_CONFIG, KernelSettings, Rate, RateSetting, compose, env, section


class MeetingAttendanceSettings(BaseSettings):
    """Spec 001's settings, part of the contract already (API.md). They move into the meetings domain's own
    section (`tenet.meetings.settings`, declared in its `Domain`) when that domain lands."""

    model_config = SECTION_CONFIG

    guest_checkin_limit: RateSetting = Field(
        Rate.parse("120/minute"), validation_alias=env("TENET_GUEST_CHECKIN_LIMIT")
    )
    meeting_attachment_storage_root: Path | None = Field(
        None, validation_alias=env("MEETING_ATTACHMENT_STORAGE_ROOT")
    )
    meeting_attachment_max_bytes: int = Field(
        209_715_200, validation_alias=env("MEETING_ATTACHMENT_MAX_BYTES")
    )
    meeting_attachment_physical_delete_days: int = Field(
        30, validation_alias=env("MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS")
    )
    graph_tenant_id: str | None = Field(None, validation_alias=env("GRAPH_TENANT_ID"))
    graph_client_id: str | None = Field(None, validation_alias=env("GRAPH_CLIENT_ID"))
    graph_client_secret: SecretStr | None = Field(
        None, validation_alias=env("GRAPH_CLIENT_SECRET"))
    graph_notification_client_state: SecretStr | None = Field(
        None, validation_alias=env("GRAPH_NOTIFICATION_CLIENT_STATE")
    )
    graph_base_url: str = Field(
        "https://graph.microsoft.com/v1.0", validation_alias=env("GRAPH_BASE_URL")
    )
    graph_authority_url: str = Field(
        "https://login.microsoftonline.com", validation_alias=env("GRAPH_AUTHORITY_URL")
    )


Settings = compose([*(domain.settings for domain in DOMAINS if domain.settings), MeetingAttendanceSettings])

__all__ = ["KernelSettings", "Rate", "Settings", "get_settings", "section"]


@lru_cache
def get_settings() -> KernelSettings:
    return Settings()
