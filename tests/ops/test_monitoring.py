"""deploy/prometheus and deploy/grafana held to the code (issue 21, "Also"): the alert rules, their unit tests, the
scrape configuration and the dashboard's queries pass promtool; every rule says what fired and why and waits a
`for:`; and every series the dashboard and the rules select is one a running app's /metrics exports, so neither
can drift from the code. Every family /metrics exports is documented in docs/operations.md."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from tenet.app import create_app
from tests.conftest import ROOT, test_settings
from tests.support.live import METRICS_AUTHORIZATION
from tests.support.metrics import (
    ALERTS,
    DEPLOY,
    METRICS_TOKEN,
    STANDBY_SERIES,
    alert_rules,
    dashboard_queries,
    sample_names,
    scrape,
    series_used,
)

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install prometheus; `make test` installs it)")
PROMETHEUS = DEPLOY / "prometheus"


def promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@needs_promtool
def test_the_alert_rules_pass_promtool():
    assert f"SUCCESS: {len(alert_rules())} rules found" in promtool("check", "rules", ALERTS.name)


@needs_promtool
def test_the_alert_rules_unit_tests_pass():
    """alerts_test.yml: the outbox backlog fires only after its `for:`, one alert for all processes, and others."""
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml")


@needs_promtool
def test_the_scrape_configuration_passes_promtool(tmp_path):
    """As shipped (syntax), and whole (its rule files too) with the token file where the Compose secret puts it
    replaced by one that exists here."""
    promtool("check", "config", "--syntax-only", "prometheus.yml")
    config = (PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8")
    secret = yaml.safe_load(config)["scrape_configs"][0]["authorization"]["credentials_file"]
    (tmp_path / "token").write_text("scrape-token-0123456789abcdef\n")
    (tmp_path / "prometheus.yml").write_text(config.replace(secret, str(tmp_path / "token")))
    shutil.copy(ALERTS, tmp_path / ALERTS.name)
    assert "SUCCESS" in promtool("check", "config", "prometheus.yml", cwd=tmp_path)


@needs_promtool
def test_the_dashboard_s_queries_are_promql(tmp_path):
    """Each query, Grafana's variables filled in, as a recording rule: promtool parses every expression."""
    rules = [{"record": f"tenet:dashboard_query_{n}", "expr": query} for n, query in enumerate(dashboard_queries())]
    assert len(rules) > 20
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    promtool("check", "rules", "dashboard.yml", cwd=tmp_path)


def test_every_alert_rule_says_what_fired_and_waits_before_firing():
    rules = alert_rules()
    assert len({rule["alert"] for rule in rules}) == len(rules)
    for rule in rules:
        assert rule["annotations"]["summary"].strip() and rule["annotations"]["description"].strip(), rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]) and rule["for"] != "0s", rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]


@pytest.fixture
async def exposition(db, clock, tmp_path) -> str:
    """/metrics of an app on the test database, after one request (the HTTP series appear with their first)."""
    app = create_app(test_settings(data_dir=tmp_path, metrics_token=METRICS_TOKEN), database=db, clock=clock,
                     run_background_tasks=False)
    await scrape(app)
    return await scrape(app)


async def test_every_series_the_dashboard_and_the_alerts_select_is_exported(exposition):
    used = series_used()
    assert {"tenet_http_requests_total", "tenet_outbox_oldest_due_age_seconds",
            "tenet_outlook_webhook_ack_seconds_bucket"} <= used  # the extraction finds them
    missing = {name for name in used if not name.startswith(STANDBY_SERIES)} - sample_names(exposition)
    assert missing == set(), f"the dashboard or the alerts select series /metrics does not export: {missing}"


async def test_every_family_exported_is_documented(exposition):
    operations = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    # As a query names them: a counter with its `_total`, a histogram without its `_bucket`, `_count`, `_sum`.
    names = {re.sub(r"_(bucket|count|sum)$", "", name) for name in sample_names(exposition)
             if name.startswith("tenet_") and not name.endswith("_created")}
    names |= {"tenet_db_standby_in_use", "tenet_db_standby_lag_seconds", "tenet_db_reads_routed_total"}
    undocumented = sorted(name for name in names if f"`{name}`" not in operations)
    assert undocumented == [], "docs/operations.md, Monitoring, should list them"


@needs_promtool
async def test_the_exposition_passes_promtool_s_lint(exposition, tmp_path):
    """Prometheus' own naming rules (units as `_seconds`, counters ending `_total`, no reserved suffixes)."""
    assert PROMTOOL is not None
    done = await asyncio.to_thread(subprocess.run, [PROMTOOL, "check", "metrics"], input=exposition,
                                   capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.live_server
def test_a_multi_process_server_s_exposition_passes_promtool(live_server):
    """`tenet serve --workers 2` (prometheus_client's multi-process mode): a later scrape, whichever process answers,
    is still one family per name (promtool refuses a second TYPE line) with the series deploy/ selects."""
    for _ in range(3):
        exposition = httpx.get(f"{live_server.url}/metrics", headers=METRICS_AUTHORIZATION, timeout=30).text
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'pid="' not in exposition
    missing = {name for name in series_used() if not name.startswith(STANDBY_SERIES)} - sample_names(exposition)
    assert missing == set()
