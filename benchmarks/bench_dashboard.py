"""Benchmark of the dashboard's topology page on 10,000 nodes, in headless Chromium.

The cluster is the API benchmark's (bench_api.build): one TAS flavor over 10 blocks x 25
racks x 40 nodes of 8 GPUs, a 10,000-pod workload with a pod on every node, admitted and
pending workloads, history. It is built in a throwaway PostgreSQL database (benchdb), served
by the project's WSGI application in a thread (static files through WhiteNoise, as `make
run` serves them), and the page is loaded in Debian's Chromium through Playwright:

* render time: navigation start -> every figure drawn (the page's `tas:figures-drawn` mark);
* bytes: every response's encoded body and headers, as sent over the wire.

Each page is loaded three times in one browser: cold (empty cache: what a first visit
costs, plotly.min.js included) and twice warm (the browser's cache and its compiled-code
cache for plotly.min.js, as on every later visit).

    .venv/bin/python benchmarks/bench_dashboard.py            # 10,000 nodes
    .venv/bin/python benchmarks/bench_dashboard.py --quick    # 1,000 nodes

The server is DATABASE_URL's (default postgres://postgres@127.0.0.1:5432); the database is
`--database` (default tas_bench_dashboard).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGET_SECONDS = 2.0
TARGET_BYTES = 2 * 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 nodes")
    parser.add_argument("--database", default="tas_bench_dashboard")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--workloads", type=int, default=5000, help="stored workloads (4 %% admitted, 1 %% pending)")
    args = parser.parse_args()
    shape = dict(blocks=5, racks=10, nodes_per_rack=20) if args.quick else dict(blocks=10, racks=25, nodes_per_rack=40)

    from benchdb import bench_database

    with bench_database(args.database, keep=args.keep):
        from bench_api import build

        from tasweb.api.state import engine_view
        from tasweb.dashboard import selectors
        from tests.dashboard.browser import chromium, live_server, load, screenshot_dir

        started = time.perf_counter()
        info = build(**shape, workloads=args.workloads, log=lambda m: print(f"  built {m}", flush=True))
        print(f"cluster of {info['nodes']} nodes built in {time.perf_counter() - started:.1f} s")
        t0 = time.perf_counter()
        engine_view()
        print(f"engine view of the mirror: {time.perf_counter() - t0:.2f} s (once per mirror version)")
        t0 = time.perf_counter()
        selectors.flavor_capacity(flavor="tas-gpu")
        print(f"display snapshot of flavor tas-gpu: {time.perf_counter() - t0:.2f} s (once per mirror version)")

        from django.test import Client

        import tasweb.wsgi  # noqa: F401  (what gunicorn and runserver load at start, warm-up included)

        client = Client()
        for attempt in ("first", "second"):
            t0 = time.perf_counter()
            response = client.get("/topology/", HTTP_HOST="127.0.0.1")
            print(f"server-side render of /topology/ ({attempt}): {time.perf_counter() - t0:.3f} s, "
                  f"{len(response.content) / 1024:.0f} KiB, status {response.status_code}")
        pages = [("topology, whole flavor", "/topology/"),
                 ("topology, one block", "/topology/?domain=b1"),
                 ("workload ml/big (a pod on every node)", "/workloads/ml/big/")]
        results = []
        with live_server() as base, chromium() as browser:
            for label, path in pages:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                page = context.new_page()
                loads = [load(page, base + path) for _ in range(3)]
                page.screenshot(path=str(screenshot_dir() / f"bench-{label.split(',')[0].split()[0]}.png"))
                context.close()
                cold, warm = loads[0], loads[1:]
                errors = [e for one in loads for e in one.console]
                warm_s = statistics.median(one.seconds for one in warm)
                html = next((n for url, n in cold.responses if url.startswith(base + path.split("?")[0])), 0)
                results.append({"page": label, "path": path, "cold_seconds": round(cold.seconds, 3),
                                "warm_seconds": round(warm_s, 3), "cold_bytes": cold.bytes, "html_bytes": html,
                                "console_errors": errors})
                print(f"  {label:<40} cold {cold.seconds:5.2f} s {cold.bytes / 1024:7.0f} KiB "
                      f"(page {html / 1024:5.0f} KiB)   warm {warm_s:5.2f} s   "
                      f"{errors or 'no console errors'}", flush=True)
                print(f"    ms from navigation start (html received / script started / drawn): "
                      f"cold {cold.phases}, warm {warm[-1].phases}", flush=True)
        top = results[0]
        print("against the targets (topology, whole flavor):")
        print(f"  render   cold {top['cold_seconds']:.2f} s, warm {top['warm_seconds']:.2f} s   target "
              f"{TARGET_SECONDS:.1f} s")
        print(f"  transfer {top['cold_bytes'] / 1024 / 1024:.2f} MiB (cold, everything)   target "
              f"{TARGET_BYTES / 1024 / 1024:.0f} MiB   {'ok' if top['cold_bytes'] <= TARGET_BYTES else 'OVER'}")
        print(json.dumps({"nodes": info["nodes"], "results": results}))


if __name__ == "__main__":
    main()
