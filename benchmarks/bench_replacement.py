"""Node replacement (hot swap) speed: one failed node of a 1,024-pod workload on 10,000 nodes.

    .venv/bin/python benchmarks/bench_replacement.py [--nodes 10000] [--repeat 25] [--profile]

Cluster: `bench_placement`'s generator (16 nodes a rack, 16 racks a block; each node 96 CPU,
384Gi, 110 pods, one running non-TAS pod of 1 CPU / 1Gi). The workload is admitted by the
engine's own placement on the whole cluster, then one node of its assignment (the middle
domain) is deleted: the cluster state is rebuilt without that node and its pod, holding the
admitted workload. Workloads:

* preferred block, 1,024 pods of 90 CPU: one pod a node, 1,024 hostname domains over 4 blocks;
* required block, 1,024 pods of 8 CPU: 11 pods a node, 94 nodes of one block.

Measured, median of `--repeat` runs (the state is put back between runs, outside the timing):

* `find_replacement_assignment`: the search for the new node(s) and the merged assignment;
* `NodeReplacer.replace`: the above plus the usage update and the decision record;
* step 1 of the pass: `NodeFailureController.run` (finding the deleted node among the
  workload's nodes and marking it) followed by `NodeReplacer.run`.

The budget (issue 4) is 50 ms for one replacement: the exit status is 1 when
`NodeReplacer.replace` (or the search alone) is over it. Step 1 of the pass is reported
against the same figure for information. Whenever a figure is over 50 ms, or with
`--profile`, the script prints where step 1 spends its time (cProfile, cumulative).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_placement import BLOCK, HOST, RACK, generate, request

from scheduler.assignment import TopologyAssignment
from scheduler.cluster import ClusterState
from scheduler.codec import decode_assignment
from scheduler.features import DEFAULT_GATES
from scheduler.model import (
    Admission,
    Condition,
    PodSetAssignment,
    TopologyRequest,
    Workload,
)
from scheduler.node_failure import NodeFailureController
from scheduler.parse import ParsedObjects, parse_objects
from scheduler.placement import TASPodSetRequest
from scheduler.replacement import NodeReplacer
from scheduler.results import NODE_REPLACED, PassResult
from scheduler.topology_assignment import find_replacement_assignment, find_topology_assignment

BUDGET_MS = 50.0
FLAVOR = "tas"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
PODS = 1024


def setup_objects() -> list[dict]:
    kueue = "kueue.x-k8s.io/v1beta2"
    return [
        {"apiVersion": kueue, "kind": "Topology", "metadata": {"name": "default"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
        {"apiVersion": kueue, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {"topologyName": "default"}},
        {"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"],
             "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "1000000"},
                                                        {"name": "memory", "nominalQuota": "4000Ti"}]}]}]}},
        {"apiVersion": kueue, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ml"},
         "spec": {"clusterQueue": "cq"}},
    ]


def parse_cluster(node_count: int) -> ParsedObjects:
    node_objs, pod_objs = generate(node_count)
    objects = [("bench", o) for o in [*setup_objects(), *node_objs, *pod_objs]]
    return parse_objects(objects, decode_assignment=decode_assignment, warn=lambda _msg: None)


def without_node(parsed: ParsedObjects, name: str) -> ParsedObjects:
    """The same cluster after the node was deleted (its pod went with it)."""
    return ParsedObjects(
        nodes=[n for n in parsed.nodes if n.name != name],
        pods=[p for p in parsed.pods if p.node_name != name],
        topologies=parsed.topologies, flavors=parsed.flavors, cluster_queues=parsed.cluster_queues,
        local_queues=parsed.local_queues,
    )


def admitted_workload(req: TASPodSetRequest, ta: TopologyAssignment) -> Workload:
    usage = {r: v * req.count for r, v in req.single_pod_requests.items()}
    psa = PodSetAssignment(req.name, {r: FLAVOR for r in req.single_pod_requests}, req.count, usage, ta)
    return Workload("ml", "train", [req.pod_set], queue_name="lq", uid="uid-train",
                    admission=Admission("cq", [psa]),
                    conditions=[Condition("QuotaReserved", "True", "QuotaReserved"),
                                Condition("Admitted", "True", "Admitted")])


class Scenario:
    """A cluster with one node of an admitted workload deleted, and a way to undo a replacement."""

    def __init__(self, parsed: ParsedObjects, req: TASPodSetRequest) -> None:
        full = ClusterState(parsed, DEFAULT_GATES, lambda _msg: None)
        placed, reason = find_topology_assignment(full.tas_snapshots[FLAVOR], req, None, gates=DEFAULT_GATES)
        if reason:
            raise SystemExit(f"the workload does not fit: {reason}")
        self.req = req
        self.original = placed[req.name]
        if self.original.pod_count != req.count:
            raise SystemExit(f"placed {self.original.pod_count} pods, expected {req.count}")
        self.victim = self.original.domains[len(self.original.domains) // 2].values[-1]
        self.state = ClusterState(without_node(parsed, self.victim), DEFAULT_GATES, lambda _msg: None)
        self.wl = admitted_workload(req, self.original)
        self.state.workloads.append(self.wl)
        self.state.add_workload_usage(self.wl, sign=1)
        self.snap = self.state.tas_snapshots[FLAVOR]

    @property
    def psa(self) -> PodSetAssignment:
        return self.wl.admission.pod_set_assignments[0]

    def reset(self) -> None:
        """Put the original assignment (and its usage) back, with nothing marked."""
        self.state.add_workload_tas_usage(self.wl, sign=-1)
        self.psa.topology_assignment = self.original
        self.state.add_workload_tas_usage(self.wl, sign=1)
        self.wl.unhealthy_nodes.clear()
        self.wl.conditions = [c for c in self.wl.conditions if c.type != "Evicted"]

    # ------------------------------------------------------------ the three measured operations

    def search(self) -> TopologyAssignment:
        merged, _, reason = find_replacement_assignment(self.snap, self.req, self.original, self.victim,
                                                           gates=DEFAULT_GATES)
        if reason or merged is None:
            raise SystemExit(f"no replacement: {reason}")
        return merged

    def replace(self) -> PassResult:
        result = PassResult()
        self.wl.unhealthy_nodes[:] = [self.victim]
        NodeReplacer(self.state, NOW, result).replace(self.wl)
        return result

    def step_one(self) -> PassResult:
        result = PassResult()
        NodeFailureController(self.state, NOW, result).run()
        NodeReplacer(self.state, NOW, result).run()
        return result

    def check(self, result: PassResult) -> str:
        """The replacement landed: a NodeReplaced decision, every pod placed, the victim gone."""
        (decision,) = [d for d in result.decisions if d.kind == NODE_REPLACED]
        ta = self.psa.topology_assignment
        assert ta is not None and ta.pod_count == self.req.count
        assert self.victim not in {d.values[-1] for d in ta.domains}
        assert not self.wl.unhealthy_nodes
        return ", ".join(decision.replacement)


def timed_ms(fn: Callable[[], object], reset: Callable[[], None], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        reset()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    reset()
    return statistics.median(samples), min(samples)


def profile(scenario: Scenario, runs: int = 10) -> str:
    profiler = cProfile.Profile()
    for _ in range(runs):
        scenario.reset()
        profiler.enable()
        scenario.step_one()
        profiler.disable()
    scenario.reset()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(18)
    return out.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--profile", action="store_true", help="profile step 1 of the pass (cProfile)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    parsed = parse_cluster(args.nodes)
    print(f"{len(parsed.nodes)} nodes, {len(parsed.pods)} non-TAS pods (parsed in "
          f"{(time.perf_counter() - t0) * 1000:.0f} ms); one workload of {PODS} pods; "
          f"median of {args.repeat} runs, budget {BUDGET_MS:.0f} ms")
    cases = {
        "preferred block, 1 pod a node": request("main", PODS, "90", "300Gi", TopologyRequest(preferred=BLOCK)),
        "required block, 11 pods a node": request("main", PODS, "8", "16Gi", TopologyRequest(required=BLOCK)),
    }
    ok = True  # the replacement itself within budget
    for label, req in cases.items():
        scenario = Scenario(parsed, req)
        scenario.reset()
        new_nodes = scenario.check(scenario.replace())
        scenario.reset()
        scenario.check(scenario.step_one())
        print(f"\n{label}: {len(scenario.original.domains)} domains, {scenario.victim} deleted -> {new_nodes}")
        measured = {
            "find_replacement_assignment": timed_ms(scenario.search, scenario.reset, args.repeat),
            "NodeReplacer.replace": timed_ms(scenario.replace, scenario.reset, args.repeat),
            "step 1 (mark + replace)": timed_ms(scenario.step_one, scenario.reset, args.repeat),
        }
        over = False
        for name, (median, fastest) in measured.items():
            within = median <= BUDGET_MS
            over |= not within
            if name != "step 1 (mark + replace)":
                ok &= within
            print(f"  {name:30} median {median:7.2f} ms  (fastest {fastest:7.2f} ms)  "
                  f"{'ok' if within else f'over {BUDGET_MS:.0f} ms'}")
        if args.profile or over:
            print(profile(scenario))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
