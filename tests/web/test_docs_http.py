"""`/`, `/docs` and `/redoc` over plain HTTP: HTML from the service, every asset they reference served by
the service too, and a Content-Security-Policy that allows no other origin and no inline script."""

from __future__ import annotations

import re

import pytest

PAGES = ["/", "/docs", "/redoc"]


def referenced(html: str) -> list[str]:
    return re.findall(r'(?:src|href|spec-url|data-spec-url|data-openapi-url)="([^"]+)"', html)


@pytest.mark.parametrize("path", PAGES)
async def test_the_page_is_html_with_a_strict_policy(client, path):
    response = await client.get(path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "http" not in policy
    assert "<script>" not in response.text  # no inline script: every one is a file from 'self'
    assert not [url for url in referenced(response.text) if not url.startswith("/")]


async def test_every_asset_the_docs_pages_reference_is_served(client):
    fetched = {}
    for page in ["/docs", "/redoc"]:
        for url in referenced((await client.get(page)).text):
            response = await client.get(url)
            fetched[url] = (response.status_code, response.headers["content-type"].split(";")[0])
    assert fetched["/docs/assets/swagger-ui-bundle.js"] == (200, "text/javascript")
    assert fetched["/docs/assets/swagger-ui.css"] == (200, "text/css")
    assert fetched["/docs/assets/redoc.standalone.js"] == (200, "text/javascript")
    assert fetched["/static/swagger-ui-init.js"] == (200, "text/javascript")
    assert fetched["/static/redoc-init.js"] == (200, "text/javascript")
    assert fetched["/openapi.json"] == (200, "application/json")
    assert {status for status, _ in fetched.values()} == {200}, fetched


async def test_redoc_styles_carry_a_nonce_of_their_own_response(client):
    first, second = await client.get("/redoc"), await client.get("/redoc")
    nonces = []
    for response in (first, second):
        nonce = re.search(r"style-src 'self' 'nonce-([\w-]+)'", response.headers["content-security-policy"]).group(1)
        assert f'data-style-nonce="{nonce}"' in response.text
        nonces.append(nonce)
    assert nonces[0] != nonces[1]


async def test_the_home_page_links_the_docs(client):
    html = (await client.get("/")).text
    assert {"/console", "/docs", "/redoc", "/openapi.json", "/healthz", "/readyz"} <= set(referenced(html))
    for system in ["tenet.iam", "tenet.workspaces", "tenet.social", "tenet.meetings", "tenet.reservations"]:
        assert system in html
