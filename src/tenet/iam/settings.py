"""Identity's settings section (composed into tenet.settings.Settings)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from tenet.kernel.settings import SECTION_CONFIG, Rate, RateSetting, env


class IamSettings(BaseSettings):
    model_config = SECTION_CONFIG

    access_token_ttl_seconds: int = Field(
        900, ge=30, validation_alias=env("TENET_ACCESS_TOKEN_TTL_SECONDS")
    )
    refresh_token_ttl_days: int = Field(
        30, ge=1, validation_alias=env("TENET_REFRESH_TOKEN_TTL_DAYS")
    )
    # argon2id cost; the defaults are argon2-cffi's (RFC 9106 "low memory"). Tests lower them for speed.
    password_hash_time_cost: int = Field(
        3, ge=1, validation_alias=env("TENET_PASSWORD_HASH_TIME_COST"))
    password_hash_memory_kib: int = Field(
        65536, ge=8, validation_alias=env("TENET_PASSWORD_HASH_MEMORY_KIB"))
    login_failure_limit: RateSetting = Field(
        Rate.parse("10/15min"), validation_alias=env("TENET_LOGIN_FAILURE_LIMIT")
    )
    # A console sign-in (tenet.web) lasts this long at most; then the person signs in again and returns to the page.
    web_session_ttl_hours: int = Field(12, ge=1, le=24 * 30, validation_alias=env("TENET_WEB_SESSION_TTL_HOURS"))
    registration_limit: RateSetting = Field(
        Rate.parse("20/hour"), validation_alias=env("TENET_REGISTRATION_LIMIT")
    )
    # Password reset (issue 20): how long the mailed link works, and how many requests per address asked for and
    # per client address (each request counts, whether or not the address has an account).
    password_reset_ttl_minutes: int = Field(60, ge=5, le=24 * 60,
                                            validation_alias=env("TENET_PASSWORD_RESET_TTL_MINUTES"))
    password_reset_limit: RateSetting = Field(
        Rate.parse("5/hour"), validation_alias=env("TENET_PASSWORD_RESET_LIMIT")
    )
