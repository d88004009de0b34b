"""The API reference pages (Swagger UI at /api/docs/, ReDoc at /api/redoc/) and the favicon
load everything from this server: they work offline and tell no third party who reads them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.test import Client

from tests.dashboard.browser import live_server

DOC_PAGES = ["/api/docs/", "/api/redoc/"]
# what each page shows once it has drawn the schema
DRAWN = {"/api/docs/": ".swagger-ui .info .title", "/api/redoc/": ".api-info h1"}


def referenced_urls(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)


@pytest.mark.parametrize("path", DOC_PAGES)
def test_doc_pages_reference_only_this_server(path):
    response = Client().get(path)

    assert response.status_code == 200
    html = response.content.decode()
    urls = referenced_urls(html)
    assert any(url.startswith("/static/drf_spectacular_sidecar/") for url in urls), urls
    external = [url for url in urls if urlsplit(url).scheme or url.startswith("//")]
    assert external == []
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html


def test_favicon_is_linked_and_served_at_the_root():
    assert finders.find("favicon.svg")
    response = Client().get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"] == static("favicon.svg")

    page = Client().get("/api/redoc/").content.decode()
    assert static("favicon.svg") in referenced_urls(page)


# ---------------------------------------------------------------- in a browser


@pytest.fixture
def server_url(transactional_db) -> Iterator[str]:
    with live_server() as url:
        yield url


@pytest.mark.services
@pytest.mark.browser
@pytest.mark.parametrize("path", DOC_PAGES)
def test_doc_pages_draw_the_schema_with_no_request_leaving_the_server(path, server_url, browser):
    context = browser.new_context()
    requested: list[str] = []
    local = urlsplit(server_url).netloc

    def route(route) -> None:
        url = route.request.url
        requested.append(url)
        if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != local:
            route.abort()  # never reach the internet from a test, and fail below
        else:
            route.continue_()

    context.route("**/*", route)
    page = context.new_page()
    try:
        page.goto(server_url + path)
        page.wait_for_selector(DRAWN[path], timeout=30_000)
        page.wait_for_load_state("networkidle")
        assert "TAS service API" in page.inner_text(DRAWN[path])
    finally:
        context.close()

    external = [url for url in requested
                if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != local]
    assert external == []
    assert any("/static/drf_spectacular_sidecar/" in url for url in requested), requested


@pytest.mark.services
@pytest.mark.browser
def test_the_browser_gets_the_favicon_at_the_root(server_url, browser):
    context = browser.new_context()
    page = context.new_page()
    try:
        response = page.goto(server_url + "/favicon.ico")
        assert response is not None and response.status == 200
        assert response.headers["content-type"].startswith("image/svg+xml")
        assert response.url.endswith(static("favicon.svg"))
    finally:
        context.close()
