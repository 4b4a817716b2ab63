"""deploy/'s container image and Compose topology (issue 21, "Also"), checked here without a container engine: the
Compose file follows the Compose specification and sets only Tenet's real settings, with values they accept and
secrets it requires instead of carrying; the services and the image run real `tenet` commands; the image holds no
secret, runs unprivileged, and its health check passes on a ready server and fails otherwise; the package it
installs from a wheel carries every file of src/tenet; the load balancer's nginx configuration passes `nginx -t` and
proxies to a live server. Where a container engine answers `docker info`, the image is built and the Compose file
brought up for real."""

from __future__ import annotations

import http.server
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main
import yaml
from pydantic import AliasChoices

from tenet import cli
from tenet.settings import Settings
from tests.conftest import ROOT
from tests.support.live import free_port

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# Values for the variables the Compose file requires (`${VAR:?...}`): a deployment's own secrets.
REQUIRED_SECRETS = {"POSTGRES_PASSWORD": "postgres-password-example", "REPLICATION_PASSWORD": "replication-example",
                    "TENET_SECRET_KEY": secrets.token_urlsafe(48), "TENET_METRICS_TOKEN": secrets.token_urlsafe(24)}
# Variables a setting of Tenet's is named by (the rest of an environment is the images' own: POSTGRES_*, PGDATA).
TENET_PREFIXES = ("TENET_", "DATABASE_", "GRAPH_", "MEETING_")
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


# --- the Compose file ---------------------------------------------------------------------------------------------


