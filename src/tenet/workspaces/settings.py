"""The workspaces domain's settings section (composed into tenet.settings.Settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from tenet.kernel.settings import SECTION_CONFIG, Rate, RateSetting, env


class WorkspaceSettings(BaseSettings):
    model_config = SECTION_CONFIG

    invitation_ttl_days: int = Field(7, ge=1, validation_alias=env("TENET_INVITATION_TTL_DAYS"))
    invitations_per_workspace_per_day: int = Field(
        100, ge=1, validation_alias=env("TENET_INVITATIONS_PER_WORKSPACE_PER_DAY")
    )
    # Per account, across workspaces: one account creating workspaces by the hundred would otherwise
    # escape the per-workspace invitation limit (issue 6).
    workspace_creation_limit: RateSetting = Field(
        Rate.parse("20/hour"), validation_alias=env("TENET_WORKSPACE_CREATION_LIMIT")
    )
    invitation_sender_limit: RateSetting = Field(
        Rate.parse("200/24hour"), validation_alias=env("TENET_INVITATION_SENDER_LIMIT")
    )
