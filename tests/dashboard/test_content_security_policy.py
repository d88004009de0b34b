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


def directives_of(response) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))


def test_every_response_carries_the_policy(db):
    client = Client()
    for url in ["/topology/", "/api/v1/", "/healthz", "/accounts/login/", "/api/docs/", "/api/redoc/"]:
        directives = directives_of(client.get(url))
        assert directives["default-src"] == "'self'"
        assert directives["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


def test_styles_are_files_everywhere_but_the_api_reference_pages(db):
    client = Client()
    for url in ["/topology/", "/workloads/", "/api/v1/", "/accounts/login/"]:
        directives = directives_of(client.get(url))
        assert directives["style-src"] == "'self'"
        attr = directives["style-src-attr"].split()
        # only the fixed values Plotly writes, by hash: no 'unsafe-inline'
        assert attr[0] == "'unsafe-hashes'" and all(v.startswith("'sha256-") for v in attr[1:]), attr
        assert "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='" in attr  # the empty value
    for url in ["/api/docs/", "/api/redoc/"]:
        assert "'unsafe-inline'" in directives_of(client.get(url))["style-src"]


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


def test_plotly_takes_its_style_sheet_from_the_file_and_adds_no_inline_style(live_cluster, server_url, browser):
    context, page, console = open_watched(browser, server_url + "/topology/")
    try:
        wait_drawn(page)
        # the file's rules apply (Plotly's own layering of its SVG layers)
        assert page.evaluate("() => getComputedStyle(document.querySelector('.js-plotly-plot .main-svg')).position") \
            == "absolute"
        assert page.evaluate("() => document.querySelectorAll('style[id^=\"plotly.js-style\"]').length") == 0
        box = page.locator(".js-plotly-plot").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # hover labels, mode bar
        page.wait_for_timeout(500)
        assert page.evaluate("() => getComputedStyle(document.querySelector('.modebar')).position") == "absolute"
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
