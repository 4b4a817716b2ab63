"""The meeting-attendance settings section (composed into tenet.settings.Settings).

The environment variable names are part of the contract (API.md "Running it"): the spec's own
`MEETING_ATTACHMENT_*` and `GRAPH_*` names are kept as the spec writes them (they serve issue 11's
attachments and the Outlook sync, which share this domain), the rest follow Tenet's `TENET_` prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from tenet.kernel.settings import SECTION_CONFIG, Rate, RateSetting, env


class MeetingSettings(BaseSettings):
    model_config = SECTION_CONFIG

    # --- check-in -----------------------------------------------------------------------------------
    # Per (meeting, client address): many guests share one network (a venue's wifi), so it is generous.
    guest_checkin_limit: RateSetting = Field(
        Rate.parse("120/minute"), validation_alias=env("TENET_GUEST_CHECKIN_LIMIT")
    )
    meeting_late_grace_minutes: int = Field(
        5, ge=0, le=240, validation_alias=env("TENET_MEETING_LATE_GRACE_MINUTES"))
    meeting_checkin_opens_minutes: int = Field(
        30, ge=0, le=1440,
        validation_alias=env("TENET_MEETING_CHECKIN_OPENS_MINUTES"))
    rotating_code_seconds: int = Field(
        30, ge=10, le=300, validation_alias=env("TENET_ROTATING_CODE_SECONDS"))
    guest_data_retention_days: int = Field(
        90, ge=1, le=3650, validation_alias=env("TENET_GUEST_DATA_RETENTION_DAYS"))

    # --- series and reports -------------------------------------------------------------------------
    series_max_occurrences: int = Field(
        500, ge=1, le=2000, validation_alias=env("TENET_SERIES_MAX_OCCURRENCES"))
    report_max_range_days: int = Field(
        366, ge=1, le=3660, validation_alias=env("TENET_REPORT_MAX_RANGE_DAYS"))

    # --- attachments (issue 11) ---------------------------------------------------------------------
    meeting_attachment_storage_root: Path | None = Field(
        None, validation_alias=env("MEETING_ATTACHMENT_STORAGE_ROOT")
    )
    # At most the upload routes' body ceiling (tenet.meetings.agenda.api.BODY_CEILING).
    meeting_attachment_max_bytes: int = Field(
        209_715_200, ge=1, le=4 * 1024**3, validation_alias=env("MEETING_ATTACHMENT_MAX_BYTES")
    )
    meeting_attachment_physical_delete_days: int = Field(
        30, ge=1, le=3650, validation_alias=env("MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS")
    )
    meeting_attachment_storage: Literal["local", "s3"] = Field(
        "local", validation_alias=env("MEETING_ATTACHMENT_STORAGE"))
    meeting_attachment_s3_bucket: str | None = Field(None, validation_alias=env("MEETING_ATTACHMENT_S3_BUCKET"))
    meeting_attachment_s3_endpoint_url: str | None = Field(
        None, validation_alias=env("MEETING_ATTACHMENT_S3_ENDPOINT_URL"))
    meeting_attachment_s3_region: str | None = Field(None, validation_alias=env("MEETING_ATTACHMENT_S3_REGION"))

    # --- Microsoft Graph (the Outlook sync, its own issue) ------------------------------------------
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
    # A CA file trusted for Graph and its authority (sovereign clouds, TLS-inspecting proxies, the tests' emulator).
    # When set it wins over REQUESTS_CA_BUNDLE / SSL_CERT_FILE from the environment, for MSAL and httpx alike.
    graph_ca_bundle: Path | None = Field(None, validation_alias=env("GRAPH_CA_BUNDLE"))

    @property
    def graph_configured(self) -> bool:
        """The Outlook sync is on only with the three credentials (API.md: unset -> Outlook sync off)."""
        secret = self.graph_client_secret.get_secret_value() if self.graph_client_secret else ""
        return bool(self.graph_tenant_id and self.graph_client_id and secret)
