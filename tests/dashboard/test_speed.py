"""The topology page for 10,000 nodes in headless Chromium: how long until every figure is
drawn and how many bytes it takes, first visit (empty cache, plotly.min.js included) and
later visits.

The target is 2 MiB on a first visit (everything transferred, Plotly included) and 2 s until
every figure is drawn. Bytes are held to TAS_DASHBOARD_MAX_BYTES (default 2 MiB). Time
depends on the machine: on a quiet 2-core machine a first visit takes 1.5-1.9 s (about 0.8 s
of it the browser compiling Plotly's cartesian bundle) and a later one 0.5-0.6 s; on the
2-core machines CI shares with other work, up to about twice that. So the default limits,
TAS_DASHBOARD_MAX_COLD_SECONDS (first visit, 5 s) and TAS_DASHBOARD_MAX_SECONDS (later
visits, 3 s), guard against regressions; set both to 2 to hold the target on a quiet machine.
The figures measured go to var/test-artifacts/dashboard-speed.json."""

from __future__ import annotations

import json
import os
import statistics
import sys
import urllib.request

import pytest

from tests.dashboard.browser import PROJECT_ROOT, load, screenshot_dir

pytestmark = [pytest.mark.services, pytest.mark.browser]

MAX_BYTES = int(os.environ.get("TAS_DASHBOARD_MAX_BYTES") or 2 * 1024 * 1024)
MAX_SECONDS = float(os.environ.get("TAS_DASHBOARD_MAX_SECONDS") or 3.0)
MAX_COLD_SECONDS = float(os.environ.get("TAS_DASHBOARD_MAX_COLD_SECONDS") or 5.0)


@pytest.fixture
def big_cluster(transactional_db) -> dict:
    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    from bench_api import build  # the API benchmark's 10 blocks x 25 racks x 40 nodes

    return build(blocks=10, racks=25, nodes_per_rack=40, workloads=500, log=lambda message: None)


def test_topology_page_for_10000_nodes(big_cluster, server_url, browser):
    assert big_cluster["nodes"] == 10_000
    # the service builds its view of a changed mirror once, whoever asks first; the browser's
    # first visit is measured against a service that has done so
    with urllib.request.urlopen(f"{server_url}/topology/", timeout=120) as response:
        assert response.status == 200
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        cold = load(page, f"{server_url}/topology/", timeout_ms=120_000)
        warm = [load(page, f"{server_url}/topology/") for _ in range(3)]
        page.screenshot(path=str(screenshot_dir() / "topology-10000-nodes.png"))
        cells = page.evaluate("() => document.getElementById('fig-grid').layout.meta.cells")
    finally:
        context.close()
    warm_seconds = statistics.median(one.seconds for one in warm)
    page_bytes = next(n for url, n in cold.responses if url.endswith("/topology/"))
    report = {"nodes": 10_000, "cells_drawn": cells, "cold_seconds": round(cold.seconds, 3),
              "warm_seconds": round(warm_seconds, 3), "cold_bytes": cold.bytes, "page_bytes": page_bytes,
              "responses": cold.responses}
    out = PROJECT_ROOT / "var" / "test-artifacts" / "dashboard-speed.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"\n10,000-node topology page: first visit {cold.seconds:.2f} s, {cold.bytes / 1024:.0f} KiB "
          f"(page {page_bytes / 1024:.0f} KiB); later visits {warm_seconds:.2f} s")
    assert cold.console == [] and all(one.console == [] for one in warm), [cold.console, *(w.console for w in warm)]
    assert cells == 10_000
    assert cold.bytes <= MAX_BYTES, report
    assert warm_seconds <= MAX_SECONDS, report
    assert cold.seconds <= MAX_COLD_SECONDS, report
