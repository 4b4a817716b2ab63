"""Scraping /metrics of an in-process app and reading its exposition: what the metrics tests and the checks of the
dashboard and alert rules in deploy/ share."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

METRICS_TOKEN = "metrics-test-token-0123456789abcdef"
SCRAPE_HEADERS = {"Authorization": f"Bearer {METRICS_TOKEN}"}


async def scrape(app) -> str:
    """The app's /metrics as Prometheus would get it (the app must be made with metrics_token=METRICS_TOKEN)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/metrics", headers=SCRAPE_HEADERS)
    assert response.status_code == 200, response.text
    return response.text


def samples(exposition: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of an exposition by (sample name, labels): `x_bucket`, `x_count`, `x_total` as Prometheus
    stores them."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(exposition) for sample in family.samples}


def value(exposition: str, name: str, **labels: str) -> float | None:
    """The value of one sample, or None when the exposition has no such sample."""
    return samples(exposition).get((name, frozenset(labels.items())))


def sample_names(exposition: str) -> set[str]:
    """The names a PromQL query can select in this exposition."""
    return {name for name, _ in samples(exposition)}


# --- what deploy/ asks of /metrics ------------------------------------------------------------------------------

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "tenet.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
# A selector of one of Tenet's series in PromQL (Prometheus' own, `up`, is not Tenet's to export).
_TENET_SERIES = re.compile(r"\btenet_[A-Za-z0-9_:]*")
# Grafana's variables, as Prometheus would see them once Grafana has put in their values.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$instance": ".*", "${datasource}": "prometheus"}
# Series only an API process with a standby configured (TENET_DATABASE_READ_URL) exports: checked on a real
# standby by tests/ops/test_read_replica.py.
STANDBY_SERIES = ("tenet_db_standby_", "tenet_db_reads_routed")


def _panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def dashboard_variable_queries() -> list[str]:
    """The queries of the dashboard's variables (Grafana's `label_values(...)`, not PromQL)."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [variable["definition"] for variable in dashboard["templating"]["list"] if variable.get("definition")]


def dashboard_queries() -> list[str]:
    """Every PromQL query of the Grafana dashboard's panels, Grafana's variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [target["expr"] for panel in _panels(dashboard["panels"]) for target in panel.get("targets", [])]
    filled = []
    for query in queries:
        for variable, value in GRAFANA_VARIABLES.items():
            query = query.replace(variable, value)
        filled.append(query)
    return filled


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"] for rule in group["rules"]]


def series_used() -> set[str]:
    """The names of Tenet's series that the dashboard and the alert rules select."""
    queries = dashboard_queries() + dashboard_variable_queries() + [rule["expr"] for rule in alert_rules()]
    return {name for query in queries for name in _TENET_SERIES.findall(query)}
