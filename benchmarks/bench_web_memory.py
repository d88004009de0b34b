"""The web process's memory at scale: what web's container must hold (the manifests'
`deploy/components/large-cluster` gives it 4 GiB for two gunicorn workers).

    .venv/bin/python benchmarks/bench_web_memory.py [--seeded NAME] [--workers 2] [--rounds 3]
                                                    [--database tas_bench_web_memory] [--json FILE]

On the cluster `bench_scheduler_state.py` seeds (50,000 nodes, 100,000 workloads; `--seeded
NAME` starts from its kept copy, seeding it if there is none), after one scheduling pass:
gunicorn as the image runs it (gunicorn.conf.py, `--workers`), on the base settings. Each
worker's thread builds its engine view of the mirror at start, derives it and makes the
dashboard's display of each TAS flavor; once every worker has logged its view ready, the
summed proportional set size (Pss) of gunicorn's processes is read
(idle). Then `--rounds` times, as many what-ifs of one Workload as there are workers are
posted at once over HTTP (each worker that takes one forks a child to play it: the worst
case), while a thread reads the tree's Pss every 20 ms; the peak is printed beside the 4 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler_memory import TreeSampler, descendants, pss_mib
from bench_scheduler_state import NOW, BenchSettings, add_seeded_arguments, seeded_database
from benchdb import ROOT, python_speed_probe

LIMIT_MIB = 4 * 1024  # deploy/components/large-cluster/web-memory.yaml
READY = "the web's engine view ready"  # tasweb.api.state.VIEW_READY: built, derived, the dashboard made


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_pss(root: int) -> float:
    return sum(mib for mib in map(pss_mib, [root, *descendants(root)]) if mib is not None)


def post(url: str, token: str, body: Any) -> float:
    request = urllib.request.Request(url + "/api/v1/what-if/", method="POST", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        response.read()
        if response.status != 200:
            raise SystemExit(f"what-if answered {response.status}")
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_seeded_arguments(ap, "tas_bench_web_memory")
    ap.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of one what-if per worker at once")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args()
    if args.workers < 1 or args.rounds < 1:
        raise SystemExit("need --workers >= 1 and --rounds >= 1")
    if not Path("/proc/self/smaps_rollup").exists():
        raise SystemExit("this benchmark reads /proc/PID/smaps_rollup (Linux 4.14 or later)")
    settings = BenchSettings().check()
    with seeded_database(args.database, args.seeded, settings):
        from bench_what_if import posted_workloads
        from django.contrib.auth import get_user_model
        from rest_framework.authtoken.models import Token

        from tasweb.scheduling.services import scheduling_pass_run

        scheduling_pass_run(now=NOW)
        token = Token.objects.create(user=get_user_model().objects.create_user(username="bench")).key
        body = posted_workloads(1)[0]
        from django.db import connections

        connections.close_all()
        port = free_port()
        log = Path(os.environ["TAS_VAR_DIR"]) / "gunicorn.log"
        env = {**os.environ, "DJANGO_LOG_LEVEL": "INFO", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
               "TAS_WEB_TIMEOUT": "300"}
        started = time.perf_counter()
        with log.open("wb") as err:
            server = subprocess.Popen([sys.executable, "-m", "gunicorn", "tasweb.wsgi", "--bind",
                                       f"127.0.0.1:{port}", "--workers", str(args.workers)],
                                      cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        url = f"http://127.0.0.1:{port}"
        try:
            while log.read_text().count(READY) < args.workers:
                if server.poll() is not None:
                    raise SystemExit(f"gunicorn exited: {log.read_text()[-2000:]}")
                if time.perf_counter() - started > 600:
                    raise SystemExit("the workers did not build their views within 10 minutes")
                time.sleep(0.5)
            built = time.perf_counter() - started
            idle = tree_pss(server.pid)
            probe = python_speed_probe()
            print(f"gunicorn, {args.workers} workers, on 50,000 nodes and 100,000 workloads:")
            print(f"  every worker's view ready {built:6.1f} s after the start; idle, gunicorn's processes hold "
                  f"{idle:6.0f} MiB (summed Pss)", flush=True)
            rounds = []
            with ThreadPoolExecutor(args.workers) as pool:
                for i in range(args.rounds):
                    with TreeSampler(server.pid) as sampler:
                        seconds = list(pool.map(lambda _: post(url, token, body), range(args.workers)))
                    rounds.append({"seconds": seconds, "peak_pss_mib": sampler.peak_mib,
                                   "most_processes": sampler.most_children + 1})
                    print(f"  round {i + 1}: {args.workers} what-ifs at once, "
                          f"{', '.join(f'{s:.2f}' for s in seconds)} s; at the peak "
                          f"{sampler.peak_mib:6.0f} MiB in {sampler.most_children + 1} processes (limit {LIMIT_MIB})",
                          flush=True)
            print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe:.3f} s")
            if "Traceback" in log.read_text():
                raise SystemExit(f"gunicorn logged a traceback: {log.read_text()[-3000:]}")
            if args.json:
                Path(args.json).write_text(json.dumps({
                    "workers": args.workers, "views_built_s": built, "idle_pss_mib": idle, "rounds": rounds,
                    "limit_mib": LIMIT_MIB, "python_probe_s": probe}, indent=2))
                print(f"figures written to {args.json}")
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
