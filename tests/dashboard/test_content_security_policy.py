"""Every page is served with a strict Content-Security-Policy (no inline script, everything
from this server), and under it the dashboard draws its Plotly figures and the API reference
pages draw the schema, with no violation reported by the browser."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.dashboard.browser import wait_drawn

pytestmark = [pytest.mark.services, pytest.mark.browser]

# Recorded from the first script the page runs, before any of the page's own.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI} (${e.sourceFile}:${e.lineNumber})`);
});
"""

DASHBOARD_PAGES = ["/topology/", "/workloads/", "/queues/", "/history/"]


def test_every_response_carries_the_policy(db):
    client = Client()
    for url in ["/topology/", "/api/v1/", "/healthz", "/accounts/login/"]:
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["default-src"] == "'self'"
        assert directives["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


def open_watched(browser, url: str):
    context = browser.new_context()
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(url)
    return context, page, console


# ReDoc's sidebar shows Redocly's logo from their CDN, with no option to turn it off: the
# policy blocks it on purpose (nothing leaves the server) and ReDoc drops the image.
EXPECTED = ("https://cdn.redoc.ly/",)


def violations(page, console: list[str]) -> list[str]:
    found = page.evaluate("() => window.__cspViolations") + console
    return [text for text in found if not any(url in text for url in EXPECTED)]


@pytest.mark.parametrize("path", DASHBOARD_PAGES)
def test_dashboard_pages_draw_their_figures_with_no_violation(live_cluster, server_url, browser, path):
    context, page, console = open_watched(browser, server_url + path)
    try:
        wait_drawn(page)
        drawn = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                              ".map((el) => el.querySelectorAll('svg.main-svg').length)")
        if path == "/topology/":
            assert drawn and all(count > 0 for count in drawn), drawn  # Plotly drew every figure
        page.wait_for_timeout(300)
        assert violations(page, console) == []
    finally:
        context.close()


@pytest.mark.parametrize(("path", "drawn"), [("/api/docs/", ".swagger-ui .info .title"),
                                             ("/api/redoc/", ".api-info h1")])
def test_api_reference_pages_draw_with_no_violation(transactional_db, server_url, browser, path, drawn):
    context, page, console = open_watched(browser, server_url + path)
    try:
        page.wait_for_selector(drawn, timeout=30_000)
        page.wait_for_timeout(300)
        assert violations(page, console) == []
    finally:
        context.close()
