"""Scraping /metrics of an in-process app and reading its exposition: what the metrics tests and the checks of the
dashboard and alert rules in deploy/ share."""

from __future__ import annotations

import httpx
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
