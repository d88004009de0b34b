"""The start-time estimate as the service runs it, from the fork to the predictions stored.

    .venv/bin/python benchmarks/bench_estimate_service.py [--nodes 10000] [--pending 1000]
                                                          [--snapshots 140000] [--outcomes 1000]
                                                          [--repeat 5] [--range chain]
                                                          [--database tas_bench_estimate] [--keep]
                                                          [--json FILE]

`eta_accuracy.py --timing` times the plays alone, on an engine in memory. This times what the
scheduler process does after a pass (`tasweb.scheduling.estimates`), against a fresh
PostgreSQL database (DATABASE_URL's server, default the local test server; see benchdb.py):

* seed: the timing's cluster in the mirror (`--nodes` nodes in racks of 40 and blocks of
  1,000, one ClusterQueue, the accuracy benchmark's job classes with exact runtimes), filled
  by the service's own passes 50 workloads at a time until `--pending` wait; then
  `--snapshots` kept predictions of 6,000 other workloads, `--outcomes` of them admitted
  after their first prediction (finished since, so no pass reads them), as earlier estimates
  leave them for the calibration of the ranges to read;
* measure, `--repeat` times: the estimate forked off the process that holds the engine
  (`_estimate_forked`), timed from the fork to the child's exit (the plays, the outcomes
  read, the predictions stored in one transaction, the snapshots kept) -- target 1 s for
  1,000 waiting workloads on 10,000 nodes. Each repeat is run twice in turn: as the service
  runs it (the outcomes read on a connection of their own while the plays run) and with the
  outcomes read after the plays, as before; and the outcomes read alone is timed too.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eta_accuracy as ea
from benchdb import bench_database

TARGET_SECONDS = 1.0
OTHER_WORKLOADS = 6_000  # the workloads the kept predictions are of


def seed_cluster(nodes: int, pending: int, seed: int) -> dict[str, int]:
    """The timing's cluster in the mirror, filled by the service's passes; what it holds."""
    from tasweb.cluster.services import object_upsert
    from tasweb.scheduling.services import scheduling_pass_run

    rng = random.Random(seed)
    node_objs = ea.node_objects(max(1, nodes // 1000), 25, 40)
    for obj in [*ea.definitions(len(node_objs) * ea.CPU_PER_NODE), *node_objs]:
        object_upsert(kind=obj["kind"], obj=obj)
    now = ea.EPOCH + timedelta(hours=1)
    n = 0
    record = None
    while record is None or record.pending < pending:
        for _ in range(50):
            cls = rng.choices(ea.CLASSES, weights=[c.share for c in ea.CLASSES])[0]
            job = ea.Job(f"job-{n:05d}", cls, rng.choice(ea.QUEUES), n, cls.runtime(rng))
            object_upsert(kind="Workload", obj=ea.workload_object(
                job.name, job.cls, job.queue, ea.EPOCH + timedelta(seconds=job.arrival), job.runtime))
            n += 1
        record = scheduling_pass_run(now=now)
    record = scheduling_pass_run(now=now)  # its own writes back: the state the estimate starts from
    return {"nodes": len(node_objs), "workloads": n, "pending": record.pending}


def seed_outcomes(snapshots: int, outcomes: int, seed: int) -> None:
    """Kept predictions of other workloads; `outcomes` of those workloads admitted after their
    first one (and finished since)."""
    from tasweb.cluster.models import Workload, WorkloadStatus
    from tasweb.cluster.services import rows_insert
    from tasweb.scheduling.models import PredictionSnapshot

    rng = random.Random(seed)
    base = ea.EPOCH - timedelta(days=1)
    per = max(1, snapshots // OTHER_WORKLOADS)

    def snapshot_rows():
        for i in range(snapshots):
            w = i % OTHER_WORKLOADS
            made = base + timedelta(seconds=60 * (i // OTHER_WORKLOADS) + w)
            start = made + timedelta(minutes=rng.uniform(5, 120))
            yield {"namespace": "done", "name": f"w-{w:05d}", "made_at": made, "start": start,
                   "earliest": start - timedelta(minutes=10), "latest": start + timedelta(minutes=20)}

    rows_insert(model=PredictionSnapshot, rows=snapshot_rows())
    admitted = base + timedelta(seconds=60 * per + OTHER_WORKLOADS)
    rows_insert(model=Workload, rows=({
        "uid": f"done-{w}", "namespace": "done", "name": f"w-{w:05d}", "raw": {}, "rv_number": 1,
        "status": WorkloadStatus.FINISHED, "admitted_at": admitted + timedelta(seconds=w),
        "finished_at": admitted + timedelta(hours=1)} for w in range(outcomes)))


def forked_estimate_seconds() -> float:
    """One estimate as the worker runs it after a pass: forked, timed to the child's exit."""
    from tasweb.scheduling import estimates

    source = estimates.estimate_source()
    assert source is not None, "no engine from a pass to estimate on"
    started = time.perf_counter()
    if estimates._estimate_forked(source) != "forked":
        raise SystemExit("the estimate did not fork")
    if not estimates.estimate_child_wait(60.0):
        raise SystemExit("the estimate's child did not end within 60 s")
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=1_000)
    ap.add_argument("--snapshots", type=int, default=140_000)
    ap.add_argument("--outcomes", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--range", default="chain", help="TAS_ETA_RANGE (auto plans it from the plays' time)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--database", default="tas_bench_estimate")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    for name, value in (("--nodes", args.nodes), ("--pending", args.pending), ("--repeat", args.repeat)):
        if value < 1:
            raise SystemExit(f"{name} must be at least 1, got {value}")
    if args.snapshots < 0 or not 0 <= args.outcomes <= OTHER_WORKLOADS:
        raise SystemExit(f"--snapshots must be 0 or more and --outcomes 0 to {OTHER_WORKLOADS}")

    os.environ["TAS_CLUSTER_SOURCE"] = "simulator"  # the service decides, as with the simulator
    with bench_database(args.database, keep=args.keep):
        from django.conf import settings

        from tasweb.scheduling import estimates

        settings.TAS_ETA_RANGE = args.range
        started = time.perf_counter()
        held = seed_cluster(args.nodes, args.pending, args.seed)
        seed_outcomes(args.snapshots, args.outcomes, args.seed)
        print(f"seeded in {time.perf_counter() - started:.1f} s: {held['nodes']} nodes, {held['workloads']} "
              f"workloads, {held['pending']} waiting; {args.snapshots} kept predictions, {args.outcomes} outcomes")
        started = time.perf_counter()
        calibration = estimates.calibration_read()
        read_alone = time.perf_counter() - started
        print(f"  the outcomes read alone (calibration_read): {read_alone:.3f} s, "
              f"{calibration.outcomes if calibration else 0} outcomes")
        beside, after = [], []
        overlapping = estimates.read_beside
        for i in range(args.repeat):
            estimates.read_beside = overlapping
            beside.append(forked_estimate_seconds())
            estimates.read_beside = functools.partial(overlapping, beside=False)  # read after the plays
            after.append(forked_estimate_seconds())
            print(f"  estimate {i + 1}: {beside[-1]:.3f} s as the service runs it, {after[-1]:.3f} s with the "
                  "outcomes read after the plays", flush=True)
        estimates.read_beside = overlapping
        stored = estimates.WorkloadPrediction.objects.count()
        timed = estimates.WorkloadPrediction.objects.exclude(start=None).count()
        figures = {"seeded": held, "snapshots": args.snapshots, "outcomes": args.outcomes, "range": args.range,
                   "outcomes_read_s": read_alone, "service_s": summary(beside), "read_after_s": summary(after),
                   "predictions_stored": stored, "with_a_time": timed}
        s_, a_ = figures["service_s"], figures["read_after_s"]
        print()
        print(f"from the fork to the predictions stored ({args.range}, {held['pending']} waiting, "
              f"{held['nodes']} nodes), {args.repeat} runs:")
        verdict = "PASS" if s_["median"] <= TARGET_SECONDS else "MISS"
        print(f"  as the service runs it            {s_['min']:.3f} / {s_['median']:.3f} / {s_['max']:.3f} s "
              f"(min / median / max)   target {TARGET_SECONDS:g} s  {verdict}")
        print(f"  outcomes read after the plays     {a_['min']:.3f} / {a_['median']:.3f} / {a_['max']:.3f} s")
        print(f"  {stored} predictions stored, {timed} with a time")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
            print(f"figures written to {args.json}")

if __name__ == "__main__":
    main()
