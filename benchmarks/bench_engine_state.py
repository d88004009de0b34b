"""The long-lived engine on the shape of Kueue's TAS performance test: one pass, one cycle,
one object change.

    .venv/bin/python benchmarks/bench_engine_state.py [--config FILE] [--scale F] [--repeat N] [--json FILE]

The objects are those of `benchmarks/kueue_perf_tas.py` (Kueue's generator.yaml: 640 nodes, 5
cohorts x 6 ClusterQueues, 15,000 workloads), all pending at once, creation times spread as
their arrivals would be. Measured, against the figures of the issue that asked for them:

* `python -m scheduler simulate FILE --cycles all` over all of them, end to end in a fresh
  process (reading, parsing, the cold start, the cycles, the JSON output): target 3 s;
* a scheduling cycle with 15,000 workloads pending: after that pass every workload that can
  run holds its quota and the rest are parked; then, again and again, one admitted workload
  finishes (which requeues its cohort), a new one arrives so that 15,000 stay pending, and
  one cycle runs. Median and p90 of the cycle: target 20 ms;
* applying one object change (the verb and the queues taking it in): a workload finishing,
  a workload arriving, a node changing, a non-TAS pod starting; median of each: target 1 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import kueue_perf_tas as perf  # noqa: E402

from scheduler.engine import Engine  # noqa: E402
from scheduler.features import FeatureGates  # noqa: E402
from scheduler.model import Condition  # noqa: E402

EPOCH = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
GATES = "TASBalancedPlacement=true"


def objects(config: perf.GeneratorConfig) -> tuple[list[dict], list[dict]]:
    """(definitions, nodes and queues; every workload, pending, created at its arrival time)."""
    base = [*perf.definition_objects(config), *perf.node_objects(config)]
    queues = perf.queue_specs(config)
    for q in queues:
        base += perf.queue_objects(q, config.flavor_name)
    workloads = [perf.workload_object(a, EPOCH + timedelta(milliseconds=a.at_ms), "ms")
                 for a in perf.arrivals(queues)]
    return base, workloads


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cli_pass_seconds(all_objects: list[dict], repeat: int) -> list[float]:
    """`simulate --cycles all` in a fresh process, end to end."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "perf.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": all_objects}))
        out = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "scheduler", "simulate", str(path), "--cycles", "all",
                            "--feature-gates", GATES, "--now", "2025-06-01T12:30:00Z", "-o", "json"],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            out.append(time.perf_counter() - start)
        return out


