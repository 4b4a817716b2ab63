"""The reservation workflow's settings section (composed into tenet.settings.Settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from tenet.kernel.settings import SECTION_CONFIG, env


class ReservationSettings(BaseSettings):
    model_config = SECTION_CONFIG

    # Items across the three lists of one ingest body; the body itself is limited by the route (2 MiB).
    reservation_ingest_max_items: int = Field(
        500, ge=1, le=10_000,
        validation_alias=env("TENET_RESERVATION_INGEST_MAX_ITEMS"),
    )
