"""The kernel's settings section, the rate type every limit uses, and how sections become one Settings.

Each domain declares its own settings section (a `pydantic_settings.BaseSettings` subclass in its
`settings.py`) in its `Domain` declaration; `tenet.settings.Settings` is the class that inherits from the
kernel's section and every declared one, so one object read from the environment (and `.env`) serves the
whole process. Code reads a section through its own type: the kernel types against `KernelSettings`, a
domain against its section (`section(settings, WorkspaceSettings)`), so neither needs the all-domain class.
The variable names are part of the contract (API.md, "Running it").
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from tenet.kernel.mail import MailSettings
from tenet.kernel.zones import is_iana_zone

_UNITS = {
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*\Z")


@dataclass(frozen=True)
class Rate:
    """`limit` events per `window`, written like `10/15min`, `20/hour` or `200/24hour`."""

    limit: int
    window: timedelta

    @classmethod
    def parse(cls, text: str) -> Rate:
        match = _RATE.match(text.lower())
        if not match or match.group(3) not in _UNITS:
            raise ValueError("not a rate like '10/15min' or '20/hour'")
        limit, multiplier, unit = int(match.group(1)), int(match.group(2) or 1), match.group(3)
        if limit < 1 or multiplier < 1:
            raise ValueError("a rate needs a positive limit and window")
        return cls(limit=limit, window=timedelta(seconds=multiplier * _UNITS[unit]))

    def __str__(self) -> str:
        return f"{self.limit}/{int(self.window.total_seconds())}s"


def _to_rate(value: Any) -> Rate:
    return value if isinstance(value, Rate) else Rate.parse(str(value))


# NoDecode: the environment holds "10/15min", not JSON.
RateSetting = Annotated[Rate, NoDecode, BeforeValidator(_to_rate)]


# The DATABASE_URL forms Tenet accepts (tenet.db.database.async_url maps each to psycopg's).
POSTGRESQL_URL_PREFIXES = ("postgresql://", "postgres://", "postgresql+psycopg://", "postgresql+asyncpg://",
                           "postgresql+psycopg2://")

def env(*names: str) -> AliasChoices:
    """The environment variable(s) of a field (the contract's names, upper case). Code and tests may also pass
    the field by its Python name (`populate_by_name`); the environment may not (see SECTION_CONFIG)."""
    for name in names:
        if name != name.upper():
            raise ValueError(f"{name!r}: settings read only their documented (upper-case) variables")
    return AliasChoices(*names)


def normalize_forwarded_allow_ips(value: str | None) -> str | None:
    """`" 10.0.0.1, 10.0.1.0/24 "` -> `"10.0.0.1,10.0.1.0/24"`; blank means no proxy is trusted (None)."""
    if value is None:
        return None
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    return ",".join(entries) or None


# With populate_by_name, pydantic-settings also reads a field's bare name from the environment (SECRET_KEY,
# LOG_LEVEL, SMTP_HOST ...): a container's unrelated variables would configure Tenet. The prefix applies
# only to those bare names (never to the documented variables, which are aliases), so nobody sets them.
SECTION_CONFIG = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True, frozen=True,
                                    env_prefix="_TENET_FIELD_")


_URL_VARIABLES = {"database_url": "DATABASE_URL", "database_direct_url": "TENET_DATABASE_DIRECT_URL",
                  "database_read_url": "TENET_DATABASE_READ_URL"}
SECRET_KEY_MIN_LENGTH = 32
SECRET_KEY_MIN_DISTINCT = 10
METRICS_TOKEN_MIN_LENGTH = 16


class MissingSecretKey(RuntimeError):
    """The service would sign tokens with a key other processes do not share."""


class KernelSettings(BaseSettings):
    """What every process needs: the database, the signing key, mail, the public address, logging."""

    model_config = SECTION_CONFIG

    # --- database -------------------------------------------------------------------------------
    database_url: str | None = Field(None, validation_alias=env("DATABASE_URL"))
    data_dir: Path = Field(Path("./var"), validation_alias=env("TENET_DATA_DIR"))
    # Internal: `tenet serve` hands the embedded server's address to its worker processes here, so they
    # join the server it started without becoming a DATABASE_URL deployment.
    embedded_database_url: str | None = Field(None, validation_alias=env("TENET_EMBEDDED_DATABASE_URL"))
    # Size the pool to the concurrent requests one process serves: connections above pool_size (the
    # overflow) are closed when returned, and reconnecting per request cost 20% of throughput in the
    # auth_me bench. Keep processes x (writes + reads) under the server's max_connections.
    db_pool_size: int = Field(20, ge=1, validation_alias=env("TENET_DB_POOL_SIZE"))
    db_max_overflow: int = Field(5, ge=0, validation_alias=env("TENET_DB_MAX_OVERFLOW"))
    db_pool_timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=env("TENET_DB_POOL_TIMEOUT")
    )
    # The primary's plain psycopg pool (kernel/reads.py), apart from the units of work's: the transaction-free read
    # path, one-statement writes (rate-limit counts) and the plain units of work (Database.transaction: the
    # check-ins, the Outlook webhook, the invitation), all short; reads never wait behind an ORM unit of work.
    db_read_pool_size: int = Field(20, ge=1, validation_alias=env("TENET_DB_READ_POOL_SIZE"))

    # --- scaling out (docs/operations.md, "Scaling out") ----------------------------------------
    # DATABASE_URL points at PgBouncer in transaction pooling mode: each transaction may run on another
    # server connection, so psycopg must not prepare statements on the server (PgBouncer 1.18 does not carry
    # them across), and what lives in a server session (LISTEN, session advisory locks) needs a connection of
    # its own that bypasses the pooler: TENET_DATABASE_DIRECT_URL.
    database_pgbouncer: bool = Field(False, validation_alias=env("TENET_DATABASE_PGBOUNCER"))
    # The primary itself (not the pooler): the worker's LISTEN and its session-level job locks, and migrations.
    # Unset, they use DATABASE_URL (right when no transaction pooler stands in between).
    database_direct_url: str | None = Field(None, validation_alias=env("TENET_DATABASE_DIRECT_URL"))
    # A streaming hot standby for the API's transaction-free read path (tenet.kernel.replica).
    database_read_url: str | None = Field(None, validation_alias=env("TENET_DATABASE_READ_URL"))
    # Reads go back to the primary while the standby is further behind than this (and while it is down).
    database_read_max_lag_seconds: float = Field(
        5.0, gt=0, le=3600, validation_alias=env("TENET_DATABASE_READ_MAX_LAG_SECONDS"))

    # --- security -------------------------------------------------------------------------------
    secret_key: SecretStr | None = Field(None, validation_alias=env("TENET_SECRET_KEY"))
    # The client address (per-address rate limits) is the socket peer. Only behind proxies listed here
    # (IPs, CIDRs or "*", as uvicorn's forwarded_allow_ips reads them) does X-Forwarded-For name it:
    # unset, no proxy is trusted, so no caller can pick the address its limits are counted under.
    forwarded_allow_ips: str | None = Field(None, validation_alias=env("TENET_FORWARDED_ALLOW_IPS"))
    max_json_body_bytes: int = Field(
        1_048_576, ge=1024, validation_alias=env("TENET_MAX_JSON_BODY_BYTES")
    )

    # --- mail -----------------------------------------------------------------------------------
    smtp_host: str | None = Field(None, validation_alias=env("TENET_SMTP_HOST"))
    smtp_port: int = Field(25, validation_alias=env("TENET_SMTP_PORT"))
    smtp_username: str | None = Field(None, validation_alias=env("TENET_SMTP_USERNAME"))
    smtp_password: SecretStr | None = Field(None, validation_alias=env("TENET_SMTP_PASSWORD"))
    smtp_starttls: bool = Field(False, validation_alias=env("TENET_SMTP_STARTTLS"))
    mail_from: str = Field("Tenet <no-reply@tenet.example>", validation_alias=env("TENET_MAIL_FROM"))

    # --- shared business defaults ---------------------------------------------------------------
    default_timezone: str = Field(
        "America/Los_Angeles", validation_alias=env("TENET_DEFAULT_TIMEZONE")
    )
    public_base_url: str = Field(
        "http://127.0.0.1:8000", validation_alias=env("TENET_PUBLIC_BASE_URL")
    )

    # --- background jobs ------------------------------------------------------------------------
    # Each `tenet worker` records a heartbeat this often; one whose heartbeat is older than the stalled bound is
    # taken for dead (killed, its machine gone), and a live worker puts the jobs it held back in the queue
    # (tenet.worker.recover_stalled_jobs; docs/decisions.md, "Operations under failure").
    worker_heartbeat_seconds: float = Field(10.0, gt=0, validation_alias=env("TENET_WORKER_HEARTBEAT_SECONDS"))
    stalled_worker_seconds: float = Field(60.0, gt=0, validation_alias=env("TENET_STALLED_WORKER_SECONDS"))

    # --- operations -----------------------------------------------------------------------------
    log_level: str = Field("INFO", validation_alias=env("TENET_LOG_LEVEL"))
    # `auto`: readable one-line records on a terminal, JSON lines otherwise (a file, a pipe, a log collector).
    log_format: str = Field("auto", pattern="^(auto|json|console)$", validation_alias=env("TENET_LOG_FORMAT"))
    # /metrics is served only to a scraper sending `Authorization: Bearer <this>`; unset, it is not served
    # (it names routes, pool sizes and job counts: docs/decisions.md, "Operations under failure").
    metrics_token: SecretStr | None = Field(None, validation_alias=env("TENET_METRICS_TOKEN"))

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return normalize_forwarded_allow_ips(value)

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _token_long_enough(cls, value: Any) -> Any:
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text is None or (isinstance(text, str) and not text.strip()):
            return None
        if isinstance(text, str) and len(text.strip()) < METRICS_TOKEN_MIN_LENGTH:
            raise ValueError(f"must be at least {METRICS_TOKEN_MIN_LENGTH} characters long (a random value: "
                             "python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        return text.strip() if isinstance(text, str) else value

    @field_validator("database_url", "database_direct_url", "database_read_url")
    @classmethod
    def _postgresql(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Checked here, so every command stops with one line (status 2) instead of a traceback where the
        # URL is first used. The forms tenet.db.database.async_url turns into psycopg's.
        if value is None or not value.strip():
            return None
        if not value.startswith(POSTGRESQL_URL_PREFIXES):
            scheme = value.split(":", 1)[0] if ":" in value else "no scheme"
            variable = _URL_VARIABLES.get(info.field_name or "", "DATABASE_URL")
            raise ValueError(f"{variable} must be a PostgreSQL URL (postgresql://user:password@host/db), "
                             f"not {scheme[:20]}")
        return value

    @field_validator("default_timezone")
    @classmethod
    def _iana_zone(cls, value: str) -> str:
        if not is_iana_zone(value):
            raise ValueError(f"TENET_DEFAULT_TIMEZONE must be an IANA time zone such as Europe/Paris, not {value!r}")
        return value

    @field_validator("secret_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # HS256 with a short key is brute-forceable (RFC 7518 §3.2 asks for at least 256 bits). Length alone
        # lets "aaaa…" or "abababab…" through: a key must also use at least 10 different characters.
        if value is None:
            return value
        key = value.get_secret_value()
        if len(key) < SECRET_KEY_MIN_LENGTH:
            raise ValueError(f"must be at least {SECRET_KEY_MIN_LENGTH} characters long")
        if len(set(key)) < SECRET_KEY_MIN_DISTINCT:
            raise ValueError(f"must use at least {SECRET_KEY_MIN_DISTINCT} different characters (a random value: "
                             "python -c 'import secrets; print(secrets.token_urlsafe(48))')")
        return value

    @model_validator(mode="after")
    def _stalled_after_several_heartbeats(self) -> KernelSettings:
        # A live worker whose heartbeat is merely late must not lose its jobs to another (they would run twice).
        if self.stalled_worker_seconds < 3 * self.worker_heartbeat_seconds:
            raise ValueError("TENET_STALLED_WORKER_SECONDS must be at least three TENET_WORKER_HEARTBEAT_SECONDS")
        return self

    @model_validator(mode="after")
    def _scale_out_needs_a_database_url(self) -> KernelSettings:
        # A pooler, a direct address or a standby only make sense beside a server of one's own: the embedded
        # database is one process's, on a Unix socket.
        for name, value in (("TENET_DATABASE_PGBOUNCER", self.database_pgbouncer),
                            ("TENET_DATABASE_DIRECT_URL", self.database_direct_url),
                            ("TENET_DATABASE_READ_URL", self.database_read_url)):
            if value and not self.database_url:
                raise ValueError(f"{name} needs DATABASE_URL (it has no meaning on the embedded database)")
        return self

    @property
    def server_side_prepare(self) -> bool:
        """Whether psycopg may prepare statements on the server: not through a transaction pooler."""
        return not self.database_pgbouncer

    @property
    def session_database_url(self) -> str | None:
        """Where session-level features (LISTEN, session advisory locks, migrations) connect."""
        return self.database_direct_url or self.configured_database_url

    @property
    def uses_embedded_database(self) -> bool:
        return not self.database_url

    @property
    def configured_database_url(self) -> str | None:
        """DATABASE_URL, else the embedded server's address when a parent process already resolved it."""
        return self.database_url or self.embedded_database_url

    @property
    def pgdata_dir(self) -> Path:
        return self.data_dir.resolve() / "pgdata"

    def mail(self) -> MailSettings:
        """The outbox's mail settings."""
        return MailSettings(
            smtp_host=self.smtp_host or None, smtp_port=self.smtp_port, smtp_username=self.smtp_username,
            smtp_password=self.smtp_password.get_secret_value() if self.smtp_password else None,
            smtp_starttls=self.smtp_starttls, mail_from=self.mail_from,
        )

    def signing_key(self) -> str:
        """The signing key: TENET_SECRET_KEY, or (development only, on the embedded database) one generated
        into the data dir. With DATABASE_URL and no TENET_SECRET_KEY this refuses (MissingSecretKey): each
        machine of a fleet would generate its own key and tokens would fail across the load balancer."""
        if self.secret_key is not None:
            return self.secret_key.get_secret_value()
        if not self.uses_embedded_database:
            raise MissingSecretKey(
                "TENET_SECRET_KEY is not set. With DATABASE_URL (a shared database, possibly several machines) "
                "every process must sign tokens with the same key: set TENET_SECRET_KEY to the same random "
                "value of at least 32 characters everywhere (for example: python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))')."
            )
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


def describe_invalid(error: ValidationError) -> list[str]:
    """One line per invalid setting: the variable and what is wrong with it, never its value (a secret key,
    a password). Pydantic's messages do not quote the input; a validator's message that did is redacted."""
    lines = []
    for issue in error.errors(include_url=False):
        name = ".".join(str(part) for part in issue.get("loc", ())) or "settings"
        message = str(issue.get("msg", "is not valid")).removeprefix("Value error, ")
        value = issue.get("input")
        if isinstance(value, str) and len(value) >= 3 and value in message:
            message = message.replace(value, "<the value>")
        lines.append(f"invalid setting {name}: {message}")
    return lines


S = TypeVar("S", bound=BaseSettings)


def compose(sections: Iterable[type[BaseSettings]]) -> type[KernelSettings]:
    """One settings class inheriting the kernel's section and every domain's (duplicates dropped)."""
    bases: list[type[BaseSettings]] = []
    for section in sections:
        if section is not KernelSettings and section not in bases:
            bases.append(section)
    # Later sections first in the MRO is irrelevant (field names never collide: a test checks), but the
    # kernel's section comes last so its model_config is the one in force.
    composed = type("Settings", (*bases, KernelSettings), {"__module__": "tenet.settings",
                                                            "model_config": SECTION_CONFIG})
    return cast(type[KernelSettings], composed)


def section(settings: BaseSettings, kind: type[S]) -> S:
    """`settings` seen as one section: the composed object is an instance of every section's class."""
    if not isinstance(settings, kind):
        raise TypeError(f"these settings have no {kind.__name__} section: is its domain in tenet.domains?")
    return settings