class Steady:
    """An engine with every runnable workload admitted and the rest parked, fed one change at a time."""

    def __init__(self, base: list[dict], workloads: list[dict]) -> None:
        self.now = EPOCH + timedelta(minutes=30)
        self.engine = Engine.from_parsed(perf.parse([*base, *workloads], "bench"), FeatureGates.parse(GATES))
        self.engine.run_pass(self.now, cycles=None, bulk_results=False)
        self.spare = [w for w in workloads]  # copies to submit again under new names
        self.serial = 0

    def holders(self) -> list[str]:
        return sorted(self.engine.state.charges)

    def finish(self, key: str) -> None:
        wl = self.engine.state.workload(key)
        self.engine.upsert(dataclasses.replace(wl, conditions=[
            *wl.conditions, Condition("Finished", "True", "ByTest", "done", self.now)]))

    def arrive(self) -> None:
        self.serial += 1
        template = self.spare[self.serial % len(self.spare)]
        obj = json.loads(json.dumps(template))
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-again-{self.serial}"
        obj["metadata"]["uid"] = f"again-{self.serial}"
        (wl,) = perf.parse([obj], "bench").workloads
        self.engine.upsert(wl)

    def cycle(self) -> float:
        return timed(lambda: self.engine.run_pass(self.now, cycles=1, bulk_results=False))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(args: argparse.Namespace) -> dict:
    config = perf.scaled(perf.load_config(perf.resolve(Path(args.config))), args.scale)
    base, workloads = objects(config)
    figures: dict[str, object] = {"workloads": len(workloads), "nodes": sum(1 for o in base if o["kind"] == "Node")}

    passes = cli_pass_seconds([*base, *workloads], args.cli_repeat)
    figures["simulate_cycles_all_s"] = statistics.median(passes)

    start = time.perf_counter()
    steady = Steady(base, workloads)
    figures["cold_start_and_first_pass_s"] = time.perf_counter() - start
    engine = steady.engine
    figures["pending"] = engine.queues.pending_count()

    cycles = []
    for _ in range(args.repeat):
        holders = steady.holders()
        if not holders:
            break
        steady.finish(holders[0])
        steady.arrive()
        cycles.append(steady.cycle())
    figures["cycle_ms_median"] = statistics.median(cycles) * 1000
    figures["cycle_ms_p90"] = percentile(cycles, 0.9) * 1000
    figures["pending_during_cycles"] = engine.queues.pending_count()

    changes: dict[str, list[float]] = {"workload finishes": [], "workload arrives": [], "node changes": [],
                                       "pod starts": []}
    nodes = list(engine.state.nodes.values())
    after_node: list[float] = []
    for i in range(args.repeat):
        holders = steady.holders()
        if holders:
            changes["workload finishes"].append(timed(lambda k=holders[0]: (steady.finish(k), engine.sync(steady.now))))
        changes["workload arrives"].append(timed(lambda: (steady.arrive(), engine.sync(steady.now))))
        node = engine.state.nodes[nodes[i % len(nodes)].name]
        allocatable = dict(node.allocatable)
        allocatable["cpu"] += -1000 if i % 2 == 0 else 1000  # a real change: the flavor's snapshot is made again
        changed = dataclasses.replace(node, allocatable=allocatable)
        changes["node changes"].append(timed(lambda n=changed: (engine.upsert(n), engine.sync(steady.now))))
        after_node.append(steady.cycle())
        (pod,) = perf.parse([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "x"},
                              "spec": {"nodeName": node.name, "containers": [{"name": "c", "resources": {
                                  "requests": {"cpu": "100m"}}}]}, "status": {"phase": "Running"}}], "bench").pods
        changes["pod starts"].append(timed(lambda p=pod: (engine.upsert(p), engine.sync(steady.now))))
        steady.cycle()  # keep the state moving as it would between changes
    figures["change_ms_median"] = {k: statistics.median(v) * 1000 for k, v in changes.items() if v}
    figures["cycle_after_node_change_ms_median"] = statistics.median(after_node) * 1000
    return figures


def report(f: dict) -> str:
    def line(what: str, value: float, target: float, unit: str) -> str:
        verdict = "PASS" if value <= target else "MISS"
        return f"{what:<58} {value:>9.2f} {unit:<3} target {target:g} {unit}  {verdict}"

    lines = [f"{f['workloads']} workloads, {f['nodes']} nodes; {f['pending']} pending after the first pass",
             line("python -m scheduler simulate --cycles all (median)", f["simulate_cycles_all_s"], 3.0, "s"),
             f"{'cold start and the first pass, in process':<58} {f['cold_start_and_first_pass_s']:>9.2f} s",
             line(f"a cycle with {f['pending_during_cycles']} pending (median)", f["cycle_ms_median"], 20, "ms"),
             f"{'a cycle (p90)':<58} {f['cycle_ms_p90']:>9.2f} ms"]
    for what, ms in f["change_ms_median"].items():
        lines.append(line(f"applying one change: {what} (median)", ms, 1.0, "ms"))
    lines.append(f"{'the cycle after a node change (its snapshot made again; median)':<58} "
                 f"{f['cycle_after_node_change_ms_median']:>9.2f} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(perf.DEFAULT_CONFIG) if hasattr(perf, "DEFAULT_CONFIG")
                    else "../shared/anchors/kueue-perf-tas/generator.yaml")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=200, help="cycles and changes measured")
    ap.add_argument("--cli-repeat", type=int, default=3, help="runs of simulate --cycles all")
    ap.add_argument("--json", default=None, metavar="FILE")
    args = ap.parse_args(argv)
    figures = measure(args)
    print(report(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
