"""Settings come from the environment with the names API.md gives them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from tenet.settings import Settings
from tests.conftest import TEST_SECRET


def test_environment_names_of_the_contract(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("TENET_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TENET_LOGIN_FAILURE_LIMIT", "5/10min")
    monkeypatch.setenv("TENET_REGISTRATION_LIMIT", "7/hour")
    monkeypatch.setenv("TENET_GUEST_CHECKIN_LIMIT", "30/minute")
    monkeypatch.setenv("TENET_SMTP_HOST", "mail.example.com")
    monkeypatch.setenv("MEETING_ATTACHMENT_MAX_BYTES", "1024")
    monkeypatch.setenv("GRAPH_BASE_URL", "http://127.0.0.1:9999/v1.0")
    settings = Settings(_env_file=None)
    assert settings.database_url == "postgresql://u@h/db" and settings.data_dir == tmp_path
    assert (settings.login_failure_limit.limit, settings.login_failure_limit.window) == (5, timedelta(minutes=10))
    assert settings.registration_limit.limit == 7 and settings.guest_checkin_limit.limit == 30
    assert settings.smtp_host == "mail.example.com" and settings.meeting_attachment_max_bytes == 1024
    assert settings.graph_base_url == "http://127.0.0.1:9999/v1.0"


def test_defaults_match_the_contract(monkeypatch):
    for name in ("DATABASE_URL", "TENET_LOGIN_FAILURE_LIMIT", "TENET_REGISTRATION_LIMIT", "TENET_DEFAULT_TIMEZONE"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(_env_file=None)
    assert settings.uses_embedded_database
    assert str(settings.login_failure_limit) == "10/900s" and str(settings.registration_limit) == "20/3600s"
    assert settings.default_timezone == "America/Los_Angeles"
    assert settings.meeting_attachment_max_bytes == 209715200


def test_a_malformed_rate_is_refused(monkeypatch):
    monkeypatch.setenv("TENET_LOGIN_FAILURE_LIMIT", "lots")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)


@pytest.mark.parametrize("zone", ["right/UTC", "posix/Asia/Shanghai", "localtime", "Factory", "PST"])
def test_a_default_timezone_that_is_no_iana_zone_is_refused(monkeypatch, zone):
    monkeypatch.setenv("TENET_DEFAULT_TIMEZONE", zone)
    with pytest.raises(ValidationError, match="TENET_DEFAULT_TIMEZONE"):
        Settings(_env_file=None)


def test_the_development_key_is_generated_once_and_kept(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    first = settings.signing_key()
    assert len(first) >= 32 and Settings(_env_file=None, data_dir=tmp_path).signing_key() == first
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


def test_a_short_secret_key_is_refused():
    with pytest.raises(ValidationError, match="at least 32"):
        Settings(_env_file=None, secret_key="short")


@pytest.mark.parametrize("key", ["a" * 64, "ab" * 32, "0123456780" * 4, "passwordpassword" * 3])
def test_a_long_key_of_few_different_characters_is_refused(key):
    """Review item 6: 32 characters is not enough on its own; "aaaa…" has no strength at any length."""
    with pytest.raises(ValidationError, match="at least 10 different characters"):
        Settings(_env_file=None, secret_key=key)


@pytest.mark.parametrize("key", ["0123456789" * 4, "correct-horse-battery-staple-2026!", TEST_SECRET])
def test_a_key_of_32_characters_and_10_different_ones_is_accepted(key):
    assert Settings(_env_file=None, secret_key=key).signing_key() == key


def test_a_weak_key_in_the_environment_stops_the_command_without_showing_it(tmp_path):
    import subprocess
    import sys

    from tests.support.live import service_env

    weak = "x" * 48
    env = service_env(DATABASE_URL="postgresql://postgres@127.0.0.1:1/none", TENET_DATA_DIR=str(tmp_path),
                      TENET_SECRET_KEY=weak)
    result = subprocess.run([sys.executable, "-m", "tenet", "serve", "--port", "1"], env=env, capture_output=True,
                            text=True, timeout=60)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, output
    assert output.startswith("tenet: invalid setting TENET_SECRET_KEY: must use at least 10 different characters")
    assert weak not in output and len(output.splitlines()) == 1


@pytest.mark.parametrize("url", ["mysql://root:hunter2-secret@127.0.0.1/test", "sqlite:///tenet.db", "localhost/db"])
def test_a_database_url_that_is_not_postgresql_stops_the_command_in_one_line(url, tmp_path):
    import subprocess
    import sys

    from tests.support.live import service_env

    env = service_env(DATABASE_URL=url, TENET_DATA_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "tenet", "migrate"], env=env, capture_output=True, text=True,
                            timeout=60)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, output
    assert output.startswith("tenet: invalid setting DATABASE_URL: DATABASE_URL must be a PostgreSQL URL")
    assert "hunter2" not in output and len(output.splitlines()) == 1


@pytest.mark.parametrize("url", ["postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg://u@h/db"])
def test_every_postgresql_url_form_is_accepted(url):
    assert Settings(_env_file=None, database_url=url).database_url == url


def test_a_shared_database_without_a_secret_key_refuses_to_sign(tmp_path):
    """Issue 6.9: with DATABASE_URL every process of a fleet must share TENET_SECRET_KEY; generating one per
    machine would make tokens fail across the load balancer."""
    from tenet.kernel.settings import MissingSecretKey

    settings = Settings(_env_file=None, database_url="postgresql://u@h/db", data_dir=tmp_path)
    with pytest.raises(MissingSecretKey, match="TENET_SECRET_KEY"):
        settings.signing_key()
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["worker"]])
def test_serve_and_worker_refuse_to_start_without_a_secret_key_on_a_shared_database(command, tmp_path):
    import subprocess
    import sys

    from tests.support.live import service_env

    env = service_env(DATABASE_URL="postgresql://postgres@127.0.0.1:1/none", TENET_DATA_DIR=str(tmp_path))
    env.pop("TENET_SECRET_KEY")
    result = subprocess.run([sys.executable, "-m", "tenet", *command], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "TENET_SECRET_KEY" in result.stdout + result.stderr


def test_trusted_proxies_come_only_from_tenets_own_variable(monkeypatch):
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # uvicorn's own variable: never trusted by Tenet
    monkeypatch.delenv("TENET_FORWARDED_ALLOW_IPS", raising=False)
    assert Settings(_env_file=None).forwarded_allow_ips is None
    monkeypatch.setenv("TENET_FORWARDED_ALLOW_IPS", " 10.0.0.1, 10.1.0.0/16 ,")
    assert Settings(_env_file=None).forwarded_allow_ips == "10.0.0.1,10.1.0.0/16"
    monkeypatch.setenv("TENET_FORWARDED_ALLOW_IPS", " ")
    assert Settings(_env_file=None).forwarded_allow_ips is None


def test_only_the_documented_variables_are_read(monkeypatch):
    """pydantic-settings would also read a field's bare name (SECRET_KEY, LOG_LEVEL, SMTP_HOST...) from the
    environment; a container's unrelated variables must not configure Tenet."""
    monkeypatch.setenv("LOG_LEVEL", "nonsense")
    monkeypatch.setenv("LOG_FORMAT", "xml")
    monkeypatch.setenv("SMTP_HOST", "elsewhere.example")
    monkeypatch.delenv("TENET_SMTP_HOST", raising=False)
    settings = Settings(_env_file=None)
    assert settings.log_level == "INFO" and settings.log_format == "auto" and settings.smtp_host is None


