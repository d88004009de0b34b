"""What ordering a ClusterQueue by its LocalQueues' usage (admission fair sharing) costs a
pass and a cycle, against the same queue ordered by priority and time.

    .venv/bin/python benchmarks/bench_admission_fair_sharing.py [--pending 15000] [--local-queues 3]
                                                                [--admit 1000] [--shapes 1] [--repeat 3]
                                                                [--json FILE]

One ClusterQueue (no cohort, one flavor without a topology) with `--pending` workloads of one
CPU spread over `--local-queues` LocalQueues of different usage, and quota for `--admit` of
them; `--shapes` priorities taken in turn make as many equivalence classes in each
LocalQueue. Measured, for `UsageBasedAdmissionFairSharing` and for `NoAdmissionFairSharing`:

* the pass that admits `--admit` workloads, one scheduling cycle per admission (every
  admission adds its LocalQueue's entry penalty, which moves that LocalQueue's workloads);
* a cycle afterwards, with every workload left back in the heaps (as a release of quota
  requeues them; median of 50): the target of a cycle with 15,000 pending workloads is 20 ms.

The admissions of both orders are also compared: with admission fair sharing they alternate
between the LocalQueues as their usage grows; without, they go by creation time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.codec import decode_assignment  # noqa: E402
from scheduler.config import parse_configuration  # noqa: E402
from scheduler.engine import Engine  # noqa: E402
from scheduler.features import DEFAULT_GATES  # noqa: E402
from scheduler.parse import parse_objects  # noqa: E402

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
V1BETA2 = "kueue.x-k8s.io/v1beta2"
CONFIG = parse_configuration({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                              "admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"}})


def stamp(seconds: float) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def objects(*, pending: int, local_queues: int, admit: int, mode: str, shapes: int = 1) -> list[dict]:
    out: list[dict] = [
        {"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}},
        {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "admissionScope": {"admissionMode": mode},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(admit)}]}]}]}},
    ]
    for i in range(local_queues):
        out.append({"apiVersion": V1BETA2, "kind": "LocalQueue", "metadata": {"name": f"lq-{i}", "namespace": "ns"},
                    "spec": {"clusterQueue": "cq"},
                    "status": {"fairSharing": {"admissionFairSharingStatus": {
                        "consumedResources": {"cpu": str(10 * i)}, "lastUpdate": stamp(0)}}}})
    for n in range(pending):
        out.append({"apiVersion": V1BETA2, "kind": "Workload",
                    "metadata": {"name": f"w{n:06d}", "namespace": "ns", "uid": f"uid-{n}",
                                 "creationTimestamp": stamp(-pending + n)},
                    "spec": {"queueName": f"lq-{n % local_queues}", "priority": (n // local_queues) % shapes,
                             "podSets": [{
                        "name": "main", "count": 1, "template": {"spec": {"containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    return out


def measure(args: argparse.Namespace, mode: str) -> dict[str, object]:
    objs = objects(pending=args.pending, local_queues=args.local_queues, admit=args.admit, mode=mode,
                   shapes=args.shapes)
    passes, cycles, first = [], [], None
    for _ in range(args.repeat):
        parsed = parse_objects([("bench", o) for o in objs], decode_assignment=decode_assignment, warn=print)
        engine = Engine.from_parsed(parsed, DEFAULT_GATES, config=CONFIG)
        engine.run_pass(NOW - timedelta(seconds=1), cycles=0)  # the cold start, apart
        start = time.perf_counter()
        outcome = engine.run_pass(NOW, cycles=None, bulk_results=False)
        passes.append(time.perf_counter() - start)
        admitted = sorted(k for k, r in outcome.decided.items() if r.status == "Admitted")
        first = first or admitted
        for _ in range(50):
            engine.queues.requeue_inadmissible()  # every workload back in the heaps, as after a release
            start = time.perf_counter()
            engine.run_pass(NOW, cycles=1, bulk_results=False)
            cycles.append(time.perf_counter() - start)
    by_queue: dict[str, int] = {}
    for key in first or []:
        n = int(key.rsplit("w", 1)[1])
        by_queue[f"lq-{n % args.local_queues}"] = by_queue.get(f"lq-{n % args.local_queues}", 0) + 1
    return {"pass_s": passes, "cycle_ms": statistics.median(cycles) * 1000, "admitted": len(first or []),
            "admitted_by_local_queue": by_queue}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=15000)
    parser.add_argument("--local-queues", type=int, default=3)
    parser.add_argument("--admit", type=int, default=1000)
    parser.add_argument("--shapes", type=int, default=1, help="priorities the workloads of a LocalQueue take in "
                        "turn: as many equivalence classes (1: one class a LocalQueue)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    figures = {mode: measure(args, mode) for mode in ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")}
    print(f"{args.pending} pending workloads over {args.local_queues} LocalQueues, {args.shapes} priorities each, "
          f"quota for {args.admit}")
    print(f"{'admissionMode':34} {'pass (s)':>22} {'cycle after (ms)':>17}  admitted by LocalQueue")
    for mode, f in figures.items():
        passes = f["pass_s"]
        print(f"{mode:34} {min(passes):>10.2f} - {max(passes):<9.2f} {f['cycle_ms']:>17.2f}  "
              f"{f['admitted_by_local_queue']}")
    cycle = figures["UsageBasedAdmissionFairSharing"]["cycle_ms"]
    print(f"a cycle with {args.pending} pending, ordered by usage (median)    {cycle:.2f} ms  target 20 ms  "
          f"{'PASS' if cycle <= 20 else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
