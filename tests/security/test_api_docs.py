"""/api/docs/ renders offline: Swagger UI comes from our own static files, under the site's CSP.

tests/browser/test_api_docs.py loads it in Chromium with every other host unreachable."""

from __future__ import annotations


def test_the_docs_page_loads_only_our_own_assets_under_the_csp(client, alice):
    client.force_login(alice)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn.jsdelivr.net" not in html and "@latest" not in html and "<script>" not in html
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
