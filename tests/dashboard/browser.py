"""Headless Chromium (Debian's `chromium`, driven by Playwright) against a live server of
the project, for the dashboard's browser tests and its benchmark.

The server is Django's threaded test server without its static-files handler, so static
files go through the WhiteNoise middleware (from the finders, with the gzip copy of
plotly.min.js beside it) exactly as `make run` serves them: the bytes a browser receives
are the bytes a user's browser receives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("TAS_CHROMIUM") or "/usr/bin/chromium"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def screenshot_dir() -> Path:
    """Where page screenshots go: TAS_SCREENSHOT_DIR, default var/test-artifacts/screenshots."""
    path = Path(os.environ.get("TAS_SCREENSHOT_DIR") or PROJECT_ROOT / "var" / "test-artifacts" / "screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium_path() -> str:
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not found:
        raise RuntimeError(f"Chromium not found at {CHROMIUM}: install Debian's package (apt-get install -y chromium) "
                           "or set TAS_CHROMIUM to its path")
    return found


@contextlib.contextmanager
def live_server(host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """The project's WSGI application on a free port, in a thread; yields its base URL.
    Static files are served by WhiteNoise from the finders (as in the embedded default).
    With `tls` (a server context holding its certificate), it serves https."""
    from django.test.testcases import LiveServerThread
    from django.test.utils import override_settings

    class ServerThread(LiveServerThread):
        def _create_server(self, connections_override=None):
            httpd = super()._create_server(connections_override)
            if tls is not None:
                httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
            return httpd

    with override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=False, ALLOWED_HOSTS=["*"]):
        server = ServerThread(host, static_handler=lambda app: app, port=0)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        try:
            yield f"{'https' if tls else 'http'}://{host}:{server.port}"
        finally:
            server.terminate()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True,
            # as root (CI, containers) Chromium refuses to start with its sandbox
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class PageLoad:
    url: str
    seconds: float  # navigation start -> every figure drawn
    bytes: int  # every response's encoded body and headers
    responses: list[tuple[str, int]] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    # milliseconds from navigation start: the page's last byte, the dashboard script's start
    # (Plotly loaded and compiled before it), every figure drawn
    phases: dict[str, float] = field(default_factory=dict)


class Watcher:
    """Console errors, page errors, failed requests and transferred bytes of one page."""

    def __init__(self, page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.requests: list[Any] = []
        self.handlers = {
            "console": lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
            "pageerror": lambda e: self.errors.append(f"page error: {e}"),
            "requestfailed": self.request_failed,
            "requestfinished": lambda r: self.requests.append(r),
        }
        for event, handler in self.handlers.items():
            page.on(event, handler)

    def request_failed(self, request) -> None:
        # The browser fetches the favicon on its own, after the page; the next navigation
        # aborts that fetch when it comes first. That is the browser, not the page failing.
        if request.url.endswith("/favicon.svg") and "ERR_ABORTED" in str(request.failure):
            return
        self.errors.append(f"request failed: {request.url} {request.failure}")

    def detach(self) -> None:
        for event, handler in self.handlers.items():
            self.page.remove_listener(event, handler)

    def transferred(self) -> tuple[int, list[tuple[str, int]]]:
        rows = []
        for request in self.requests:
            sizes = request.sizes()
            rows.append((request.url, sizes["responseBodySize"] + sizes["responseHeadersSize"]))
        return sum(n for _, n in rows), rows


def wait_drawn(page, timeout_ms: float = 30_000) -> None:
    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=timeout_ms)


def load(page, url: str, *, timeout_ms: float = 60_000) -> PageLoad:
    """Open `url` and wait for every figure; time from navigation start to the page's
    `tas:figures-drawn` mark, bytes from the responses."""
    watcher = Watcher(page)
    started = time.perf_counter()
    page.goto(url, wait_until="commit", timeout=timeout_ms)
    try:
        wait_drawn(page, timeout_ms)
    except Exception as exc:
        raise AssertionError(f"{url} never finished drawing; console: {watcher.errors}") from exc
    wall = time.perf_counter() - started
    phases = page.evaluate(
        "() => { const mark = (n) => { const m = performance.getEntriesByName(n)[0]; return m ? m.startTime : null; };"
        " const nav = performance.getEntriesByType('navigation')[0];"
        " const out = {html: nav ? nav.responseEnd : null, script: mark('tas:script-start'),"
        " drawn: mark('tas:figures-drawn')};"
        " for (const m of performance.getEntriesByType('measure')) if (m.name.startsWith('tas:draw:'))"
        "   out[m.name.slice(4)] = m.duration;"
        " return out; }")
    drawn_ms = phases["drawn"]
    page.wait_for_load_state("load")
    total, rows = watcher.transferred()
    watcher.detach()
    return PageLoad(url=url, seconds=(drawn_ms / 1000.0) if drawn_ms is not None else wall, bytes=total,
                    responses=rows, console=watcher.errors,
                    phases={k: round(v) for k, v in phases.items() if v is not None})
