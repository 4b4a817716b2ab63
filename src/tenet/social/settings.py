"""The social domain's settings section (composed into tenet.settings.Settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from tenet.kernel.settings import SECTION_CONFIG, Rate, RateSetting, env


class SocialSettings(BaseSettings):
    model_config = SECTION_CONFIG

    social_friend_request_cooldown_days: int = Field(
        30, ge=0,
        validation_alias=env("TENET_SOCIAL_FRIEND_REQUEST_COOLDOWN_DAYS"))
    # Friend requests, group invitations and share offers one account may send (each lands in someone's inbox).
    social_inbox_write_limit: RateSetting = Field(
        Rate.parse("200/24hour"), validation_alias=env("TENET_SOCIAL_INBOX_WRITE_LIMIT"))
    social_group_creation_limit: RateSetting = Field(
        Rate.parse("20/24hour"),
        validation_alias=env("TENET_SOCIAL_GROUP_CREATION_LIMIT"))
    social_group_max_members: int = Field(
        500, ge=2, validation_alias=env("TENET_SOCIAL_GROUP_MAX_MEMBERS"))
    social_automations_per_user: int = Field(
        20, ge=1, validation_alias=env("TENET_SOCIAL_AUTOMATIONS_PER_USER"))
    automation_max_attempts: int = Field(
        3, ge=1, le=10, validation_alias=env("TENET_AUTOMATION_MAX_ATTEMPTS"))
    automation_retry_base_seconds: int = Field(
        60, ge=1, validation_alias=env("TENET_AUTOMATION_RETRY_BASE_SECONDS"))
    automation_lease_seconds: int = Field(
        120, ge=5, validation_alias=env("TENET_AUTOMATION_LEASE_SECONDS"))
    social_inbox_retention_days: int = Field(
        180, ge=1, validation_alias=env("TENET_SOCIAL_INBOX_RETENTION_DAYS"))
    calendar_feed_limit: RateSetting = Field(
        Rate.parse("120/hour"), validation_alias=env("TENET_CALENDAR_FEED_LIMIT"))
    # The social-app cut-over (issue 20, docs/legacy-social.md): the worker applies the legacy change log every
    # minute while this is on; the log is in the legacy database (default: Tenet's own).
    social_legacy_sync: bool = Field(False, validation_alias=env("TENET_SOCIAL_LEGACY_SYNC"))
    social_legacy_url: str | None = Field(None, validation_alias=env("TENET_SOCIAL_LEGACY_URL"))