@pytest.mark.parametrize("command,variable,value", [
    (["migrate"], "TENET_DB_READ_POOL_SIZE", "abc"),
    (["serve", "--port", "1"], "TENET_SECRET_KEY", "hunter2-is-my-password"),
    (["worker"], "TENET_LOGIN_FAILURE_LIMIT", "lots-and-lots"),
    (["invariants", "check"], "TENET_LOG_FORMAT", "xml-please"),
])
def test_an_invalid_setting_ends_the_command_with_one_line_naming_it_but_never_its_value(command, variable, value,
                                                                                         tmp_path):
    """Review item 5: pydantic's ValidationError used to end every command with a traceback that quoted the
    value (a secret key, a password). Now: status 2, one line naming the variable and what is wrong."""
    import subprocess
    import sys

    from tests.support.live import service_env

    env = service_env(DATABASE_URL="postgresql://postgres@127.0.0.1:1/none", TENET_DATA_DIR=str(tmp_path),
                      **{variable: value})
    result = subprocess.run([sys.executable, "-m", "tenet", *command], env=env, capture_output=True, text=True,
                            timeout=60)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 2, output
    assert len(output.splitlines()) == 1, output
    assert output.startswith(f"tenet: invalid setting {variable}: "), output
    assert value not in output and "Traceback" not in output


