"""Settings from the environment (and `.env`). The names are part of the contract (API.md, "Running it")."""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

_UNITS = {
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class Rate:
    """`limit` events per `window`, written like `10/15min`, `20/hour` or `120/minute`."""

    limit: int
    window: timedelta

    @classmethod
    def parse(cls, text: str) -> Rate:
        match = _RATE.match(text.lower())
        if not match or match.group(3) not in _UNITS:
            raise ValueError(f"not a rate like '10/15min': {text!r}")
        limit, multiplier, unit = int(match.group(1)), int(match.group(2) or 1), match.group(3)
        if limit < 1 or multiplier < 1:
            raise ValueError(f"a rate needs a positive limit and window: {text!r}")
        return cls(limit=limit, window=timedelta(seconds=multiplier * _UNITS[unit]))

    def __str__(self) -> str:
        return f"{self.limit}/{int(self.window.total_seconds())}s"


def _to_rate(value: Any) -> Rate:
    return value if isinstance(value, Rate) else Rate.parse(str(value))


# NoDecode: the environment holds "10/15min", not JSON.
RateSetting = Annotated[Rate, NoDecode, BeforeValidator(_to_rate)]


def normalize_forwarded_allow_ips(value: str | None) -> str | None:
    """`" 10.0.0.1, 10.0.1.0/24 "` -> `"10.0.0.1,10.0.1.0/24"`; blank means no proxy is trusted (None)."""
    if value is None:
        return None
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    return ",".join(entries) or None


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True, frozen=True)

    # --- database -------------------------------------------------------------------------------
    database_url: str | None = Field(None, validation_alias=_env("DATABASE_URL", "database_url"))
    data_dir: Path = Field(Path("./var"), validation_alias=_env("TENET_DATA_DIR", "data_dir"))
    # Size the pool to the concurrent requests one process serves: connections above pool_size (the
    # overflow) are closed when returned, and reconnecting per request cost 20% of throughput in the
    # auth_me bench. Keep processes x (size + overflow) under the server's max_connections.
    db_pool_size: int = Field(20, ge=1, validation_alias=_env("TENET_DB_POOL_SIZE", "db_pool_size"))
    db_max_overflow: int = Field(5, ge=0, validation_alias=_env("TENET_DB_MAX_OVERFLOW", "db_max_overflow"))
    db_pool_timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=_env("TENET_DB_POOL_TIMEOUT", "db_pool_timeout_seconds")
    )

    # --- security -------------------------------------------------------------------------------
    secret_key: SecretStr | None = Field(None, validation_alias=_env("TENET_SECRET_KEY", "secret_key"))
    access_token_ttl_seconds: int = Field(
        900, ge=30, validation_alias=_env("TENET_ACCESS_TOKEN_TTL_SECONDS", "access_token_ttl_seconds")
    )
    refresh_token_ttl_days: int = Field(
        30, ge=1, validation_alias=_env("TENET_REFRESH_TOKEN_TTL_DAYS", "refresh_token_ttl_days")
    )
    # argon2id cost; the defaults are argon2-cffi's (RFC 9106 "low memory"). Tests lower them for speed.
    password_hash_time_cost: int = Field(3, ge=1, validation_alias=_env("TENET_PASSWORD_HASH_TIME_COST"))
    password_hash_memory_kib: int = Field(65536, ge=8, validation_alias=_env("TENET_PASSWORD_HASH_MEMORY_KIB"))
    login_failure_limit: RateSetting = Field(
        Rate.parse("10/15min"), validation_alias=_env("TENET_LOGIN_FAILURE_LIMIT", "login_failure_limit")
    )
    registration_limit: RateSetting = Field(
        Rate.parse("20/hour"), validation_alias=_env("TENET_REGISTRATION_LIMIT", "registration_limit")
    )
    guest_checkin_limit: RateSetting = Field(
        Rate.parse("120/minute"), validation_alias=_env("TENET_GUEST_CHECKIN_LIMIT", "guest_checkin_limit")
    )
    # The client address (per-address rate limits) is the socket peer. Only behind proxies listed here
    # (IPs, CIDRs or "*", as uvicorn's forwarded_allow_ips reads them) does X-Forwarded-For name it:
    # unset, no proxy is trusted, so no caller can pick the address its limits are counted under.
    # Named like its variable: pydantic-settings also reads a field's bare name from the environment, and
    # `forwarded_allow_ips` would pick up uvicorn's own FORWARDED_ALLOW_IPS, which must not count.
    tenet_forwarded_allow_ips: str | None = Field(None, validation_alias=_env("TENET_FORWARDED_ALLOW_IPS"))
    max_json_body_bytes: int = Field(
        1_048_576, ge=1024, validation_alias=_env("TENET_MAX_JSON_BODY_BYTES", "max_json_body_bytes")
    )

    # --- mail -----------------------------------------------------------------------------------
    smtp_host: str | None = Field(None, validation_alias=_env("TENET_SMTP_HOST", "smtp_host"))
    smtp_port: int = Field(25, validation_alias=_env("TENET_SMTP_PORT", "smtp_port"))
    smtp_username: str | None = Field(None, validation_alias=_env("TENET_SMTP_USERNAME", "smtp_username"))
    smtp_password: SecretStr | None = Field(None, validation_alias=_env("TENET_SMTP_PASSWORD", "smtp_password"))
    smtp_starttls: bool = Field(False, validation_alias=_env("TENET_SMTP_STARTTLS", "smtp_starttls"))
    mail_from: str = Field("Tenet <no-reply@tenet.example>", validation_alias=_env("TENET_MAIL_FROM", "mail_from"))

    # --- business defaults ----------------------------------------------------------------------
    default_timezone: str = Field(
        "America/Los_Angeles", validation_alias=_env("TENET_DEFAULT_TIMEZONE", "default_timezone")
    )
    public_base_url: str = Field(
        "http://127.0.0.1:8000", validation_alias=_env("TENET_PUBLIC_BASE_URL", "public_base_url")
    )
    invitation_ttl_days: int = Field(7, ge=1, validation_alias=_env("TENET_INVITATION_TTL_DAYS", "invitation_ttl_days"))
    invitations_per_workspace_per_day: int = Field(
        100, ge=1, validation_alias=_env("TENET_INVITATIONS_PER_WORKSPACE_PER_DAY", "invitations_per_workspace_per_day")
    )

    # --- meeting attendance (spec 001) ----------------------------------------------------------
    meeting_attachment_storage_root: Path | None = Field(
        None, validation_alias=_env("MEETING_ATTACHMENT_STORAGE_ROOT", "meeting_attachment_storage_root")
    )
    meeting_attachment_max_bytes: int = Field(
        209_715_200, validation_alias=_env("MEETING_ATTACHMENT_MAX_BYTES", "meeting_attachment_max_bytes")
    )
    meeting_attachment_physical_delete_days: int = Field(
        30, validation_alias=_env("MEETING_ATTACHMENT_PHYSICAL_DELETE_DAYS", "meeting_attachment_physical_delete_days")
    )
    graph_tenant_id: str | None = Field(None, validation_alias=_env("GRAPH_TENANT_ID", "graph_tenant_id"))
    graph_client_id: str | None = Field(None, validation_alias=_env("GRAPH_CLIENT_ID", "graph_client_id"))
    graph_client_secret: SecretStr | None = Field(
        None, validation_alias=_env("GRAPH_CLIENT_SECRET", "graph_client_secret")
    )
    graph_notification_client_state: SecretStr | None = Field(
        None, validation_alias=_env("GRAPH_NOTIFICATION_CLIENT_STATE", "graph_notification_client_state")
    )
    graph_base_url: str = Field(
        "https://graph.microsoft.com/v1.0", validation_alias=_env("GRAPH_BASE_URL", "graph_base_url")
    )
    graph_authority_url: str = Field(
        "https://login.microsoftonline.com", validation_alias=_env("GRAPH_AUTHORITY_URL", "graph_authority_url")
    )

    # --- operations -----------------------------------------------------------------------------
    log_level: str = Field("INFO", validation_alias=_env("TENET_LOG_LEVEL", "log_level"))
    log_format: str = Field("json", pattern="^(json|console)$", validation_alias=_env("TENET_LOG_FORMAT", "log_format"))

    @field_validator("tenet_forwarded_allow_ips")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return normalize_forwarded_allow_ips(value)

    @field_validator("secret_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # HS256 with a short key is brute-forceable (RFC 7518 §3.2 asks for at least 256 bits).
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("TENET_SECRET_KEY must be at least 32 characters")
        return value

    @property
    def uses_embedded_database(self) -> bool:
        return not self.database_url

    @property
    def pgdata_dir(self) -> Path:
        return self.data_dir.resolve() / "pgdata"

    def signing_key(self) -> str:
        """The JWT signing key: TENET_SECRET_KEY, or (development only) one generated into the data dir."""
        if self.secret_key is not None:
            return self.secret_key.get_secret_value()
        path = self.data_dir.resolve() / "secret_key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write aside, then hard-link into place: when several processes start at once exactly one
            # key wins and nobody ever reads a half-written file.
            scratch = path.with_name(f"secret_key.{os.getpid()}.tmp")
            scratch.write_text(secrets.token_urlsafe(48), encoding="ascii")
            scratch.chmod(0o600)
            try:
                os.link(scratch, path)
            except FileExistsError:
                pass
            finally:
                scratch.unlink()
        return path.read_text(encoding="ascii").strip()


@lru_cache
def get_settings() -> Settings:
    return Settings()
