"""What-if (`POST /api/v1/what-if/`) on a large mirror: how long the web process takes to
answer, on the cluster `bench_scheduler_state.py` seeds (50,000 nodes, 100,000 workloads,
30,000 of them running).

    .venv/bin/python benchmarks/bench_what_if.py [--seeded NAME] [--posted 1] [--repeat 3]
                                                 [--finish 100] [--database tas_bench_what_if]
                                                 [--json FILE]

With `--seeded NAME` it starts from the kept seeded copy `bench_scheduler_state.py --seeded
NAME` made (seeding it, and keeping it, if there is none with these settings). One scheduling
pass runs first, as the service's scheduler would have, so that the mirror's statuses are the
engine's. Then `what_if()` -- what the endpoint calls -- for `--posted` new Workloads of the
seed's shapes:

1. the first request of the process: the web's view of the mirror is built;
2. `--repeat` times with the view as it is (nothing changed in the mirror meanwhile);
3. after `--finish` running workloads finished and a scheduling pass admitted others in
   their place: the view is brought up to date from the change log first.

Each line splits the time into the view, reading the mirror's workloads and pods afresh,
building the engine, the pass and the rest (explanations, the answer), and gives the
answer's size. The request's own HTTP and JSON layers are left out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler_state import (
    NOW,
    PASS_STEP,
    BenchSettings,
    finish_workloads,
    seed_in_child,
    seeded_copy_description,
    seeded_copy_info,
)
from benchdb import bench_database, python_speed_probe, seeded_copy_keep


class Stages:
    """Seconds spent in the named functions of one what-if, by patching them for the run; a
    call within another one timed (building the view builds an engine) counts for the outer."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.depth = 0

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        return timed

    @contextmanager
    def watching(self):
        import scheduler.engine as engine_module
        import tasweb.api.whatif as whatif

        saved = {name: getattr(whatif, name) for name in ("engine_view", "engine_workloads", "engine_pods")}
        from_parsed, run_pass = engine_module.Engine.from_parsed, engine_module.Engine.run_pass
        try:
            whatif.engine_view = self.wrap("view", saved["engine_view"])
            whatif.engine_workloads = self.wrap("workloads", saved["engine_workloads"])
            whatif.engine_pods = self.wrap("pods", saved["engine_pods"])
            engine_module.Engine.from_parsed = classmethod(self.wrap("engine", from_parsed.__func__))
            engine_module.Engine.run_pass = self.wrap("pass", run_pass)
            yield self
        finally:
            for name, fn in saved.items():
                setattr(whatif, name, fn)
            engine_module.Engine.from_parsed, engine_module.Engine.run_pass = from_parsed, run_pass


def posted_workloads(count: int) -> list[dict[str, Any]]:
    """`count` new Workloads, copies of the first waiting ones of the mirror under new names."""
    from tasweb.cluster.models import Workload

    rows = list(Workload.objects.filter(status__in=("Pending", "Inadmissible")).order_by("id")[:count])
    if len(rows) < count:
        raise SystemExit(f"the mirror has {len(rows)} waiting workloads, fewer than --posted {count}")
    out = []
    for i, row in enumerate(rows):
        obj = {key: value for key, value in row.raw.items() if key != "status"}
        meta = row.raw["metadata"]
        obj["metadata"] = {"name": f"what-if-{i}", "namespace": meta["namespace"],
                           "creationTimestamp": meta.get("creationTimestamp")}
        out.append(obj)
    return out


def one_what_if(label: str, body: Any) -> dict[str, Any]:
    from tasweb.api.whatif import what_if

    stages = Stages()
    started = time.perf_counter()
    with stages.watching():
        answer = what_if(body=body, now=NOW)
    total = time.perf_counter() - started
    size = len(json.dumps(answer, default=str))
    rest = total - sum(stages.seconds.values())
    parts = ", ".join(f"{name} {stages.seconds.get(name, 0.0):5.2f}" for name in
                      ("view", "workloads", "pods", "engine", "pass"))
    print(f"  {label:<28} {total:6.2f} s = {parts}, rest {rest:5.2f}; answer {size / 1e6:.2f} MB, "
          f"{len(answer['changes'])} changes, statuses {sorted({w['status'] for w in answer['workloads']})}")
    return {"label": label, "seconds": total, "stages": stages.seconds, "rest": rest, "bytes": size,
            "changes": len(answer["changes"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeded", metavar="NAME", help="start from this kept seeded copy (made, and kept, if missing)")
    ap.add_argument("--database", default="tas_bench_what_if")
    ap.add_argument("--posted", type=int, default=1, help="Workloads posted in one what-if")
    ap.add_argument("--repeat", type=int, default=3, help="what-ifs with the view kept")
    ap.add_argument("--finish", type=int, default=100, help="running workloads that finish before the last what-if")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args()
    if args.posted < 1 or args.repeat < 0 or not 0 <= args.finish <= BenchSettings().admit:
        raise SystemExit(f"need --posted >= 1, --repeat >= 0 and 0 <= --finish <= {BenchSettings().admit}")
    settings = BenchSettings().check()
    kept = seeded_copy_info(args.seeded, settings) if args.seeded else None
    with bench_database(args.database, template=args.seeded if kept else None):
        info = kept
        if info is None:
            print("seeding (bench_scheduler_state.py's cluster) ...", flush=True)
            info = seed_in_child(settings)
            if args.seeded:
                seeded_copy_keep(args.database, args.seeded, seeded_copy_description(settings, info))
        from tasweb.scheduling.services import scheduling_pass_run

        started = time.perf_counter()
        scheduling_pass_run(now=NOW)
        print(f"  a scheduling pass first (the mirror's statuses become the engine's): "
              f"{time.perf_counter() - started:.1f} s")
        body = posted_workloads(args.posted)
        body = body[0] if len(body) == 1 else body
        probe = python_speed_probe()
        print(f"what-if of {args.posted} Workload(s) on 50,000 nodes and 100,000 workloads:")
        runs = [one_what_if("first request (view built)", body)]
        runs += [one_what_if(f"view as it is ({i + 1})", body) for i in range(args.repeat)]
        if args.finish:
            finish_workloads(info.finishing[:args.finish], NOW + PASS_STEP)
            record = scheduling_pass_run(now=NOW + PASS_STEP)
            print(f"  {args.finish} running workloads finished, a pass admitted {record.admitted}")
            runs.append(one_what_if("after them (view followed)", body))
        print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe:.3f} s")
        if args.json:
            Path(args.json).write_text(json.dumps({"posted": args.posted, "runs": runs, "python_probe_s": probe},
                                                  indent=2))
            print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
