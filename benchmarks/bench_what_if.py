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
3. once more that way, then played in the web process itself (`TAS_WHAT_IF_FORK` off);
4. after `--finish` running workloads finished and a scheduling pass admitted others in
   their place (the view is brought up to date from the change log first), both ways.

A what-if forked (the default) plays its pass in a child of the web process, on its
copy-on-write image of the view's engine; one played in the process reads the mirror's
workloads and pods afresh and builds an engine. Each line splits the time into its stages
(the view; the child; or reading the workloads and pods, building the engine, the pass)
and the rest (explanations, the answer), and gives the answer's size. Where both ways ran,
it says whether their answers are the same. The request's own HTTP and JSON layers are left
out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler_state import NOW, PASS_STEP, BenchSettings, add_seeded_arguments, finish_workloads, seeded_database
from benchdb import python_speed_probe


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

        saved = {name: getattr(whatif, name) for name in ("engine_view", "engine_workloads", "engine_pods",
                                                           "forked_answer")}
        from_parsed, run_pass = engine_module.Engine.from_parsed, engine_module.Engine.run_pass
        try:
            whatif.engine_view = self.wrap("view", saved["engine_view"])
            whatif.engine_workloads = self.wrap("workloads", saved["engine_workloads"])
            whatif.engine_pods = self.wrap("pods", saved["engine_pods"])
            whatif.forked_answer = self.wrap("child", saved["forked_answer"])
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


def one_what_if(label: str, body: Any, *, fork: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """One what-if, forked (`TAS_WHAT_IF_FORK`) or played in this process; its figures and answer."""
    from django.conf import settings

    from tasweb.api.whatif import what_if

    settings.TAS_WHAT_IF_FORK = fork
    stages = Stages()
    started = time.perf_counter()
    with stages.watching(), child_memory():
        answer = what_if(body=body, now=NOW)
    total = time.perf_counter() - started
    private = answer.pop(PRIVATE_KEY, None)
    size = len(json.dumps(answer, default=str))
    rest = total - sum(stages.seconds.values())
    names = ("view", "child") if fork else ("view", "workloads", "pods", "engine", "pass")
    parts = ", ".join(f"{name} {stages.seconds.get(name, 0.0):5.2f}" for name in names)
    label = f"{label}, {'forked' if fork else 'in-process'}"
    print(f"  {label:<44} {total:6.2f} s = {parts}, rest {rest:5.2f}; answer {size / 1e6:.2f} MB, "
          f"{len(answer['changes'])} changes, statuses {sorted({w['status'] for w in answer['workloads']})}"
          + (f"; the child's own memory {private:.0f} MiB" if private is not None else ""), flush=True)
    return {"label": label, "forked": fork, "seconds": total, "stages": stages.seconds, "rest": rest,
            "bytes": size, "changes": len(answer["changes"]), "child_private_mib": private}, answer


PRIVATE_KEY = "_child_private_mib"


@contextmanager
def child_memory():
    """While within, a forked what-if's answer carries what its child wrote of its own memory
    (Private_Clean + Private_Dirty of /proc/self/smaps_rollup, in MiB: the pages it copied from
    the web process, what a container's memory limit counts again), taken out by `one_what_if`."""
    import tasweb.api.whatif as whatif

    play = whatif.play

    def measured(*args, **kwargs):
        answer = play(*args, **kwargs)
        if os.getpid() != parent:
            answer[PRIVATE_KEY] = private_mib()
        return answer

    parent = os.getpid()
    whatif.play = measured
    try:
        yield
    finally:
        whatif.play = play


def private_mib() -> float | None:
    try:
        text = Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return None
    private = ("Private_Clean:", "Private_Dirty:")
    kib = sum(int(line.split()[1]) for line in text.splitlines() if line.startswith(private))
    return kib / 1024


def both_ways(label: str, body: Any) -> list[dict[str, Any]]:
    """The what-if forked, then in this process: the figures of both, and whether they agree."""
    forked, forked_answer = one_what_if(label, body, fork=True)
    in_process, answer = one_what_if(label, body, fork=False)
    same = forked_answer == answer
    print(f"  {'':<44} the same answer both ways: {'yes' if same else 'NO'}", flush=True)
    forked["same_answer"] = in_process["same_answer"] = same
    return [forked, in_process]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_seeded_arguments(ap, "tas_bench_what_if")
    ap.add_argument("--posted", type=int, default=1, help="Workloads posted in one what-if")
    ap.add_argument("--repeat", type=int, default=3, help="what-ifs with the view kept")
    ap.add_argument("--finish", type=int, default=100, help="running workloads that finish before the last what-if")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = ap.parse_args()
    if args.posted < 1 or args.repeat < 0 or not 0 <= args.finish <= BenchSettings().admit:
        raise SystemExit(f"need --posted >= 1, --repeat >= 0 and 0 <= --finish <= {BenchSettings().admit}")
    settings = BenchSettings().check()
    with seeded_database(args.database, args.seeded, settings) as info:
        from tasweb.scheduling.services import scheduling_pass_run

        started = time.perf_counter()
        scheduling_pass_run(now=NOW)
        print(f"  a scheduling pass first (the mirror's statuses become the engine's): "
              f"{time.perf_counter() - started:.1f} s")
        body = posted_workloads(args.posted)
        body = body[0] if len(body) == 1 else body
        probe = python_speed_probe()
        print(f"what-if of {args.posted} Workload(s) on 50,000 nodes and 100,000 workloads:")
        runs = [one_what_if("first request (view built)", body, fork=True)[0]]
        runs += [one_what_if(f"view as it is ({i + 1})", body, fork=True)[0] for i in range(args.repeat)]
        runs += both_ways("view as it is", body)
        if args.finish:
            finish_workloads(info.finishing[:args.finish], NOW + PASS_STEP)
            record = scheduling_pass_run(now=NOW + PASS_STEP)
            print(f"  {args.finish} running workloads finished, a pass admitted {record.admitted}")
            runs += both_ways("after them (view followed)", body)
        child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak RSS of a forked child (MiB, ru_maxrss, copy-on-write pages shared with the web process "
              f"counted in full): {child_peak:.0f}")
        print(f"machine speed: a fixed Python loop (benchdb.python_speed_probe) took {probe:.3f} s")
        if args.json:
            Path(args.json).write_text(json.dumps({"posted": args.posted, "runs": runs, "python_probe_s": probe,
                                                   "child_peak_rss_mib": child_peak}, indent=2))
            print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