def interpolate(text: str, environment: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}`, as `docker compose` fills them in."""

    def value(match: re.Match[str]) -> str:
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        if environment.get(name):
            return environment[name]
        if op and op.endswith("?"):
            raise ValueError(f"{name}: {arg}")
        return arg if op else ""

    return _VARIABLE.sub(value, text)


def compose(environment: dict[str, str] | None = None) -> dict:
    text = interpolate(COMPOSE.read_text(encoding="utf-8"), REQUIRED_SECRETS if environment is None else environment)
    return yaml.safe_load(text)


def tenet_services(document: dict) -> dict[str, dict]:
    """The services that run the image of deploy/Dockerfile."""
    return {name: service for name, service in document["services"].items()
            if service.get("build", {}).get("dockerfile") == "deploy/Dockerfile"}


def setting_variables() -> set[str]:
    names: set[str] = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {choice for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names.add(alias)
    return names


def parse_tenet_command(arguments: list[str]) -> typer.Context:
    """What `tenet ARGUMENTS` would run, parsed by the CLI itself (an unknown command or option raises
    TyperException: typer's own click)."""
    group: Any = typer.main.get_command(cli.app)
    context = group.make_context("tenet", list(arguments))
    name, command, rest = group.resolve_command(context, list(arguments))
    assert command is not None, arguments
    return command.make_context(name or "", rest, parent=context)


def test_the_compose_file_follows_the_compose_specification():
    """The specification's JSON schema, as check-jsonschema vendors it: unknown keys, wrong shapes and types fail."""
    checker = Path(sys.executable).with_name("check-jsonschema")
    done = subprocess.run([str(checker), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_compose_file_requires_the_secrets_and_holds_none():
    for name in REQUIRED_SECRETS:
        others = {key: value for key, value in REQUIRED_SECRETS.items() if key != name}
        with pytest.raises(ValueError, match=name):
            compose(others)
    text = COMPOSE.read_text(encoding="utf-8")
    for value in REQUIRED_SECRETS.values():
        assert value not in text


def test_the_topology_is_the_scale_out_one():
    services = compose()["services"]
    assert {"primary", "replica", "pgbouncer", "migrate", "api", "worker", "nginx", "prometheus"} <= services.keys()
    assert int(services["api"]["deploy"]["replicas"]) >= 2 and int(services["worker"]["deploy"]["replicas"]) >= 2
    ini = (DEPLOY / "pgbouncer" / "pgbouncer.ini").read_text(encoding="utf-8")
    assert re.search(r"^pool_mode = transaction$", ini, re.M)
    replica = (DEPLOY / "postgres" / "replica-entrypoint.sh").read_text(encoding="utf-8")
    assert "pg_basebackup" in replica and "--write-recovery-conf" in replica
    assert services["nginx"]["depends_on"]["api"]["condition"] == "service_healthy"


def test_every_tenet_variable_the_compose_file_sets_is_a_setting_with_a_value_it_accepts():
    known = setting_variables()
    assert {"DATABASE_URL", "TENET_DATABASE_PGBOUNCER", "TENET_SECRET_KEY"} <= known  # the walk finds them
    services = tenet_services(compose())
    assert {"migrate", "api", "worker"} <= services.keys()
    for name, service in services.items():
        environment = {key: str(value) for key, value in service["environment"].items()}
        unknown = sorted(key for key in environment if key.startswith(TENET_PREFIXES) and key not in known)
        assert unknown == [], f"{name} sets variables Tenet does not read: {unknown}"
        settings = Settings(_env_file=None, **environment)  # type: ignore[call-arg]  # raises on a bad value
        assert settings.database_pgbouncer and settings.database_direct_url and settings.database_read_url, name
        assert settings.metrics_token is not None and settings.signing_key(), name
        assert not settings.uses_embedded_database, name


def test_every_service_runs_a_real_tenet_command():
    services = tenet_services(compose())
    commands = {name: parse_tenet_command(service["command"]).command.name for name, service in services.items()}
    assert commands == {"migrate": "migrate", "api": "serve", "worker": "worker"}
    serve = parse_tenet_command(services["api"]["command"])
    assert serve.params["host"] == "0.0.0.0" and serve.params["workers"] >= 2


def test_a_mistyped_command_is_caught():
    """The check above can fail."""
    with pytest.raises(typer.TyperException, match="--hots"):
        parse_tenet_command(["serve", "--hots", "0.0.0.0"])
    with pytest.raises(typer.TyperException, match="sreve"):
        parse_tenet_command(["sreve"])


# --- the Dockerfile -----------------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def _exec_form(arguments: str) -> list[str]:
    parsed = json.loads(arguments)
    assert isinstance(parsed, list) and all(isinstance(item, str) for item in parsed), arguments
    return parsed


def _final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[last_from:]


def test_the_image_is_built_in_stages_on_python_3_11_slim():
    instructions = dockerfile_instructions()
    arguments = dict(argument.split("=", 1) for name, argument in instructions if name == "ARG" and "=" in argument)
    bases = [argument.split()[0] for name, argument in instructions if name == "FROM"]
    assert len(bases) >= 2, "multi-stage: the wheel is built in a stage of its own"
    for base in bases:
        image = arguments.get(base.strip("${}"), base) if base.startswith("$") else base
        assert image.startswith("python:3.11-slim"), image


def test_the_image_runs_tenet_serve_unprivileged():
    final = _final_stage()
    names = [name for name, _ in final]
    users = [argument for name, argument in final if name == "USER"]
    assert users and users[-1] not in ("root", "0"), users
    assert names.index("USER") < names.index("ENTRYPOINT")
    [entrypoint] = [_exec_form(argument) for name, argument in final if name == "ENTRYPOINT"]
    [command] = [_exec_form(argument) for name, argument in final if name == "CMD"]
    assert entrypoint == ["tenet"]
    serve = parse_tenet_command(command)
    assert serve.command.name == "serve" and serve.params["host"] == "0.0.0.0"


def test_the_image_holds_no_secret_and_sets_only_real_settings():
    known = setting_variables()
    environment = []
    for name, argument in dockerfile_instructions():
        if name in ("ENV", "ARG"):
            variables = re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=", argument) or [argument.split("=")[0]]
            assert not [v for v in variables if re.search(r"SECRET|TOKEN|PASSWORD|KEY", v)], argument
            environment += variables if name == "ENV" else []
    assert "TENET_DATA_DIR" in environment  # the walk finds them
    assert sorted(v for v in environment if v.startswith(TENET_PREFIXES) and v not in known) == []


def _healthcheck_code() -> str:
    [healthcheck] = [argument for name, argument in _final_stage() if name == "HEALTHCHECK"]
    command = _exec_form(healthcheck.split("CMD", 1)[1].strip())
    assert command[:2] == ["python", "-c"], command
    return command[2]


def test_the_health_check_asks_readyz():
    from tenet.ops import router

    code = _healthcheck_code()
    [path] = re.findall(r"http://127\.0\.0\.1:8000(/[a-z]+)", code)
    assert path == "/readyz" and path in {route.path for route in router.routes}


@pytest.fixture
def answering_503() -> Iterator[str]:
    """A server that is up and not ready: every GET answers 503."""

    class NotReady(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotReady)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.live_server
def test_the_health_check_passes_on_a_ready_server_and_fails_otherwise(live_server, answering_503):
    code = _healthcheck_code()

    def check(address: str) -> int:
        return subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:8000", address)],
                              capture_output=True, timeout=30).returncode

    assert check(live_server.url.removeprefix("http://")) == 0
    assert check(answering_503) == 1
    assert check(f"127.0.0.1:{free_port()}") == 1  # nothing listens


def test_the_wheel_the_image_installs_carries_every_file_of_the_package(tmp_path):
    """The image installs the wheel built from what the Dockerfile copies (its COPY lines, from the project root):
    every file under src/tenet (migrations, templates, assets, catalogs) must be in it."""
    context = tmp_path / "context"
    for name, argument in dockerfile_instructions():
        if name == "COPY" and not argument.startswith("--"):
            *sources, _ = argument.split()
            for source in sources:
                origin = ROOT / source
                target = context / source
                if origin.is_dir():
                    shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(origin, target)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
                            str(tmp_path / "wheels"), str(context)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "wheels").glob("tenet-*.whl")
    packaged = set(zipfile.ZipFile(wheel).namelist())
    source = ROOT / "src"
    files = {str(path.relative_to(source)) for path in (source / "tenet").rglob("*")
             if path.is_file() and "__pycache__" not in path.parts}
    assert len(files) > 100
    assert sorted(files - packaged) == []


# --- the load balancer --------------------------------------------------------------------------------------------


def nginx_configuration(prefix: Path, *, upstream: str, listen_port: int) -> Path:
    """deploy/nginx/tenet.conf in a main configuration with a temporary prefix. Only addresses change: `api` resolves
    in Compose's network alone (here, the live server's address), and nginx listens on a free port."""
    block = (DEPLOY / "nginx" / "tenet.conf").read_text(encoding="utf-8")
    for old, new in (("server api:8000 ", f"server {upstream} "), ("listen 80;", f"listen 127.0.0.1:{listen_port};")):
        assert old in block, old
        block = block.replace(old, new)
    (prefix / "logs").mkdir(parents=True, exist_ok=True)
    temporaries = "\n".join(f"    {kind}_temp_path {prefix}/{kind};"
                            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    config = prefix / "nginx.conf"
    config.write_text(f"daemon off;\npid {prefix}/nginx.pid;\nerror_log {prefix}/logs/error.log warn;\n"
                      f"events {{ worker_connections 64; }}\nhttp {{\n    access_log off;\n{temporaries}\n"
                      f"{block}\n}}\n", encoding="utf-8")
    return config


def test_the_load_balancer_configuration_passes_nginx_t(tmp_path):
    if not Path(NGINX).exists():
        pytest.skip("nginx is missing: `make test` installs it (apt-get install nginx-light)")
    config = nginx_configuration(tmp_path, upstream="127.0.0.1:8000", listen_port=free_port())
    done = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(config)], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.live_server
def test_the_load_balancer_proxies_to_tenet_and_keeps_the_probes_inside(live_server, tmp_path):
    if not Path(NGINX).exists():
        pytest.skip("nginx is missing: `make test` installs it (apt-get install nginx-light)")
    port = free_port()
    config = nginx_configuration(tmp_path, upstream=live_server.url.removeprefix("http://"), listen_port=port)
    process = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                spec = httpx.get(f"{base}/openapi.json", timeout=60)  # a cold process builds it on a busy machine
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.1)
        assert spec.status_code == 200 and "/api/v1/auth/token" in spec.json()["paths"]
        probes = [httpx.get(f"{base}{path}", timeout=30).status_code for path in ("/readyz", "/healthz", "/metrics")]
        assert probes == [404] * 3
    finally:
        process.terminate()
        process.wait(20)


# --- with a container engine --------------------------------------------------------------------------------------


def _no_container_engine() -> str | None:
    """Why the image cannot be built and the Compose file brought up here, or None when they can."""
    docker = shutil.which("docker")
    if docker is None:
        return "no docker client on this machine"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"no container engine answers `docker info` ({reason})"
    if subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60).returncode != 0:
        return "the docker client has no compose plugin"
    return None


@pytest.mark.live_server
@pytest.mark.timeout(1200)
def test_the_image_builds_and_the_compose_topology_serves():
    reason = _no_container_engine()
    if reason is not None:
        pytest.skip(reason)
    http_port, prometheus_port = free_port(), free_port()
    project = f"tenet-test-{secrets.token_hex(3)}"
    environment = {**REQUIRED_SECRETS, "TENET_HTTP_PORT": str(http_port), "TENET_PROMETHEUS_PORT": str(prometheus_port),
                   "TENET_IMAGE": f"{project}:latest", "TENET_PGBOUNCER_IMAGE": f"{project}-pgbouncer:latest"}
    run_compose = ["docker", "compose", "--project-name", project, "--file", str(COMPOSE)]
    env = {**os.environ, **environment}
    try:
        subprocess.run([*run_compose, "up", "--detach", "--build"], env=env, check=True, timeout=900, cwd=ROOT)
        user = subprocess.run(["docker", "run", "--rm", "--entrypoint", "id", environment["TENET_IMAGE"], "-u"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        assert user != "0"
        deadline = time.monotonic() + 300
        while True:  # nginx starts once every API replica is healthy (/readyz)
            try:
                if httpx.get(f"http://127.0.0.1:{http_port}/openapi.json", timeout=10).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the topology did not serve through nginx within 5 minutes"
            time.sleep(2)
        deadline = time.monotonic() + 120
        while True:  # Prometheus scrapes every API replica with the token
            targets = httpx.get(f"http://127.0.0.1:{prometheus_port}/api/v1/query",
                                params={"query": 'up{job="tenet"}'}).json()["data"]["result"]
            if len(targets) >= 2 and all(target["value"][1] == "1" for target in targets):
                break
            assert time.monotonic() < deadline, targets
            time.sleep(2)
    finally:
        subprocess.run([*run_compose, "down", "--volumes", "--remove-orphans"], env=env, timeout=300, cwd=ROOT)
