"""Preemption speed: one scheduling cycle in which every ClusterQueue's head must preempt.

    .venv/bin/python benchmarks/bench_preemption.py [--nodes 4096] [--queues 8] [--repeat 5]

Cluster: `bench_placement`'s generator (16 nodes a rack, 16 racks a block, 96 CPU a node, one
daemon pod of 1 CPU each). `--queues` ClusterQueues share a cohort, each with an equal share of
the cluster's CPU as nominal quota and `withinClusterQueue: LowerPriority`. Every node runs one
low-priority workload of 90 CPU admitted in the queue owning that slice of the cluster, so the
cluster is full. Each queue's head is a high-priority workload asking for a whole rack
(16 pods of 90 CPU, required rack): to admit it, 16 of its queue's workloads must go, and only
those of one rack do.

Measured, median of `--repeat` runs: one `SchedulingCycle.run` (nomination with its preemption
simulations, target search with topology checks and fill-back, and issuing the preemptions).
Building the cluster state is outside the timing. Every run checks that each head found exactly
16 targets on one rack.

Also measured: why-pending of a head no cycle has evaluated yet, computed now with its
preemption search, on the same cluster (its quota is used up) and on one whose ClusterQueues
have twice the quota (the quota has room, the racks do not). Each answer must name the 16
workloads of one rack. As in the service, whose view of the cluster outlives the questions, the
snapshots and the quota tree are made beforehand (another head is explained first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_placement import BLOCK, HOST, RACK, generate

from scheduler.cluster import ClusterState
from scheduler.codec import decode_assignment
from scheduler.cycle import SchedulingCycle
from scheduler.engine import Engine
from scheduler.explain import explain_workload
from scheduler.features import DEFAULT_GATES
from scheduler.parse import parse_objects
from scheduler.results import PassResult

NOW = datetime(2026, 1, 1, tzinfo=UTC)
V1B2 = "kueue.x-k8s.io/v1beta2"


def pod_set(count: int, tr: dict | None = None) -> dict:
    ps = {"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "90"}}}]}}}
    if tr:
        ps["topologyRequest"] = tr
    return ps


def objects(nodes: int, queues: int, quota_factor: int = 1) -> list[dict]:
    node_objs, pod_objs = generate(nodes)
    share = nodes // queues
    objs: list[dict] = [*node_objs, *pod_objs,
                        {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "default"},
                         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
                        {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
                         "spec": {"topologyName": "default"}}]
    for q in range(queues):
        objs.append({"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": f"cq{q}"}, "spec": {
            "cohortName": "all", "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "tas", "resources": [{"name": "cpu", "nominalQuota": str(90 * share * quota_factor)}]}]}]}})
        objs.append({"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": f"lq{q}", "namespace": "ns"},
                     "spec": {"clusterQueue": f"cq{q}"}})
        objs.append({"apiVersion": V1B2, "kind": "Workload",
                     "metadata": {"name": f"head{q}", "namespace": "ns", "uid": f"head{q}"},
                     "spec": {"queueName": f"lq{q}", "priority": 100,
                              "podSets": [pod_set(16, {"required": RACK})]}})
    for i, node in enumerate(node_objs):
        q = min(i // share, queues - 1)
        labels = node["metadata"]["labels"]
        objs.append({"apiVersion": V1B2, "kind": "Workload",
                     "metadata": {"name": f"low{i}", "namespace": "ns", "uid": f"low{i}"},
                     "spec": {"queueName": f"lq{q}", "priority": 0, "podSets": [pod_set(1, {"required": HOST})]},
                     "status": {
                         "admission": {"clusterQueue": f"cq{q}", "podSetAssignments": [{
                             "name": "main", "flavors": {"cpu": "tas"}, "count": 1,
                             "topologyAssignment": {"levels": [HOST], "domains": [
                                 {"values": [labels[HOST]], "count": 1}]}}]},
                         "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                         "lastTransitionTime": "2025-12-31T00:00:00Z"},
                                        {"type": "Admitted", "status": "True", "reason": "Admitted",
                                         "lastTransitionTime": "2025-12-31T00:00:00Z"}]}})
    return objs


def one_cycle(parsed_objects: list[tuple[str, dict]], queues: int) -> float:
    parsed = parse_objects(parsed_objects, decode_assignment=decode_assignment, warn=lambda _: None)
    engine = Engine.from_parsed(parsed, DEFAULT_GATES)  # its queues are part of the state, built beforehand
    start = time.perf_counter()
    decided = SchedulingCycle(engine.state, engine.queues, NOW, PassResult()).run()
    elapsed = time.perf_counter() - start
    for q in range(queues):
        head = decided[f"ns/head{q}"]
        assert head.message.endswith("Pending the preemption of 16 workload(s)"), head.message
    victims = [w for w in decided.values() if w.status == "Preempted"]
    assert len(victims) == 16 * queues, len(victims)
    return elapsed


def explain_head(parsed_objects: list[tuple[str, dict]]) -> float:
    parsed = parse_objects(parsed_objects, decode_assignment=decode_assignment, warn=lambda _: None)
    state = ClusterState(parsed, DEFAULT_GATES, lambda _: None)
    explain_workload(state, state.workload("ns/head1"))  # as in a service: snapshots and quota made already
    head = state.workload("ns/head0")
    start = time.perf_counter()
    why = explain_workload(state, head)
    elapsed = time.perf_counter() - start
    [preemption] = [s for s in why.suggestions if s.kind == "preemption"]
    targets = preemption.details["targets"]
    assert len(targets) == 16, preemption.message
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    objs = [("bench", o) for o in objects(args.nodes, args.queues)]
    samples = [one_cycle(objs, args.queues) for _ in range(args.repeat)]
    print(f"{args.nodes} nodes, {args.nodes} admitted workloads, {args.queues} queues each preempting 16: "
          f"one cycle median {statistics.median(samples) * 1000:.0f} ms "
          f"(min {min(samples) * 1000:.0f}, max {max(samples) * 1000:.0f})")
    for factor, shape in ((1, "quota used up"), (2, "quota with room, racks full")):
        objs = [("bench", o) for o in objects(args.nodes, args.queues, factor)]
        samples = [explain_head(objs) for _ in range(args.repeat)]
        print(f"why-pending of a head not yet evaluated, computed now ({shape}): median "
              f"{statistics.median(samples) * 1000:.0f} ms (min {min(samples) * 1000:.0f}, "
              f"max {max(samples) * 1000:.0f})")


if __name__ == "__main__":
    main()