@pytest.mark.parametrize("command", [
    ["migrate"], ["invariants", "check"], ["users", "create-admin", "--email", "a@example.com", "--password", "x" * 12],
    ["demo"], ["serve", "--migrate", "--port", "1"],
])
def test_an_unreachable_database_ends_the_command_with_one_line_and_status_3(command, tmp_path):
    """Review item 7: a closed port used to end these commands with a traceback of several hundred lines."""
    import subprocess
    import sys

    from tests.support.live import free_port, service_env

    port = free_port()  # nothing listens there
    env = service_env(DATABASE_URL=f"postgresql://tenet:pa55word-not-shown@127.0.0.1:{port}/tenet",
                      TENET_DATA_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "tenet", *command], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.strip() == f"tenet: cannot reach the database at 127.0.0.1:{port} (Connection refused)"
    assert "pa55word" not in result.stdout + result.stderr and "Traceback" not in result.stdout


def test_only_a_failure_to_connect_is_reported_as_an_unreachable_database():
    import psycopg
    from sqlalchemy.exc import OperationalError

    from tenet.db.database import connection_failure

    refused = psycopg.OperationalError('connection failed: connection to server at "10.0.0.1", port 5432 failed: '
                                       "Connection refused")
    assert connection_failure(OperationalError("SELECT 1", {}, refused)) == "Connection refused"
    assert connection_failure(psycopg.errors.DeadlockDetected("deadlock detected")) is None
    assert connection_failure(psycopg.errors.UndefinedTable("relation does not exist")) is None
    assert connection_failure(RuntimeError("anything else")) is None


def test_the_scale_out_settings_come_from_their_documented_variables(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@pgbouncer:6432/db")
    monkeypatch.setenv("TENET_DATABASE_PGBOUNCER", "true")
    monkeypatch.setenv("TENET_DATABASE_DIRECT_URL", "postgresql://u@primary/db")
    monkeypatch.setenv("TENET_DATABASE_READ_URL", "postgresql://u@standby/db")
    monkeypatch.setenv("TENET_DATABASE_READ_MAX_LAG_SECONDS", "2.5")
    settings = Settings(_env_file=None)
    assert settings.database_pgbouncer and not settings.server_side_prepare
    assert settings.session_database_url == "postgresql://u@primary/db"
    assert settings.database_read_url == "postgresql://u@standby/db"
    assert settings.database_read_max_lag_seconds == 2.5


@pytest.mark.parametrize("variable, value", [("TENET_DATABASE_PGBOUNCER", "1"),
                                             ("TENET_DATABASE_DIRECT_URL", "postgresql://u@primary/db"),
                                             ("TENET_DATABASE_READ_URL", "postgresql://u@standby/db")])
def test_the_scale_out_settings_need_a_database_url(monkeypatch, variable, value):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=f"{variable} needs DATABASE_URL"):
        Settings(_env_file=None)


def test_a_read_url_that_is_not_postgresql_is_refused_by_its_own_name(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@primary/db")
    monkeypatch.setenv("TENET_DATABASE_READ_URL", "mysql://u@standby/db")
    with pytest.raises(ValidationError, match="TENET_DATABASE_READ_URL must be a PostgreSQL URL"):
        Settings(_env_file=None)
